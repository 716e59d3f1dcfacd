/* CUDA, reached at run time: libcuda.so.1 is dlopen'ed on first need, so the library loads and works on a machine
 * with no GPU and no driver, and never links a CUDA runtime of its own. */
#ifndef DCCL_CUDA_DRIVER_H_
#define DCCL_CUDA_DRIVER_H_

#include "dccl.h"

/* 1 when the driver loaded and initialised (a GPU is present). */
int dccl_cuda_available(void);
/* 1 when ptr is device memory (host code cannot read it); 0 for host memory or without a driver. */
int dccl_cuda_is_device_ptr(const void *ptr);
/* Prepares a host-buffer operation issued on `stream`: refused while the stream is being captured into a graph
 * (a host operation cannot be replayed), else the stream is synchronised, since the input may be produced by
 * GPU work queued on it. A NULL stream, or no driver, needs nothing. */
ncclResult_t dccl_cuda_host_op_on_stream(cudaStream_t stream, const char *call);

#endif
