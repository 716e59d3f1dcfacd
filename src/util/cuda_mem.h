/* GPU memory that other processes can map (ncclMemAlloc/ncclMemFree): cuMem allocations with a POSIX file
 * descriptor handle, mapped read-write for the device current at the call. Without the CUDA toolkit at build time
 * these say that DCCL was built without it. */
#ifndef DCCL_CUDA_MEM_H_
#define DCCL_CUDA_MEM_H_

#include <stddef.h>

#include "dccl.h"
#include "util/error.h"

#ifdef DCCL_HAVE_DEVICE_CODE
/* Allocates `size` bytes (rounded up to the device's granularity) on the current context's device, or device 0's
 * primary context when the thread has none. */
ncclResult_t dccl_cuda_mem_alloc(void **ptr, size_t size);
/* Frees what dccl_cuda_mem_alloc returned; anything else is refused with the reason. */
ncclResult_t dccl_cuda_mem_free(void *ptr);
#else
static inline ncclResult_t dccl_cuda_mem_alloc(void **ptr, size_t size) {
  (void)ptr, (void)size;
  return dccl_error(ncclInvalidUsage, "ncclMemAlloc: this DCCL was built without the CUDA toolkit");
}
static inline ncclResult_t dccl_cuda_mem_free(void *ptr) {
  return dccl_error(ncclInvalidUsage, "ncclMemFree: this DCCL was built without the CUDA toolkit (%p)", ptr);
}
#endif

#endif
