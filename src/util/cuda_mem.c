/* ncclMemAlloc's memory (util/cuda_mem.h). cuMem rather than cuMemAlloc because it can be exported as a file
 * descriptor, which a peer process imports and maps (docs/gpu.md: legacy IPC handles do not work on it, and it
 * needs no handle per allocation to be kept). Freeing finds the allocation back from the address alone:
 * cuMemRetainAllocationHandle names it and cuMemGetAddressRange gives the range that was reserved. */
#include "util/cuda_mem.h"

#include "util/cuda_api.h"
#include "util/cuda_driver.h"

/* The device of the thread's current context; device 0's primary context made current when there is none (what
 * the runtime does for a program that never chose a device). */
static ncclResult_t current_device(CUdevice *dev) {
  int ordinal = dccl_cuda_current_ordinal();
  if (ordinal < 0) {
    void *primary = NULL;
    DCCLCHECK(dccl_cuda_primary_ctx_retain(0, &primary));
    DCCL_CUCHECK(dccl_cu.ctx_set_current((CUcontext)primary), "ncclMemAlloc: cuCtxSetCurrent");
    ordinal = 0;
  }
  DCCL_CUCHECK(dccl_cu.device_get(dev, ordinal), "ncclMemAlloc: cuDeviceGet");
  return ncclSuccess;
}

ncclResult_t dccl_cuda_mem_alloc(void **ptr, size_t size) {
  DCCLCHECK(dccl_cuda_api_load());
  CUdevice dev;
  DCCLCHECK(current_device(&dev));
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  DCCL_CUCHECK(dccl_cu.mem_get_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
               "ncclMemAlloc: cuMemGetAllocationGranularity");
  if (gran == 0) gran = 2u << 20;
  size_t bytes = (size + gran - 1) / gran * gran;
  if (bytes == 0) bytes = gran;
  CUmemGenericAllocationHandle handle;
  CUresult r = dccl_cu.mem_create(&handle, bytes, &prop, 0);
  if (r != CUDA_SUCCESS)
    return dccl_error(r == CUDA_ERROR_OUT_OF_MEMORY ? ncclSystemError : ncclUnhandledCudaError,
                      "ncclMemAlloc: cuMemCreate of %zu bytes on device %d: %s (%d)", bytes, (int)dev,
                      dccl_cuda_error_text(r), (int)r);
  CUdeviceptr va = 0;
  r = dccl_cu.mem_address_reserve(&va, bytes, gran, 0, 0);
  if (r == CUDA_SUCCESS) {
    r = dccl_cu.mem_map(va, bytes, 0, handle, 0);
    if (r == CUDA_SUCCESS) {
      CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
      r = dccl_cu.mem_set_access(va, bytes, &access, 1);
      if (r != CUDA_SUCCESS) dccl_cu.mem_unmap(va, bytes);
    }
    if (r != CUDA_SUCCESS) dccl_cu.mem_address_free(va, bytes);
  }
  dccl_cu.mem_release(handle); /* the mapping keeps the memory until it is unmapped */
  DCCL_CUCHECK(r, "ncclMemAlloc: mapping the allocation");
  *ptr = (void *)(uintptr_t)va;
  return ncclSuccess;
}

ncclResult_t dccl_cuda_mem_free(void *ptr) {
  DCCLCHECK(dccl_cuda_api_load());
  CUmemGenericAllocationHandle handle;
  if (dccl_cu.mem_retain_allocation_handle(&handle, ptr) != CUDA_SUCCESS)
    return dccl_error(ncclInvalidArgument, "ncclMemFree: %p was not allocated by ncclMemAlloc", ptr);
  dccl_cu.mem_release(handle);
  CUdeviceptr base = 0;
  size_t bytes = 0;
  DCCL_CUCHECK(dccl_cu.mem_get_address_range(&base, &bytes, (CUdeviceptr)(uintptr_t)ptr),
               "ncclMemFree: cuMemGetAddressRange");
  if (base != (CUdeviceptr)(uintptr_t)ptr)
    return dccl_error(ncclInvalidArgument, "ncclMemFree: %p is inside an allocation that starts at %p", ptr,
                      (void *)(uintptr_t)base);
  DCCL_CUCHECK(dccl_cu.mem_unmap(base, bytes), "ncclMemFree: cuMemUnmap");
  DCCL_CUCHECK(dccl_cu.mem_address_free(base, bytes), "ncclMemFree: cuMemAddressFree");
  return ncclSuccess;
}
