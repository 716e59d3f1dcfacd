/* The allocator PyTorch's torch.cuda.MemPool takes through torch.cuda.memory.CUDAPluggableAllocator, over
 * ncclMemAlloc/ncclMemFree (as Megatron-LM's and APEX's NCCL allocators do). PyTorch's own
 * `backend.mem_allocator` refuses GPUs without multicast (one H200 alone has none), so the memory-pool test
 * (tests/dropin/torch_ddp.py --mempool) loads this library instead. The stream argument is unused: cuMem
 * allocations are not stream-ordered. */
#include <stdio.h>

#include "dccl.h"

void *dccl_torch_pool_alloc(size_t size, int device, void *stream) {
  (void)device, (void)stream;
  void *ptr = NULL;
  ncclResult_t r = ncclMemAlloc(&ptr, size);
  if (r != ncclSuccess) fprintf(stderr, "ncclMemAlloc(%zu B): %s\n", size, ncclGetErrorString(r));
  return r == ncclSuccess ? ptr : NULL;
}

void dccl_torch_pool_free(void *ptr, size_t size, int device, void *stream) {
  (void)size, (void)device, (void)stream;
  ncclResult_t r = ncclMemFree(ptr);
  if (r != ncclSuccess) fprintf(stderr, "ncclMemFree(%p): %s\n", ptr, ncclGetErrorString(r));
}
