/* Buffers in a range reserved for several cuMem allocations (PyTorch's expandable segments, made here by hand: 256
 * MiB reserved, 2 MiB allocations with a POSIX-fd handle type mapped into it as needed), mapped on first use
 * (DCCL_LAZY_MAP_BYTES=0, src/core/lazy_spans.c). NRANKS rank processes forked before anyone touches CUDA each make
 * their own range and all-reduce float32 sums over buffers that start inside a part and span several: out of place
 * twice, in place over parts the first call's buffer shares, again after a part was freed and another mapped in its
 * place (the peers must read the new memory: the sums say so), over parts mapped later, inside one part, over 51
 * parts, and over 70 (more than a record carries: the FIFO algorithms). Every sum is checked exactly (small
 * integers). Usage: gpu_spans NRANKS (under tests/cuda/with_mps.sh; its ctest wants the log line of a first-use
 * mapping). Exit codes: 0 passed, 1 a failure, 77 no usable GPU. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ok.h"
#include "dccl.h"
#include "fault_harness.h"
#include "gpu_rank.h"

#define MAX_RANKS 8
#define MIB ((size_t)1 << 20)
#define PART (2 * MIB)
#define NPARTS 128 /* the range: 256 MiB */

#define CU_OK(call)                                                                   \
  do {                                                                                \
    CUresult r_ = (call);                                                             \
    if (r_ != CUDA_SUCCESS) {                                                         \
      printf("FAIL: %s: CUresult %d (%s:%d)\n", #call, (int)r_, __FILE__, __LINE__); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

struct shared {
  ncclUniqueId id;
  int nranks;
};

struct range {
  CUdeviceptr base;
  CUmemGenericAllocationHandle part[NPARTS];
};

static void map_parts(struct range *g, int from, int to) {
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  for (int j = from; j < to; j++) {
    CU_OK(cuMemCreate(&g->part[j], PART, &prop, 0));
    CU_OK(cuMemMap(g->base + j * PART, PART, 0, g->part[j], 0));
    CU_OK(cuMemSetAccess(g->base + j * PART, PART, &access, 1));
  }
}

static void unmap_parts(struct range *g, int from, int to) {
  for (int j = from; j < to; j++) {
    CU_OK(cuMemUnmap(g->base + j * PART, PART));
    CU_OK(cuMemRelease(g->part[j]));
  }
}

/* All-reduce `count` floats from `send` (rank r's element i: (i % 7) + r + tag) into `recv` (may be `send`), and
 * check every sum. */
static void all_reduce(ncclComm_t comm, cudaStream_t s, int rank, int n, size_t send_at, size_t recv_at,
                       size_t count, int tag, struct range *g, const char *what) {
  float *host = malloc(count * sizeof(float));
  float *send = (float *)(uintptr_t)(g->base + send_at), *recv = (float *)(uintptr_t)(g->base + recv_at);
  for (size_t i = 0; i < count; i++) host[i] = (float)(i % 7 + (size_t)rank + (size_t)tag);
  CUDA_OK(cudaMemcpy(send, host, count * sizeof(float), cudaMemcpyHostToDevice));
  ncclResult_t r = ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, s);
  FH_EXPECT(r == ncclSuccess, "rank %d: %s: ncclAllReduce: %s", rank, what, ncclGetLastError(comm));
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(host, recv, count * sizeof(float), cudaMemcpyDeviceToHost));
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < count; i++) {
    float want = (float)(n * (int)(i % 7 + (size_t)tag) + n * (n - 1) / 2);
    if (host[i] != want && !wrong++) first = i;
  }
  FH_EXPECT(!wrong, "rank %d: %s: %zu of %zu sums wrong (first at %zu: %g)", rank, what, wrong, count, first,
            (double)host[first]);
  if (rank == 0) printf("%s: %zu floats, %s\n", what, count, wrong ? "WRONG" : "right");
  free(host);
}

static int rank_main(void *arg, int rank) {
  struct shared *sh = arg;
  ncclComm_t comm;
  int setup = gpu_rank_comm(&comm, sh->nranks, sh->id, rank);
  if (setup) return setup;
  int n = sh->nranks;
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  struct range g;
  CU_OK(cuMemAddressReserve(&g.base, NPARTS * PART, 0, 0, 0));
  map_parts(&g, 0, 16);
  const size_t k4 = 4096;
  all_reduce(comm, s, rank, n, MIB / 2 + k4, 12 * MIB + k4, 5 * MIB / 4, 1, &g, "out of place, parts 0-2 to 6-8");
  all_reduce(comm, s, rank, n, MIB / 2 + k4, 12 * MIB + k4, 5 * MIB / 4, 2, &g, "the same buffers again");
  all_reduce(comm, s, rank, n, 3 * MIB, 3 * MIB, 6 * MIB / 4, 3, &g, "in place, parts 1-4");
  CUDA_OK(cudaDeviceSynchronize());
  unmap_parts(&g, 2, 3); /* part 2 freed, another mapped in its place */
  map_parts(&g, 2, 3);
  all_reduce(comm, s, rank, n, 3 * MIB, 3 * MIB, 6 * MIB / 4, 4, &g, "in place, part 2 replaced");
  map_parts(&g, 16, 32);
  all_reduce(comm, s, rank, n, 30 * MIB + k4, 40 * MIB + k4, 8 * MIB / 4, 5, &g, "parts mapped later (15-19, 20-24)");
  all_reduce(comm, s, rank, n, 50 * MIB + k4, 50 * MIB + k4, 16384, 6, &g, "in place inside one part");
  map_parts(&g, 32, NPARTS);
  all_reduce(comm, s, rank, n, 64 * MIB + k4, 64 * MIB + k4, 100 * MIB / 4, 7, &g, "100 MiB over 51 parts");
  all_reduce(comm, s, rank, n, 110 * MIB, 110 * MIB, 140 * MIB / 4, 8, &g, "140 MiB over 70 parts (FIFO)");
  CUDA_OK(cudaStreamSynchronize(s));
  ncclCommDestroy(comm); /* before the range goes: the peers' mirrors of it close first */
  unmap_parts(&g, 0, NPARTS);
  CU_OK(cuMemAddressFree(g.base, NPARTS * PART));
  return fh_failures ? 1 : 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int n = argc == 2 ? atoi(argv[1]) : 0;
  if (n < 2 || n > MAX_RANKS) {
    fprintf(stderr, "usage: gpu_spans NRANKS(2-%d)\n", MAX_RANKS);
    return 2;
  }
  if (system("nvidia-smi -L > /dev/null 2>&1") != 0) {
    printf("SKIP: no usable GPU\n");
    return 77;
  }
  setenv("DCCL_LAZY_MAP_BYTES", "0", 1);
  struct shared *sh = fh_shared_alloc(sizeof(*sh));
  if (fh_unique_id(&sh->id) != ncclSuccess) return 1;
  sh->nranks = n;
  int status[MAX_RANKS], killed[MAX_RANKS];
  fh_run_ranks(rank_main, sh, n, 240, status, killed);
  for (int r = 0; r < n; r++) {
    char sbuf[64];
    FH_EXPECT(fh_status_ok(status[r]), "rank %d: %s", r, fh_status_str(status[r], sbuf, sizeof(sbuf)));
  }
  printf("gpu_spans %d ranks: %s\n", n, fh_failures ? "FAILED" : "passed");
  return fh_failures ? 1 : 0;
}
