// The references for dev_latency: a kernel that does nothing, so its launch + synchronise is what any kernel costs;
// and one that does nothing with a parameter the size of DCCL's launch (struct dccl_dev_work, the work passed by
// value), so the two differ by what passing that much costs.
#include <cuda_runtime.h>

#include "collectives/device/dev_work.h"

struct perf_fat_param {
  char bytes[sizeof(struct dccl_dev_work)];
};

__global__ void perf_empty_kernel() {}
__global__ void perf_fat_kernel(const __grid_constant__ perf_fat_param p) {}

extern "C" cudaError_t perf_launch_empty(cudaStream_t stream) {
  perf_empty_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

extern "C" cudaError_t perf_launch_fat(cudaStream_t stream) {
  static perf_fat_param p; // zeros: only the size matters
  perf_fat_kernel<<<1, 1, 0, stream>>>(p);
  return cudaGetLastError();
}

extern "C" size_t perf_fat_bytes(void) { return sizeof(perf_fat_param); }
