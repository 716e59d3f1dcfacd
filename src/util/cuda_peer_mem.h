/* A device allocation of one process mapped into another on the same GPU. Two kinds, chosen by how the memory was
 * allocated: cudaMalloc/cuMemAlloc memory by a legacy IPC handle (it names the whole allocation, so a range travels
 * as its allocation and an offset), cuMem memory (ncclMemAlloc, PyTorch's expandable segments) as a POSIX file
 * descriptor, which the caller passes over a Unix socket (util/fd_pass.h) and the importer maps at an address it
 * reserves. Memory that neither can share (cudaMallocAsync pools, managed memory, cuMem without a POSIX handle
 * type) is refused with the reason. Without the CUDA toolkit at build time these say so. */
#ifndef DCCL_CUDA_PEER_MEM_H_
#define DCCL_CUDA_PEER_MEM_H_

#include <stddef.h>
#include <stdint.h>

#include "dccl.h"
#include "util/error.h"

enum dccl_peer_mem_kind { DCCL_PEER_MEM_LEGACY = 1, DCCL_PEER_MEM_FD = 2 };

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
 * another process can map it (cudaMalloc memory by its legacy IPC handle; a single cuMem allocation that exports
 * as a POSIX file descriptor, the FD kind, whose descriptor dccl_peer_mem_export makes), else 0 (host, pool or
 * managed memory, a range of several cuMem allocations, a range past its allocation, or no driver). For checks
 * made at every call: the last 32 answers are kept, found again by buffer id. */
int dccl_peer_mem_describe(const void *ptr, size_t bytes, struct dccl_peer_mem_export *e);
/* Maps an exported allocation into this process for device `ordinal` (the current context's); for the FD kind
 * `fd` is the received descriptor (closed here, mapped or not). */
ncclResult_t dccl_peer_mem_import(const struct dccl_peer_mem_export *e, int fd, int ordinal,
                                  struct dccl_peer_mem_map *m);
/* Undoes an import. No kernel may still use the mapping. */
void dccl_peer_mem_close(struct dccl_peer_mem_map *m);
#else
static inline ncclResult_t dccl_peer_mem_export(const void *ptr, size_t bytes, struct dccl_peer_mem_export *e,
                                                int *fd) {
  (void)bytes, (void)e;
  *fd = -1;
  return dccl_error(ncclInvalidUsage, "%p: this DCCL was built without the CUDA toolkit", ptr);
}
static inline int dccl_peer_mem_describe(const void *ptr, size_t bytes, struct dccl_peer_mem_export *e) {
  (void)ptr, (void)bytes, (void)e;
  return 0;
}
static inline ncclResult_t dccl_peer_mem_import(const struct dccl_peer_mem_export *e, int fd, int ordinal,
                                                struct dccl_peer_mem_map *m) {
  (void)e, (void)fd, (void)ordinal, (void)m;
  return dccl_error(ncclInvalidUsage, "this DCCL was built without the CUDA toolkit");
}
static inline void dccl_peer_mem_close(struct dccl_peer_mem_map *m) { (void)m; }
#endif

#endif
