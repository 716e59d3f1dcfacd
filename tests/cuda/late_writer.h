/* Launches, on `stream`, a kernel that waits about `delay_ms` and then sets dst[i] = value + i % 1000 for every
 * i < n (dst in pinned host memory). */
#ifndef DCCL_TEST_LATE_WRITER_H_
#define DCCL_TEST_LATE_WRITER_H_

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif
cudaError_t late_writer_launch(float *dst, int n, float value, int delay_ms, cudaStream_t stream);
#ifdef __cplusplus
}
#endif

#endif
