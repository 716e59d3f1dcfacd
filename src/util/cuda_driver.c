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

/* The ABI every entry point is asked for: CUDA 12.0's. cuGetProcAddress returns the variant of each function that
 * version defines (cuDeviceGetUuid is the _v2 one, say), whatever the installed driver's default; an unversioned
 * dlsym would bind the oldest ABI of each name. */
#define DCCL_CUDA_ABI_VERSION 12000

static struct {
  int available;
  cu_result (*init)(unsigned flags);
  cu_result (*pointer_get_attribute)(void *data, int attribute, uintptr_t ptr);
  cu_result (*stream_synchronize)(cudaStream_t stream);
  cu_result (*stream_is_capturing)(cudaStream_t stream, int *status);
  cu_result (*ctx_get_current)(void **ctx);
  cu_result (*ctx_set_current)(void *ctx);
  cu_result (*ctx_get_device)(int *device);
  cu_result (*primary_ctx_retain)(void **ctx, int device);
  cu_result (*primary_ctx_release)(int device);
  cu_result (*device_get_uuid)(unsigned char uuid[16], int device);
  cu_result (*device_get_pci_bus_id)(char *bus_id, int len, int device);
  cu_result (*device_get)(int *device, int ordinal);
  cu_result (*device_get_attribute)(int *value, int attribute, int device);
  cu_result (*mem_get_handle_for_address_range)(void *handle, uintptr_t ptr, size_t size, int type,
                                                unsigned long long flags);
} cu;

/* Every entry point: its base name, where it goes, and whether DCCL works without it (older drivers lack
 * dma-buf export). */
static const struct {
  const char *name;
  void **fn;
  int optional;
} entry_points[] = {
    {"cuInit", (void **)&cu.init, 0},
    {"cuPointerGetAttribute", (void **)&cu.pointer_get_attribute, 0},
    {"cuStreamSynchronize", (void **)&cu.stream_synchronize, 0},
    {"cuStreamIsCapturing", (void **)&cu.stream_is_capturing, 0},
    {"cuCtxGetCurrent", (void **)&cu.ctx_get_current, 0},
    {"cuCtxSetCurrent", (void **)&cu.ctx_set_current, 0},
    {"cuCtxGetDevice", (void **)&cu.ctx_get_device, 0},
    {"cuDevicePrimaryCtxRetain", (void **)&cu.primary_ctx_retain, 0},
    {"cuDevicePrimaryCtxRelease", (void **)&cu.primary_ctx_release, 0},
    {"cuDeviceGetUuid", (void **)&cu.device_get_uuid, 0},
    {"cuDeviceGetPCIBusId", (void **)&cu.device_get_pci_bus_id, 0},
    {"cuDeviceGet", (void **)&cu.device_get, 0},
    {"cuDeviceGetAttribute", (void **)&cu.device_get_attribute, 0},
    {"cuMemGetHandleForAddressRange", (void **)&cu.mem_get_handle_for_address_range, 1},
};

typedef cu_result (*get_proc_address_fn)(const char *symbol, void **fn, int version, unsigned long long flags,
                                         int *status);

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static get_proc_address_fn get_proc;

static void cu_load(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    DCCL_INFO(DCCL_INIT, "no CUDA driver (libcuda.so.1 not loadable): host buffers only");
    return;
  }
  /* The one name looked up by dlsym: the resolver itself, in its CUDA 12 form (with the query status). */
  get_proc = (get_proc_address_fn)dlsym(lib, "cuGetProcAddress_v2");
  if (!get_proc) {
    DCCL_WARN(DCCL_INIT, "libcuda.so.1 has no cuGetProcAddress_v2 (a driver older than CUDA 12): host buffers only");
    return;
  }
  for (size_t i = 0; i < sizeof(entry_points) / sizeof(entry_points[0]); i++) {
    int status = 0;
    void *fn = NULL;
    if (get_proc(entry_points[i].name, &fn, DCCL_CUDA_ABI_VERSION, 0, &status) != CU_SUCCESS || status != 0) fn = NULL;
    *entry_points[i].fn = fn;
    if (!fn && !entry_points[i].optional) {
      DCCL_WARN(DCCL_INIT, "the CUDA driver lacks %s (CUDA %d ABI): host buffers only", entry_points[i].name,
                DCCL_CUDA_ABI_VERSION);
      return;
    }
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
  if (!dccl_cuda_available()) return -1;
  if (cu.ctx_get_current(&ctx) != CU_SUCCESS || !ctx || cu.ctx_get_device(&device) != CU_SUCCESS) return -1;
  return device;
}

int dccl_cuda_device_identity(int ordinal, unsigned char uuid[16], char *bus_id, size_t bus_id_len) {
  int device = 0;
  if (!dccl_cuda_available()) return 0;
  if (cu.device_get(&device, ordinal) != CU_SUCCESS) return 0;
  return cu.device_get_uuid(uuid, device) == CU_SUCCESS &&
         cu.device_get_pci_bus_id(bus_id, (int)bus_id_len, device) == CU_SUCCESS;
}

int dccl_cuda_dmabuf_supported(int ordinal) {
  if (!dccl_cuda_available() || !cu.mem_get_handle_for_address_range) return 0;
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

ncclResult_t dccl_cuda_primary_ctx_retain(int ordinal, void **ctx) {
  *ctx = NULL;
  int device = 0;
  if (!dccl_cuda_available()) return dccl_error(ncclSystemError, "device %d: no CUDA driver", ordinal);
  cu_result r = cu.device_get(&device, ordinal);
  if (r == CU_SUCCESS) r = cu.primary_ctx_retain(ctx, device);
  if (r != CU_SUCCESS)
    return dccl_error(ncclUnhandledCudaError, "cannot retain device %d's primary context (%d)", ordinal, r);
  return ncclSuccess;
}

void dccl_cuda_primary_ctx_release(int ordinal) {
  int device = 0;
  if (dccl_cuda_available() && cu.device_get(&device, ordinal) == CU_SUCCESS) (void)cu.primary_ctx_release(device);
}

void dccl_cuda_set_current(void *ctx) {
  if (ctx && dccl_cuda_available()) (void)cu.ctx_set_current(ctx);
}

void *dccl_cuda_get_current(void) {
  void *ctx = NULL;
  if (!dccl_cuda_available() || cu.ctx_get_current(&ctx) != CU_SUCCESS) return NULL;
  return ctx;
}

void *dccl_cuda_entry(const char *name, int abi_version) {
  if (!dccl_cuda_available()) return NULL;
  void *fn = NULL;
  int status = 0;
  if (get_proc(name, &fn, abi_version, 0, &status) != CU_SUCCESS || status != 0) return NULL;
  return fn;
}
