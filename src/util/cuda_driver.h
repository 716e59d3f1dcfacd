/* CUDA, reached at run time: libcuda.so.1 is dlopen'ed on first need, so the library loads and works on a machine
 * with no GPU and no driver, and never links a CUDA runtime of its own. Every entry point comes from
 * cuGetProcAddress at an explicit ABI version. DCCL never creates a context: a communicator retains the primary
 * context of its device and makes it current on the threads DCCL starts for it. */
#ifndef DCCL_CUDA_DRIVER_H_
#define DCCL_CUDA_DRIVER_H_

#include <stddef.h>

#include "dccl.h"

/* 1 when the driver loaded and initialised (a GPU is present). */
int dccl_cuda_available(void);
/* 1 when ptr is device memory (host code cannot read it); 0 for host memory or without a driver. */
int dccl_cuda_is_device_ptr(const void *ptr);
/* Prepares a host-buffer operation issued on `stream`: refused while the stream is being captured into a graph
 * (a host operation cannot be replayed), else the stream is synchronised, since the input may be produced by
 * GPU work queued on it. A NULL stream is the legacy default stream of the calling thread's current context (as
 * in NCCL), synchronised the same way; with no current context, or no driver, there is nothing to wait for. */
ncclResult_t dccl_cuda_host_op_on_stream(cudaStream_t stream, const char *call);
/* 1 when `stream` is being captured into a CUDA graph; 0 otherwise, without a driver, or when the driver cannot
 * tell. */
int dccl_cuda_stream_capturing(cudaStream_t stream);

/* The ordinal of the device of the calling thread's current context; -1 when there is no driver or no current
 * context (nothing is created). */
int dccl_cuda_current_ordinal(void);
/* Device `ordinal`'s UUID and PCI bus id ("0000:19:00.0"): 1, or 0 when there is no such device or no driver.
 * Needs no context. */
int dccl_cuda_device_identity(int ordinal, unsigned char uuid[16], char *bus_id, size_t bus_id_len);

/* GPUDirect RDMA through dma-buf (transports/net_ib/ib_gdr.c): 1 when the driver can export device memory as a
 * dma-buf (it has cuMemGetHandleForAddressRange) and device `ordinal` reports CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED;
 * 0 otherwise, or without a driver. */
int dccl_cuda_dmabuf_supported(int ordinal);
/* A dma-buf file descriptor for the device memory [ptr, ptr+len), both aligned to the host page size; the caller
 * closes it. ncclSystemError when dma-buf export is not available, ncclUnhandledCudaError when the driver refuses. */
ncclResult_t dccl_cuda_dmabuf_fd(const void *ptr, size_t len, int *fd);

/* Retains device `ordinal`'s primary context (created by the driver if no one uses it yet; the CUDA runtime uses
 * the same one), for a communicator's lifetime. */
ncclResult_t dccl_cuda_primary_ctx_retain(int ordinal, void **ctx);
void dccl_cuda_primary_ctx_release(int ordinal);
/* The driver's entry point `name` (its base name, "cuLaunchKernel") in the ABI of CUDA `abi_version`; NULL when
 * there is no driver or it lacks that version. */
void *dccl_cuda_entry(const char *name, int abi_version);
/* Makes ctx current on the calling thread (a DCCL thread about to touch the device); NULL: nothing. */
void dccl_cuda_set_current(void *ctx);
/* The calling thread's current context, or NULL (none, or no driver). */
void *dccl_cuda_get_current(void);

#endif
