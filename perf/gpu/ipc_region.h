/* GPU memory shared between processes, two ways: legacy CUDA IPC handles of cuMemAlloc memory (a handle names
 * the whole allocation, so the offset from its base travels with it; REGION_CUDAMALLOC: the runtime's cudaMalloc
 * memory, as PyTorch and DCCL's perf tools allocate it, shared the same way) and cuMem allocations exported as POSIX
 * file descriptors (imported, then mapped at an address the importer reserves). */
#ifndef DCCL_PERF_GPU_IPC_REGION_H_
#define DCCL_PERF_GPU_IPC_REGION_H_

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

enum region_kind { REGION_LEGACY, REGION_POSIX_FD, REGION_CUDAMALLOC };
const char *region_kind_name(enum region_kind kind);
/* The measurements' common options: --kind legacy|fd|cudamalloc, --mib S, --reps R. 1 when `flag` is one of them
 * and `value` was taken, 0 when it is none of them, -1 for a kind that is none of those words (the caller checks
 * the ranges). */
int region_option(const char *flag, const char *value, enum region_kind *kind, size_t *mib, int *reps);

/* Memory this process allocated and may export. */
struct region {
  enum region_kind kind;
  size_t size; /* the fd kind rounds up to the allocation granularity */
  CUdeviceptr ptr;
  CUmemGenericAllocationHandle handle; /* the fd kind only */
};

CUresult region_alloc(struct region *r, enum region_kind kind, size_t size, CUdevice dev);
void region_free(struct region *r);

/* What crosses to the peer for the address `at` inside a region. For the fd kind the descriptor goes beside it
 * (SCM_RIGHTS), and the receiver closes it. */
struct region_wire {
  int32_t kind;
  uint64_t size;   /* of the whole allocation */
  uint64_t offset; /* of `at` from the allocation's base */
  CUipcMemHandle ipc;
};
/* *fd gets a new descriptor for the fd kind (the caller closes it once sent), -1 for the legacy kind. */
CUresult region_export(const struct region *r, CUdeviceptr at, struct region_wire *w, int *fd);

/* A peer's region as this process sees it. */
struct mapping {
  enum region_kind kind;
  CUdeviceptr base, ptr; /* ptr = base + the exporter's offset */
  size_t size;
  CUmemGenericAllocationHandle handle;
};
/* What opening cost, in microseconds: for the fd kind each step, for the legacy kind the one call (total_us). */
struct open_cost {
  double import_us, reserve_us, map_us, access_us, total_us;
};
/* Opens or imports and maps; on failure returns the first failing call's result with nothing left mapped. */
CUresult mapping_open(struct mapping *m, const struct region_wire *w, int fd, CUdevice dev, struct open_cost *cost);
/* Unmaps and releases; *us (may be NULL) gets the time it took. */
CUresult mapping_close(struct mapping *m, double *us);

#endif
