/* The CUDA driver API the GPU engine uses, with cuda.h's own types: each entry point comes from cuGetProcAddress
 * (util/cuda_driver.c) at the ABI of the cuda.h it was compiled against, so the library links no CUDA library.
 * Compiled only where the CUDA toolkit is (DCCL_HAVE_DEVICE_CODE). */
#ifndef DCCL_CUDA_API_H_
#define DCCL_CUDA_API_H_

#include <cuda.h>

#include "dccl.h"
#include "util/error.h"

struct dccl_cuda_api {
  __typeof__(cuModuleLoadData) *module_load_data;
  __typeof__(cuModuleGetFunction) *module_get_function;
  __typeof__(cuFuncGetAttribute) *func_get_attribute;
  __typeof__(cuFuncSetAttribute) *func_set_attribute;
  __typeof__(cuLaunchKernel) *launch_kernel;
  __typeof__(cuOccupancyMaxActiveBlocksPerMultiprocessor) *occupancy;
  __typeof__(cuDeviceGet) *device_get;
  __typeof__(cuDeviceGetAttribute) *device_get_attribute;
  __typeof__(cuDeviceCanAccessPeer) *device_can_access_peer;
  __typeof__(cuCtxGetCurrent) *ctx_get_current;
  __typeof__(cuCtxSetCurrent) *ctx_set_current;
  __typeof__(cuCtxEnablePeerAccess) *ctx_enable_peer_access;
  __typeof__(cuMemAlloc) *mem_alloc;
  __typeof__(cuMemFree) *mem_free;
  __typeof__(cuMemHostAlloc) *mem_host_alloc;
  __typeof__(cuMemFreeHost) *mem_free_host;
  __typeof__(cuMemHostGetDevicePointer) *mem_host_get_device_pointer;
  __typeof__(cuMemHostRegister) *mem_host_register;
  __typeof__(cuMemHostUnregister) *mem_host_unregister;
  __typeof__(cuMemcpyHtoD) *memcpy_htod;
  __typeof__(cuMemcpyDtoH) *memcpy_dtoh;
  __typeof__(cuMemcpyAsync) *memcpy_async;
  __typeof__(cuMemsetD8) *memset_d8;
  __typeof__(cuMemGetAddressRange) *mem_get_address_range;
  __typeof__(cuMemGetAllocationGranularity) *mem_get_granularity;
  __typeof__(cuMemCreate) *mem_create;
  __typeof__(cuMemRelease) *mem_release;
  __typeof__(cuMemAddressReserve) *mem_address_reserve;
  __typeof__(cuMemAddressFree) *mem_address_free;
  __typeof__(cuMemMap) *mem_map;
  __typeof__(cuMemUnmap) *mem_unmap;
  __typeof__(cuMemSetAccess) *mem_set_access;
  __typeof__(cuMemRetainAllocationHandle) *mem_retain_allocation_handle;
  __typeof__(cuMemExportToShareableHandle) *mem_export_to_shareable_handle;
  __typeof__(cuMemImportFromShareableHandle) *mem_import_from_shareable_handle;
  __typeof__(cuMemcpyHtoDAsync) *memcpy_htod_async;
  __typeof__(cuEventCreate) *event_create;
  __typeof__(cuEventRecord) *event_record;
  __typeof__(cuEventSynchronize) *event_synchronize;
  __typeof__(cuEventDestroy) *event_destroy;
  __typeof__(cuStreamWaitEvent) *stream_wait_event;
  __typeof__(cuStreamWriteValue32) *stream_write_value32;
  __typeof__(cuStreamWaitValue32) *stream_wait_value32;
  __typeof__(cuPointerGetAttribute) *pointer_get_attribute;
  __typeof__(cuIpcGetMemHandle) *ipc_get_mem_handle;
  __typeof__(cuIpcOpenMemHandle) *ipc_open_mem_handle;
  __typeof__(cuIpcCloseMemHandle) *ipc_close_mem_handle;
  __typeof__(cuStreamIsCapturing) *stream_is_capturing;
  __typeof__(cuStreamSynchronize) *stream_synchronize;
  __typeof__(cuStreamQuery) *stream_query;
  __typeof__(cuStreamCreate) *stream_create;
  __typeof__(cuStreamDestroy) *stream_destroy;
  __typeof__(cuGetErrorString) *get_error_string;
  __typeof__(cuThreadExchangeStreamCaptureMode) *exchange_capture_mode;
};

extern struct dccl_cuda_api dccl_cu;

/* Loads every entry point once; ncclSystemError naming the first one missing, or when there is no driver. */
ncclResult_t dccl_cuda_api_load(void);
/* The driver's text for a result code. */
const char *dccl_cuda_error_text(CUresult r);

/* A driver result as DCCL's: on failure records "what: error text (code)" and gives ncclUnhandledCudaError. */
static inline ncclResult_t dccl_cu_result(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return ncclSuccess;
  return dccl_error(ncclUnhandledCudaError, "%s: %s (%d)", what, dccl_cuda_error_text(r), (int)r);
}

/* Checks a driver call; on failure records "what: error text (code)" and returns ncclUnhandledCudaError. */
#define DCCL_CUCHECK(call, what)                     \
  do {                                               \
    CUresult cu_res_ = (call);                       \
    if (cu_res_ != CUDA_SUCCESS)                     \
      return dccl_cu_result(cu_res_, (what));        \
  } while (0)

#endif
