/* The quiet check the first-use meeting asks at every call (dccl_peer_mem_describe, src/util/cuda_peer_mem.c),
 * without a GPU: the module is built against a fake driver holding a few allocations (base, size, buffer id, cuMem
 * or not), which counts the calls made. Checked: a first look at a cudaMalloc buffer describes its allocation with
 * its IPC handle, asking each question once; a second look at it (or at another buffer inside it) asks the driver
 * one question and gives the same answer; an allocation freed and made again at the same address (a new buffer id)
 * is described afresh, never from the old entry; a single cuMem allocation whose allowed handle types include a
 * file descriptor is described as the FD kind (asked of its attributes, no export made) and kept like the others; a
 * cuMem allocation that cannot export, a buffer across two cuMem allocations each alone in its range, a range past
 * its allocation and unknown addresses are refused every time (no negative answer is kept); more allocations than
 * the cache holds still give right answers; a forked child does not use its parent's entries. Memory in a range
 * reserved for several cuMem allocations (expandable segments) is the SPAN kind, named by the range, whether the
 * buffer lies in one part or across several, with the parts it lies in (offset, size, buffer id); asked again it
 * costs one driver call per part, and a part replaced in place is seen (its new id, described afresh); a gap, a part that cannot export, more than
 * DCCL_PEER_MEM_MAX_PARTS parts, or no room for the parts are refused; a part exports as a descriptor only while
 * it is the allocation the call named. */
#include <fcntl.h>
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
  size_t range;   /* what cuMemGetAddressRange reports, where a driver gave more than this allocation */
  CUdeviceptr reserve_base; /* the range reserved around it (RANGE_START_ADDR/SIZE), where larger than itself */
  size_t reserve_size;
};
static struct alloc allocs[160];
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
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *(CUdeviceptr *)data = a->reserve_size ? a->reserve_base : a->base;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = a->reserve_size ? a->reserve_size : a->size; break;
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

static CUresult fake_export(void *fd, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type,
                            unsigned long long flags) {
  (void)h, (void)type, (void)flags;
  *(int *)fd = open("/dev/null", O_RDONLY);
  return CUDA_SUCCESS;
}

struct dccl_cuda_api dccl_cu = {.pointer_get_attribute = fake_attribute, .mem_get_address_range = fake_range,
                                .mem_retain_allocation_handle = fake_retain, .mem_release = fake_release,
                                .ipc_get_mem_handle = fake_ipc_handle, .mem_export_to_shareable_handle = fake_export};

static struct dccl_peer_mem_parts parts;

/* Asks about [p, p + bytes): whether it is shareable, the driver calls it took, and the description. */
static int ask(CUdeviceptr p, size_t bytes, int *took, struct dccl_peer_mem_export *e) {
  calls = 0;
  int ok = dccl_peer_mem_describe((const void *)(uintptr_t)p, bytes, e, &parts);
  *took = calls;
  return ok;
}

static int describes(const struct dccl_peer_mem_export *e, const struct alloc *a) {
  unsigned long long named = 0;
  memcpy(&named, e->ipc, sizeof(named));
  return e->kind == DCCL_PEER_MEM_LEGACY && e->base == a->base && e->bytes == a->size && e->id == a->id &&
         named == a->id;
}

/* An expandable segment: 16 MiB reserved, three 2 MiB parts mapped from its start, then a gap. */
static void span_cases(void) {
  const CUdeviceptr r = 0x7f0040000000ull;
  const size_t mib2 = 2 << 20;
  int at = nallocs;
  for (int j = 0; j < 3; j++) allocs[nallocs++] = (struct alloc){r + j * mib2, mib2, 400 + j, 1, 0, r, 16 << 20};
  struct dccl_peer_mem_export e;
  int took = 0, again = 0;
  check(ask(r + mib2 + 4096, mib2, &took, &e) && e.kind == DCCL_PEER_MEM_SPAN && e.base == r &&
            e.bytes == (16u << 20) && e.id == (16u << 20) && parts.n == 2 && parts.part[0].at == mib2 &&
            parts.part[0].bytes == mib2 && parts.part[0].id == 401 && parts.part[1].at == 2 * mib2 &&
            parts.part[1].id == 402,
        "a buffer across two parts of a reserved range: the SPAN kind named by the range, with its two parts");
  check(ask(r + mib2 + 4096, mib2, &again, &e) && e.kind == DCCL_PEER_MEM_SPAN && parts.n == 2 &&
            parts.part[1].id == 402 && again == 2 && took > 2 * again,
        "the span again: one driver call per part (%d, the first look %d)", again, took);
  check(ask(r + 64, 64, &took, &e) && e.kind == DCCL_PEER_MEM_SPAN && e.base == r && parts.n == 1 &&
            parts.part[0].at == 0 && parts.part[0].id == 400,
        "a buffer inside one part is the span too (one row serves the range)");
  allocs[at + 2].id = 452; /* part 2 freed and mapped again in its place */
  check(ask(r + 2 * mib2, 4096, &took, &e) && parts.n == 1 && parts.part[0].id == 452,
        "a part replaced in place: its new buffer id");
  check(ask(r + mib2 + 4096, mib2, &took, &e) && parts.n == 2 && parts.part[1].id == 452,
        "a kept span whose second part was replaced: described afresh, with the new id");
  check(ask(r + mib2 + 4096, mib2, &took, &e) && parts.part[1].id == 452 && took == 2,
        "and kept again (%d calls)", took);
  check(!ask(r + 2 * mib2, mib2 + 1, &took, &e) && e.kind == 0, "a buffer running into the range's gap: refused");
  check(dccl_peer_mem_describe((const void *)(uintptr_t)(r + 64), 64, &e, NULL) == 0,
        "no room for the parts: a span is refused");
  allocs[at + 1].cumem = 2; /* another allocation in part 1's place, without a POSIX handle type */
  allocs[at + 1].id = 461;
  check(!ask(r + 64, 2 * mib2, &took, &e), "a part that cannot export: refused");
  allocs[at + 1].cumem = 1;
  allocs[at + 1].id = 401;
  const CUdeviceptr big = 0x7f0800000000ull;
  for (int j = 0; j < DCCL_PEER_MEM_MAX_PARTS + 1; j++)
    allocs[nallocs++] = (struct alloc){big + j * mib2, mib2, 600 + j, 1, 0, big, 1ull << 30};
  check(ask(big, DCCL_PEER_MEM_MAX_PARTS * mib2, &took, &e) && parts.n == DCCL_PEER_MEM_MAX_PARTS,
        "a buffer of %d parts: described", DCCL_PEER_MEM_MAX_PARTS);
  check(!ask(big, (DCCL_PEER_MEM_MAX_PARTS + 1) * mib2, &took, &e), "one part more: refused (FIFO algorithms)");
  int fd = -1;
  check(dccl_peer_mem_export_part(r + mib2, 401, &fd) == ncclSuccess && fd >= 0,
        "a part exports as a descriptor while it is the allocation named");
  if (fd >= 0) close(fd);
  check(dccl_peer_mem_export_part(r + 2 * mib2, 402, &fd) != ncclSuccess && fd == -1,
        "a part replaced since the call named it: not exported");
  nallocs = at; /* the cache tests below count on the table's room */
}

int main(void) {
  allocs[nallocs++] = (struct alloc){0x7f0000000000ull, 64 << 20, 101, 0, 0, 0, 0};
  allocs[nallocs++] = (struct alloc){0x7f0010000000ull, 2 << 20, 102, 1, 0, 0, 0}; /* cuMem, exportable */
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
  /* Buffer id, memory type, ordinal, range, cuMem (twice: first and last byte), the reserved range (start, size),
   * allowed handle types: no export. */
  check(first == 9, "a cuMem allocation's first look asks 9 questions, none an export (took %d)", first);
  check(ask(allocs[1].base, 64, &took, &e) && e.kind == DCCL_PEER_MEM_FD && took == 1,
        "the cuMem allocation again: one driver call (took %d)", took);
  allocs[nallocs++] = (struct alloc){0x7f0020000000ull, 2 << 20, 103, 2, 0, 0, 0}; /* cuMem, no POSIX handle type */
  check(!ask(allocs[2].base, 4096, &took, &e) && !ask(allocs[2].base, 4096, &first, &e) && took == first && took > 1,
        "cuMem memory that cannot export is refused, asked in full every time (%d and %d calls)", took, first);
  /* Two cuMem allocations side by side, each alone in its reserved range: a buffer across both is refused; one
   * inside the second is that allocation. A driver that gave two allocations' bounds as one is refused too. */
  allocs[nallocs++] = (struct alloc){0x7f0030000000ull, 2 << 20, 104, 1, 0, 0, 0};
  allocs[nallocs++] = (struct alloc){0x7f0030200000ull, 2 << 20, 105, 1, 0, 0, 0};
  check(!ask(allocs[3].base + (1 << 20), 2 << 20, &took, &e) && !ask(allocs[3].base + (1 << 20), 2 << 20, &first, &e)
            && e.kind == 0, "a buffer across two cuMem allocations, each in its own range, is refused, every time");
  check(ask(allocs[4].base + 4096, 4096, &took, &e) && e.kind == DCCL_PEER_MEM_FD && e.base == allocs[4].base &&
            e.id == allocs[4].id, "a buffer inside the second allocation is that allocation");
  allocs[3].range = 4 << 20;
  check(!ask(allocs[3].base, 4096, &took, &e) && e.kind == 0,
        "where the driver gives two allocations' bounds as one, the range is refused");
  allocs[3].range = 0;
  span_cases();
  check(!ask(0x1000, 8, &took, &e), "an unknown address is refused");

  allocs[0].id = 201; /* freed and allocated again at the same address */
  check(ask(allocs[0].base + 4096, 1 << 20, &took, &e) && describes(&e, &allocs[0]) && took > 1,
        "an allocation made again at a freed one's address is described afresh (id %llu, %d calls)",
        (unsigned long long)e.id, took);

  int first_new = nallocs;
  for (int i = 0; i < 40; i++) /* more allocations than the cache holds (32), each asked twice */
    allocs[nallocs++] =
        (struct alloc){0x7f0100000000ull + ((CUdeviceptr)i << 30), 8 << 20, 300 + (unsigned)i, 0, 0, 0, 0};
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
