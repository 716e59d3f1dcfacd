/* A device allocation of one process mapped into another on the same GPU. Three kinds, chosen by how the memory
 * was allocated: cudaMalloc/cuMemAlloc memory by a legacy IPC handle (it names the whole allocation, so a range
 * travels as its allocation and an offset); a cuMem allocation alone in its reserved range (ncclMemAlloc) as a
 * POSIX file descriptor, which the caller passes over a Unix socket (util/fd_pass.h) and the importer maps at an
 * address it reserves; and cuMem allocations that share one reserved range (PyTorch's expandable segments: a
 * buffer may span several) as a span: the importer mirrors the whole range (reserved once) and maps each part,
 * each by its own descriptor, at its offset, as calls come to use it. Memory that none can share (cudaMallocAsync
 * pools, managed memory, cuMem without a POSIX handle type) is refused with the reason. Without the CUDA toolkit at
 * build time these say so. */
#ifndef DCCL_CUDA_PEER_MEM_H_
#define DCCL_CUDA_PEER_MEM_H_

#include <stddef.h>
#include <stdint.h>

#include "dccl.h"
#include "util/error.h"

enum dccl_peer_mem_kind { DCCL_PEER_MEM_LEGACY = 1, DCCL_PEER_MEM_FD = 2, DCCL_PEER_MEM_SPAN = 3 };

/* What another process needs to map the allocation holding a range (plain bytes: it crosses the bootstrap). */
struct dccl_peer_mem_export {
  int32_t kind;
  int32_t device; /* the allocation's device ordinal in the owner's process */
  uint64_t base;  /* the allocation's first byte, in the owner's process */
  uint64_t bytes; /* the allocation's size */
  uint64_t id;    /* the allocation's buffer id (CU_POINTER_ATTRIBUTE_BUFFER_ID): another allocation at the same
                     address has another */
  unsigned char ipc[64]; /* CUipcMemHandle: the legacy kind */
};

/* One cuMem allocation of a reserved range: its offset in the range, its size, its buffer id (a new allocation at
 * a freed one's place has another). */
struct dccl_peer_mem_part {
  uint64_t at, bytes, id;
};
/* The parts a buffer in a reserved range lies in, in address order: at most DCCL_PEER_MEM_MAX_PARTS (a 1 GiB
 * tensor of PyTorch's 20 MiB parts takes 52 of them; larger spans take the FIFO algorithms). */
#define DCCL_PEER_MEM_MAX_PARTS 64
struct dccl_peer_mem_parts {
  uint32_t n, pad;
  struct dccl_peer_mem_part part[DCCL_PEER_MEM_MAX_PARTS];
};

/* The allocation that holds a peer's range, as mapped here. */
struct dccl_peer_mem_map {
  int32_t kind;
  uint64_t base, bytes;
};

#ifdef DCCL_HAVE_DEVICE_CODE
/* Describes the allocation holding [ptr, ptr + bytes) of device memory; *fd gets a new descriptor for the FD kind
 * (the caller sends, then closes it), -1 for the legacy kind. */
ncclResult_t dccl_peer_mem_export(const void *ptr, size_t bytes, struct dccl_peer_mem_export *e, int *fd);
/* Quietly (no error recorded or logged): 1 with `e` describing the allocation holding [ptr, ptr + bytes) where
 * another process can map it (cudaMalloc memory by its legacy IPC handle; a cuMem allocation alone in its reserved
 * range that exports as a POSIX file descriptor, the FD kind, whose descriptor dccl_peer_mem_export makes; cuMem
 * memory in a range reserved for several allocations, each exportable, the SPAN kind: `e` names the reserved range
 * (base, bytes; id = bytes) and `parts` the allocations the buffer lies in; refused where `parts` is NULL), else 0
 * (host, pool or managed memory, a range past its allocation, a gap in a span, or no driver). For checks made at
 * every call: the last 32 answers of the first two kinds are kept, found again by buffer id; the parts of the last
 * 4 ranges are kept too, each checked by its buffer id (one driver call a part: any may have been replaced). */
int dccl_peer_mem_describe(const void *ptr, size_t bytes, struct dccl_peer_mem_export *e,
                           struct dccl_peer_mem_parts *parts);
/* The allocation at `addr` (a span's part) as a new descriptor (the caller sends, then closes it), when it still is
 * buffer `id`. */
ncclResult_t dccl_peer_mem_export_part(uint64_t addr, uint64_t id, int *fd);
/* A peer's reserved range mirrored here: `bytes` of address space reserved once, aligned as the owner's `start`
 * (so each part lands as aligned as the owner mapped it), each part mapped at its offset from the received
 * descriptor (closed here, mapped or not) for device `ordinal`, unmapped one by one (no kernel may still use it),
 * and the mirror let go with nothing mapped in it. */
ncclResult_t dccl_peer_mem_mirror_reserve(uint64_t start, uint64_t bytes, uint64_t *local);
ncclResult_t dccl_peer_mem_mirror_map(uint64_t local, const struct dccl_peer_mem_part *p, int fd, int ordinal);
void dccl_peer_mem_mirror_unmap(uint64_t local, const struct dccl_peer_mem_part *p);
void dccl_peer_mem_mirror_free(uint64_t local, uint64_t bytes);
/* Maps an exported allocation into this process for device `ordinal` (the current context's); for the FD kind
 * `fd` is the received descriptor (closed here, mapped or not). */
ncclResult_t dccl_peer_mem_import(const struct dccl_peer_mem_export *e, int fd, int ordinal,
                                  struct dccl_peer_mem_map *m);
/* Undoes an import. No kernel may still use the mapping. */
void dccl_peer_mem_close(struct dccl_peer_mem_map *m);
#else
#include <unistd.h>

static inline ncclResult_t dccl_peer_mem_export(const void *ptr, size_t bytes, struct dccl_peer_mem_export *e,
                                                int *fd) {
  (void)bytes, (void)e;
  *fd = -1;
  return dccl_error(ncclInvalidUsage, "%p: this DCCL was built without the CUDA toolkit", ptr);
}
static inline int dccl_peer_mem_describe(const void *ptr, size_t bytes, struct dccl_peer_mem_export *e,
                                         struct dccl_peer_mem_parts *parts) {
  (void)ptr, (void)bytes, (void)e, (void)parts;
  return 0;
}
static inline ncclResult_t dccl_peer_mem_export_part(uint64_t addr, uint64_t id, int *fd) {
  (void)addr, (void)id;
  *fd = -1;
  return dccl_error(ncclInvalidUsage, "this DCCL was built without the CUDA toolkit");
}
static inline ncclResult_t dccl_peer_mem_mirror_reserve(uint64_t start, uint64_t bytes, uint64_t *local) {
  (void)start, (void)bytes;
  *local = 0;
  return dccl_error(ncclInvalidUsage, "this DCCL was built without the CUDA toolkit");
}
static inline ncclResult_t dccl_peer_mem_mirror_map(uint64_t local, const struct dccl_peer_mem_part *p, int fd,
                                                    int ordinal) {
  (void)local, (void)p, (void)ordinal;
  if (fd >= 0) close(fd);
  return dccl_error(ncclInvalidUsage, "this DCCL was built without the CUDA toolkit");
}
static inline void dccl_peer_mem_mirror_unmap(uint64_t local, const struct dccl_peer_mem_part *p) {
  (void)local, (void)p;
}
static inline void dccl_peer_mem_mirror_free(uint64_t local, uint64_t bytes) { (void)local, (void)bytes; }
static inline ncclResult_t dccl_peer_mem_import(const struct dccl_peer_mem_export *e, int fd, int ordinal,
                                                struct dccl_peer_mem_map *m) {
  (void)e, (void)fd, (void)ordinal, (void)m;
  return dccl_error(ncclInvalidUsage, "this DCCL was built without the CUDA toolkit");
}
static inline void dccl_peer_mem_close(struct dccl_peer_mem_map *m) { (void)m; }
#endif

#endif
