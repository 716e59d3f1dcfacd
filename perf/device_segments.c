/* Device buffers the way PyTorch's expandable segments hold tensors (the perf tools' --segments): a range reserved
 * once, 20 MiB cuMem allocations exportable as POSIX file descriptors mapped into it end to end, the buffer starting
 * 1 MiB into the first, so a buffer of more than 19 MiB spans several allocations (DCCL maps such buffers for its
 * peers as spans, src/core/lazy_spans.c). The driver's cuMem entry points come through the CUDA runtime: the tools
 * do not link libcuda, which machines without a GPU lack. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

#define PART ((size_t)20 << 20)
#define LEAD ((size_t)1 << 20) /* where the buffer starts in the first part */
#define MAX_SEGMENTS 2         /* a tool's send and receive buffers */

static struct segment {
  CUdeviceptr base;
  size_t reserved;
  size_t nparts;
  CUmemGenericAllocationHandle *parts;
} segments[MAX_SEGMENTS];

static struct {
  __typeof__(cuMemAddressReserve) *reserve;
  __typeof__(cuMemAddressFree) *address_free;
  __typeof__(cuMemCreate) *create;
  __typeof__(cuMemRelease) *release;
  __typeof__(cuMemMap) *map;
  __typeof__(cuMemUnmap) *unmap;
  __typeof__(cuMemSetAccess) *set_access;
} cu;

static void must(int ok, const char *what) {
  if (ok) return;
  fprintf(stderr, "--segments: %s failed\n", what);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

static void *entry(const char *name) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult found;
  must(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) == cudaSuccess &&
           found == cudaDriverEntryPointSuccess && fn,
       name);
  return fn;
}

void *perf_segments_alloc(size_t bytes, int device) {
  if (!cu.reserve) {
    cu.reserve = entry("cuMemAddressReserve");
    cu.address_free = entry("cuMemAddressFree");
    cu.create = entry("cuMemCreate");
    cu.release = entry("cuMemRelease");
    cu.map = entry("cuMemMap");
    cu.unmap = entry("cuMemUnmap");
    cu.set_access = entry("cuMemSetAccess");
  }
  struct segment *s = NULL;
  for (int i = 0; i < MAX_SEGMENTS && !s; i++)
    if (!segments[i].base) s = &segments[i];
  must(s != NULL, "a third segment");
  s->nparts = (LEAD + bytes + PART - 1) / PART;
  s->reserved = 4 * s->nparts * PART; /* room to grow, as PyTorch reserves */
  s->parts = calloc(s->nparts, sizeof(*s->parts));
  must(s->parts != NULL, "calloc");
  must(cu.reserve(&s->base, s->reserved, 0, 0, 0) == CUDA_SUCCESS, "cuMemAddressReserve");
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                              .location = {CU_MEM_LOCATION_TYPE_DEVICE, device}};
  CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, device}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  for (size_t j = 0; j < s->nparts; j++) {
    must(cu.create(&s->parts[j], PART, &prop, 0) == CUDA_SUCCESS, "cuMemCreate");
    must(cu.map(s->base + j * PART, PART, 0, s->parts[j], 0) == CUDA_SUCCESS, "cuMemMap");
  }
  must(cu.set_access(s->base, s->nparts * PART, &access, 1) == CUDA_SUCCESS, "cuMemSetAccess");
  return (void *)(uintptr_t)(s->base + LEAD);
}

void perf_segments_free(void *p) {
  for (int i = 0; i < MAX_SEGMENTS; i++) {
    struct segment *s = &segments[i];
    if (!s->base || (uintptr_t)p != s->base + LEAD) continue;
    for (size_t j = 0; j < s->nparts; j++) {
      cu.unmap(s->base + j * PART, PART);
      cu.release(s->parts[j]);
    }
    cu.address_free(s->base, s->reserved);
    free(s->parts);
    *s = (struct segment){0};
  }
}
