// A kernel that writes host memory late: it waits about `delay_ms` (on the GPU's nanosecond global timer) before
// storing into every element of `dst` (pinned host memory, which the GPU reaches directly). cuda_host_paths uses
// it to check that a host-buffer call waits for the GPU work queued before it.
#include "late_writer.h"

__device__ static unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void late_fill(float *dst, int n, float value, unsigned long long delay_ns) {
  if (threadIdx.x == 0) {
    unsigned long long start = global_ns();
    while (global_ns() - start < delay_ns) {
    }
  }
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    dst[i] = value + (float)(i % 1000);
}

extern "C" cudaError_t late_writer_launch(float *dst, int n, float value, int delay_ms, cudaStream_t stream) {
  late_fill<<<64, 256, 0, stream>>>(dst, n, value, 1000000ull * (unsigned long long)delay_ms);
  return cudaGetLastError();
}
