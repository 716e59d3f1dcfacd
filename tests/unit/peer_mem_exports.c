/* The quiet check the first-use meeting asks at every call (dccl_peer_mem_describe, src/util/cuda_peer_mem.c),
 * without a GPU: the module is built against a fake driver holding a few allocations (base, size, buffer id, cuMem
 * or not), which counts the calls made. Checked: a first look at a cudaMalloc buffer describes its allocation with
 * its IPC handle, asking each question once; a second look at it (or at another buffer inside it) asks the driver
 * one question and gives the same answer; an allocation freed and made again at the same address (a new buffer id)
 * is described afresh, never from the old entry; a single cuMem allocation whose allowed handle types include a
 * file descriptor is described as the FD kind (asked of its attributes, no export made) and kept like the others; a cuMem allocation that cannot
 * export, a buffer across two cuMem allocations of one range (expandable segments; a buffer inside one of them is
 * that allocation), a range past its allocation and unknown addresses are refused every time (no negative answer
 * is kept); more allocations than the cache holds still give
 * right answers; a forked child does not use its parent's entries. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cuda_api.h"
#include "util/cuda_peer_mem.h"
#include "unit_check.h"

struct alloc {
  CUdeviceptr base;
  size_t size;
  unsigned long long id;
  int cumem;      /* 1: exports as a file descriptor; 2: cuMem without a POSIX handle type */
  size_t range;   /* the reserved range the driver reports, where it holds more than this allocation */
};
static struct alloc allocs[64];
static int nallocs, calls;

ncclResult_t dccl_cuda_api_load(void) { return ncclSuccess; }
const char *dccl_cuda_error_text(CUresult r) {
  (void)r;
  return "fake driver error";
}

static const struct alloc *find(CUdeviceptr p) {
  for (int i = 0; i < nallocs; i++)
    if (p >= allocs[i].base && p < allocs[i].base + allocs[i].size) return &allocs[i];
  return NULL;
}
static CUresult fake_attribute(void *data, CUpointer_attribute what, CUdeviceptr p) {
  calls++;
  const struct alloc *a = find(p);
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  switch (what) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned int *)data = CU_MEMORYTYPE_DEVICE; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = a->id; break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: /* 4 bytes, as the narrowest driver might write */
      *(unsigned int *)data = a->cumem == 1 ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : 0;
      break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
static CUresult fake_range(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
  calls++;
  const struct alloc *a = find(p);
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  *base = a->base;
  *size = a->range ? a->range : a->size;
  return CUDA_SUCCESS;
}
static CUresult fake_retain(CUmemGenericAllocationHandle *h, void *p) {
  calls++;
  const struct alloc *a = find((CUdeviceptr)(uintptr_t)p);
  if (!a || !a->cumem) return CUDA_ERROR_INVALID_VALUE;
  *h = (CUmemGenericAllocationHandle)a->id;
  return CUDA_SUCCESS;
}
static CUresult fake_release(CUmemGenericAllocationHandle h) {
  (void)h;
  return CUDA_SUCCESS;
}
static CUresult fake_ipc_handle(CUipcMemHandle *h, CUdeviceptr p) {
  calls++;
  const struct alloc *a = find(p);
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  memset(h, 0, sizeof(*h));
  memcpy(h->reserved, &a->id, sizeof(a->id)); /* the handle names the allocation */
  return CUDA_SUCCESS;
}

struct dccl_cuda_api dccl_cu = {.pointer_get_attribute = fake_attribute, .mem_get_address_range = fake_range,
                                .mem_retain_allocation_handle = fake_retain, .mem_release = fake_release,
                                .ipc_get_mem_handle = fake_ipc_handle};

/* Asks about [p, p + bytes): whether it is shareable, the driver calls it took, and the description. */
static int ask(CUdeviceptr p, size_t bytes, int *took, struct dccl_peer_mem_export *e) {
  calls = 0;
  int ok = dccl_peer_mem_describe((const void *)(uintptr_t)p, bytes, e);
  *took = calls;
  return ok;
}

static int describes(const struct dccl_peer_mem_export *e, const struct alloc *a) {
  unsigned long long named = 0;
  memcpy(&named, e->ipc, sizeof(named));
  return e->kind == DCCL_PEER_MEM_LEGACY && e->base == a->base && e->bytes == a->size && e->id == a->id &&
         named == a->id;
}

int main(void) {
  allocs[nallocs++] = (struct alloc){0x7f0000000000ull, 64 << 20, 101, 0, 0};
  allocs[nallocs++] = (struct alloc){0x7f0010000000ull, 2 << 20, 102, 1, 0}; /* cuMem, exportable */
  struct dccl_peer_mem_export e;
  int took = 0, first = 0;

  check(ask(allocs[0].base + 4096, 1 << 20, &first, &e) && describes(&e, &allocs[0]),
        "a cudaMalloc buffer is described by its allocation and handle");
  /* Buffer id, memory type, ordinal, range, cuMem or not, IPC handle: each asked once. */
  check(first == 6, "a first look asks the driver 6 questions (took %d)", first);
  check(ask(allocs[0].base + 4096, 1 << 20, &took, &e) && describes(&e, &allocs[0]) && took == 1 && first > took,
        "the same buffer again: one driver call (took %d, the first %d)", took, first);
  check(ask(allocs[0].base + (32 << 20), 32 << 20, &took, &e) && describes(&e, &allocs[0]) && took == 1,
        "another buffer of the allocation: one driver call (took %d)", took);
  check(!ask(allocs[0].base + (32 << 20), (32 << 20) + 1, &took, &e) && e.kind == 0,
        "a range past its allocation is refused");
  check(ask(allocs[1].base + 64, 4096, &first, &e) && e.kind == DCCL_PEER_MEM_FD && e.base == allocs[1].base &&
        e.bytes == allocs[1].size && e.id == allocs[1].id,
        "a cuMem allocation that may export as a descriptor is the FD kind (kind %d)", (int)e.kind);
  /* Buffer id, memory type, ordinal, range, cuMem (twice: first and last byte), allowed handle types: no export. */
  check(first == 7, "a cuMem allocation's first look asks 7 questions, none an export (took %d)", first);
  check(ask(allocs[1].base, 64, &took, &e) && e.kind == DCCL_PEER_MEM_FD && took == 1,
        "the cuMem allocation again: one driver call (took %d)", took);
  allocs[nallocs++] = (struct alloc){0x7f0020000000ull, 2 << 20, 103, 2, 0}; /* cuMem, no POSIX handle type */
  check(!ask(allocs[2].base, 4096, &took, &e) && !ask(allocs[2].base, 4096, &first, &e) && took == first && took > 1,
        "cuMem memory that cannot export is refused, asked in full every time (%d and %d calls)", took, first);
  /* An expandable segment: two allocations mapped side by side in one reserved range. The driver gives each
   * one's own bounds (as UCX and libfabric found), so a buffer across both runs past its allocation; one inside
   * the second is that allocation. A driver that gave the reservation's bounds is refused too. */
  allocs[nallocs++] = (struct alloc){0x7f0030000000ull, 2 << 20, 104, 1, 0};
  allocs[nallocs++] = (struct alloc){0x7f0030200000ull, 2 << 20, 105, 1, 0};
  check(!ask(allocs[3].base + (1 << 20), 2 << 20, &took, &e) && !ask(allocs[3].base + (1 << 20), 2 << 20, &first, &e)
            && e.kind == 0, "a buffer across two cuMem allocations is refused, every time");
  check(ask(allocs[4].base + 4096, 4096, &took, &e) && e.kind == DCCL_PEER_MEM_FD && e.base == allocs[4].base &&
            e.id == allocs[4].id, "a buffer inside the segment's second allocation is that allocation");
  allocs[3].range = 4 << 20;
  check(!ask(allocs[3].base, 4096, &took, &e) && e.kind == 0,
        "where the driver gives the reservation's bounds, a range of two allocations is refused");
  check(!ask(0x1000, 8, &took, &e), "an unknown address is refused");

  allocs[0].id = 201; /* freed and allocated again at the same address */
  check(ask(allocs[0].base + 4096, 1 << 20, &took, &e) && describes(&e, &allocs[0]) && took > 1,
        "an allocation made again at a freed one's address is described afresh (id %llu, %d calls)",
        (unsigned long long)e.id, took);

  int first_new = nallocs;
  for (int i = 0; i < 40; i++) /* more allocations than the cache holds (32), each asked twice */
    allocs[nallocs++] =
        (struct alloc){0x7f0100000000ull + ((CUdeviceptr)i << 30), 8 << 20, 300 + (unsigned)i, 0, 0};
  int right = 0;
  for (int round = 0; round < 2; round++)
    for (int i = first_new; i < nallocs; i++)
      right += ask(allocs[i].base + 64, 64, &took, &e) && describes(&e, &allocs[i]);
  check(right == 2 * 40, "40 allocations asked twice: %d of %d right", right, 2 * 40);

  ask(allocs[first_new].base, 64, &took, &e); /* in the cache now */
  pid_t child = fork();
  if (child == 0) {
    int again = 0;
    int ok = ask(allocs[first_new].base, 64, &again, &e) && describes(&e, &allocs[first_new]) && again > 1;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a forked child asks the driver itself");
  printf("peer_mem_exports: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
