#include "util/cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>

#include "util/error.h"

/* The few driver entry points DCCL needs, with the driver's C ABI (cuda.h is not required to build). */
typedef int cu_result;
#define CU_SUCCESS 0
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_MEMORYTYPE_DEVICE 2
#define CU_STREAM_CAPTURE_STATUS_NONE 0
#define CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1

static struct {
  int available;
  cu_result (*init)(unsigned flags);
  cu_result (*pointer_get_attribute)(void *data, int attribute, uintptr_t ptr);
  cu_result (*stream_synchronize)(cudaStream_t stream);
  cu_result (*stream_is_capturing)(cudaStream_t stream, int *status);
  cu_result (*ctx_get_current)(void **ctx);
  cu_result (*ctx_get_device)(int *device);
  cu_result (*device_get_uuid)(unsigned char uuid[16], int device);
  cu_result (*device_get_pci_bus_id)(char *bus_id, int len, int device);
  /* Optional: older drivers lack them (no dma-buf export then). */
  cu_result (*device_get)(int *device, int ordinal);
  cu_result (*device_get_attribute)(int *value, int attribute, int device);
  cu_result (*mem_get_handle_for_address_range)(void *handle, uintptr_t ptr, size_t size, int type,
                                                unsigned long long flags);
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void cu_load(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    DCCL_INFO(DCCL_INIT, "no CUDA driver (libcuda.so.1 not loadable): host buffers only");
    return;
  }
  cu.init = (cu_result(*)(unsigned))dlsym(lib, "cuInit");
  cu.pointer_get_attribute = (cu_result(*)(void *, int, uintptr_t))dlsym(lib, "cuPointerGetAttribute");
  cu.stream_synchronize = (cu_result(*)(cudaStream_t))dlsym(lib, "cuStreamSynchronize");
  cu.stream_is_capturing = (cu_result(*)(cudaStream_t, int *))dlsym(lib, "cuStreamIsCapturing");
  cu.ctx_get_current = (cu_result(*)(void **))dlsym(lib, "cuCtxGetCurrent");
  cu.ctx_get_device = (cu_result(*)(int *))dlsym(lib, "cuCtxGetDevice");
  void *uuid = dlsym(lib, "cuDeviceGetUuid_v2"); /* CUDA 13 keeps only the _v2 name */
  cu.device_get_uuid = (cu_result(*)(unsigned char *, int))(uuid ? uuid : dlsym(lib, "cuDeviceGetUuid"));
  cu.device_get_pci_bus_id = (cu_result(*)(char *, int, int))dlsym(lib, "cuDeviceGetPCIBusId");
  cu.device_get = (cu_result(*)(int *, int))dlsym(lib, "cuDeviceGet");
  cu.device_get_attribute = (cu_result(*)(int *, int, int))dlsym(lib, "cuDeviceGetAttribute");
  cu.mem_get_handle_for_address_range = (cu_result(*)(void *, uintptr_t, size_t, int, unsigned long long))dlsym(
      lib, "cuMemGetHandleForAddressRange");
  if (!cu.init || !cu.pointer_get_attribute || !cu.stream_synchronize || !cu.stream_is_capturing ||
      !cu.ctx_get_current) {
    DCCL_WARN(DCCL_INIT, "libcuda.so.1 lacks an entry point DCCL needs: host buffers only");
    return;
  }
  cu_result r = cu.init(0);
  if (r != CU_SUCCESS) {
    DCCL_INFO(DCCL_INIT, "cuInit failed (%d): no usable GPU, host buffers only", r);
    return;
  }
  cu.available = 1;
}

int dccl_cuda_available(void) {
  pthread_once(&cu_once, cu_load);
  return cu.available;
}

int dccl_cuda_is_device_ptr(const void *ptr) {
  if (!ptr || !dccl_cuda_available()) return 0;
  unsigned type = 0;
  /* Host memory the driver has never seen answers with an error: that is "host". */
  if (cu.pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (uintptr_t)ptr) != CU_SUCCESS) return 0;
  return type == CU_MEMORYTYPE_DEVICE;
}

/* 0 when there is no stream to ask about: no driver, or NULL with no current context (NULL is the legacy default
 * stream of the calling thread's context; a thread with no current context has no such stream). */
static int has_stream(cudaStream_t stream) {
  if (!dccl_cuda_available()) return 0;
  void *ctx = NULL;
  return stream || (cu.ctx_get_current(&ctx) == CU_SUCCESS && ctx);
}

int dccl_cuda_stream_capturing(cudaStream_t stream) {
  int status = CU_STREAM_CAPTURE_STATUS_NONE;
  return has_stream(stream) && cu.stream_is_capturing(stream, &status) == CU_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

ncclResult_t dccl_cuda_host_op_on_stream(cudaStream_t stream, const char *call) {
  /* The stream may hold the GPU work that made the input. */
  if (!has_stream(stream)) return ncclSuccess;
  int status = CU_STREAM_CAPTURE_STATUS_NONE;
  cu_result r = cu.stream_is_capturing(stream, &status);
  if (r != CU_SUCCESS) return dccl_error(ncclUnhandledCudaError, "%s: cuStreamIsCapturing failed (%d)", call, r);
  if (status != CU_STREAM_CAPTURE_STATUS_NONE)
    return dccl_error(ncclInvalidUsage,
                      "%s: host buffers cannot be used while the stream is captured into a CUDA graph", call);
  r = cu.stream_synchronize(stream);
  if (r != CU_SUCCESS) return dccl_error(ncclUnhandledCudaError, "%s: cuStreamSynchronize failed (%d)", call, r);
  return ncclSuccess;
}

int dccl_cuda_current_ordinal(void) {
  void *ctx = NULL;
  int device = -1;
  if (!dccl_cuda_available() || !cu.ctx_get_device) return -1;
  if (cu.ctx_get_current(&ctx) != CU_SUCCESS || !ctx || cu.ctx_get_device(&device) != CU_SUCCESS) return -1;
  return device;
}

int dccl_cuda_device_identity(int ordinal, unsigned char uuid[16], char *bus_id, size_t bus_id_len) {
  int device = 0;
  if (!dccl_cuda_available() || !cu.device_get || !cu.device_get_uuid || !cu.device_get_pci_bus_id) return 0;
  if (cu.device_get(&device, ordinal) != CU_SUCCESS) return 0;
  return cu.device_get_uuid(uuid, device) == CU_SUCCESS &&
         cu.device_get_pci_bus_id(bus_id, (int)bus_id_len, device) == CU_SUCCESS;
}

int dccl_cuda_dmabuf_supported(int ordinal) {
  if (!dccl_cuda_available() || !cu.mem_get_handle_for_address_range || !cu.device_get || !cu.device_get_attribute)
    return 0;
  int device = 0, supported = 0;
  if (cu.device_get(&device, ordinal) != CU_SUCCESS) return 0;
  if (cu.device_get_attribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, device) != CU_SUCCESS) return 0;
  return supported != 0;
}

ncclResult_t dccl_cuda_dmabuf_fd(const void *ptr, size_t len, int *fd) {
  if (!dccl_cuda_available() || !cu.mem_get_handle_for_address_range)
    return dccl_error(ncclSystemError, "dma-buf export of device memory: the CUDA driver has no "
                                       "cuMemGetHandleForAddressRange");
  int handle = -1;
  cu_result r = cu.mem_get_handle_for_address_range(&handle, (uintptr_t)ptr, len,
                                                    CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (r != CU_SUCCESS)
    return dccl_error(ncclUnhandledCudaError, "cuMemGetHandleForAddressRange(%p, %zu) failed (%d)", ptr, len, r);
  *fd = handle;
  return ncclSuccess;
}
