/* Loads the GPU engine's driver entry points (util/cuda_api.h). */
#include "util/cuda_api.h"

#include <pthread.h>
#include <stdio.h>

#include "util/cuda_driver.h"
#include "util/error.h"

struct dccl_cuda_api dccl_cu;

static const struct {
  const char *name;
  void **fn;
} entries[] = {
    {"cuModuleLoadData", (void **)&dccl_cu.module_load_data},
    {"cuModuleGetFunction", (void **)&dccl_cu.module_get_function},
    {"cuFuncGetAttribute", (void **)&dccl_cu.func_get_attribute},
    {"cuFuncSetAttribute", (void **)&dccl_cu.func_set_attribute},
    {"cuLaunchKernel", (void **)&dccl_cu.launch_kernel},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessor", (void **)&dccl_cu.occupancy},
    {"cuDeviceGet", (void **)&dccl_cu.device_get},
    {"cuDeviceGetAttribute", (void **)&dccl_cu.device_get_attribute},
    {"cuDeviceCanAccessPeer", (void **)&dccl_cu.device_can_access_peer},
    {"cuCtxGetCurrent", (void **)&dccl_cu.ctx_get_current},
    {"cuCtxSetCurrent", (void **)&dccl_cu.ctx_set_current},
    {"cuCtxEnablePeerAccess", (void **)&dccl_cu.ctx_enable_peer_access},
    {"cuMemAlloc", (void **)&dccl_cu.mem_alloc},
    {"cuMemFree", (void **)&dccl_cu.mem_free},
    {"cuMemHostAlloc", (void **)&dccl_cu.mem_host_alloc},
    {"cuMemFreeHost", (void **)&dccl_cu.mem_free_host},
    {"cuMemHostGetDevicePointer", (void **)&dccl_cu.mem_host_get_device_pointer},
    {"cuMemHostRegister", (void **)&dccl_cu.mem_host_register},
    {"cuMemHostUnregister", (void **)&dccl_cu.mem_host_unregister},
    {"cuMemcpyHtoD", (void **)&dccl_cu.memcpy_htod},
    {"cuMemcpyDtoH", (void **)&dccl_cu.memcpy_dtoh},
    {"cuMemcpyAsync", (void **)&dccl_cu.memcpy_async},
    {"cuMemsetD8", (void **)&dccl_cu.memset_d8},
    {"cuMemGetAddressRange", (void **)&dccl_cu.mem_get_address_range},
    {"cuMemGetAllocationGranularity", (void **)&dccl_cu.mem_get_granularity},
    {"cuMemCreate", (void **)&dccl_cu.mem_create},
    {"cuMemRelease", (void **)&dccl_cu.mem_release},
    {"cuMemAddressReserve", (void **)&dccl_cu.mem_address_reserve},
    {"cuMemAddressFree", (void **)&dccl_cu.mem_address_free},
    {"cuMemMap", (void **)&dccl_cu.mem_map},
    {"cuMemUnmap", (void **)&dccl_cu.mem_unmap},
    {"cuMemSetAccess", (void **)&dccl_cu.mem_set_access},
    {"cuMemRetainAllocationHandle", (void **)&dccl_cu.mem_retain_allocation_handle},
    {"cuMemExportToShareableHandle", (void **)&dccl_cu.mem_export_to_shareable_handle},
    {"cuMemImportFromShareableHandle", (void **)&dccl_cu.mem_import_from_shareable_handle},
    {"cuMemcpyHtoDAsync", (void **)&dccl_cu.memcpy_htod_async},
    {"cuEventCreate", (void **)&dccl_cu.event_create},
    {"cuEventRecord", (void **)&dccl_cu.event_record},
    {"cuEventSynchronize", (void **)&dccl_cu.event_synchronize},
    {"cuEventDestroy", (void **)&dccl_cu.event_destroy},
    {"cuStreamWaitEvent", (void **)&dccl_cu.stream_wait_event},
    {"cuStreamWriteValue32", (void **)&dccl_cu.stream_write_value32},
    {"cuStreamWaitValue32", (void **)&dccl_cu.stream_wait_value32},
    {"cuPointerGetAttribute", (void **)&dccl_cu.pointer_get_attribute},
    {"cuIpcGetMemHandle", (void **)&dccl_cu.ipc_get_mem_handle},
    {"cuIpcOpenMemHandle", (void **)&dccl_cu.ipc_open_mem_handle},
    {"cuIpcCloseMemHandle", (void **)&dccl_cu.ipc_close_mem_handle},
    {"cuStreamIsCapturing", (void **)&dccl_cu.stream_is_capturing},
    {"cuStreamSynchronize", (void **)&dccl_cu.stream_synchronize},
    {"cuStreamQuery", (void **)&dccl_cu.stream_query},
    {"cuStreamCreate", (void **)&dccl_cu.stream_create},
    {"cuStreamDestroy", (void **)&dccl_cu.stream_destroy},
    {"cuGetErrorString", (void **)&dccl_cu.get_error_string},
    {"cuThreadExchangeStreamCaptureMode", (void **)&dccl_cu.exchange_capture_mode},
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static ncclResult_t load_result;
static char missing[64];

static void load(void) {
  if (!dccl_cuda_available()) {
    load_result = ncclSystemError;
    return;
  }
  for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
    /* The ABI of the cuda.h these prototypes come from. */
    *entries[i].fn = dccl_cuda_entry(entries[i].name, CUDA_VERSION);
    if (!*entries[i].fn) {
      snprintf(missing, sizeof(missing), "%s", entries[i].name);
      load_result = ncclSystemError;
      return;
    }
  }
}

ncclResult_t dccl_cuda_api_load(void) {
  pthread_once(&once, load);
  if (load_result == ncclSuccess) return ncclSuccess;
  if (!missing[0]) return dccl_error(ncclSystemError, "no usable CUDA driver: device buffers need one");
  return dccl_error(ncclSystemError, "the CUDA driver lacks %s (CUDA %d ABI), which device buffers need", missing,
                    CUDA_VERSION);
}

const char *dccl_cuda_error_text(CUresult r) {
  const char *text = NULL;
  if (!dccl_cu.get_error_string || dccl_cu.get_error_string(r, &text) != CUDA_SUCCESS || !text) return "CUDA error";
  return text;
}
