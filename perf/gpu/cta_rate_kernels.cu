// The kernel of perf/gpu/cta_rate (cta_rate.h): DCCL's reduction loop beside simpler ones, each CTA timing itself.
#include <cuda_runtime.h>

#include "collectives/device/dev_reduce.cuh"
#include "cta_rate.h"

struct rate_args {
  const float4 *srcs[RATE_MAX_BUFS];
  float4 *dsts[RATE_MAX_BUFS];
  int nsrcs, ndsts, mode;
  uint64_t packs;
  unsigned long long *ns;
};

__device__ static uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void __launch_bounds__(RATE_THREADS, 1) rate_kernel(const __grid_constant__ rate_args r) {
  // The operands in shared memory, where DCCL's direct kernel keeps them (cta->args).
  __shared__ dccl_dev_args a;
  __shared__ uint64_t start;
  if (threadIdx.x == 0) {
    memset(&a, 0, sizeof a);
    for (int s = 0; s < r.nsrcs; s++) a.srcs[s] = r.srcs[s];
    for (int d = 0; d < r.ndsts; d++) a.dsts[d] = r.dsts[d];
    a.nsrcs = r.nsrcs;
    a.ndsts = r.ndsts;
    a.round_own = 1;
    a.n = r.packs * 4;
  }
  __syncthreads();
  if (threadIdx.x == 0) start = global_ns();
  const int tid = blockIdx.x * blockDim.x + threadIdx.x, nthreads = gridDim.x * blockDim.x;
  if (r.mode == RATE_DCCL) {
    dev_reduce_copy_for<DCCL_ELEM_F32>(a, DCCL_ELEM_F32, 4, tid, nthreads);
  } else if (r.mode == RATE_STORES) {
    const float4 one = make_float4(1, 1, 1, 1);
    for (uint64_t i = tid; i < r.packs; i += nthreads)
      for (int d = 0; d < r.ndsts; d++) r.dsts[d][i] = one;
  } else {
    for (uint64_t i = tid; i < r.packs; i += nthreads) {
      float4 acc = r.srcs[0][i];
      for (int s = 1; s < r.nsrcs; s++) {
        float4 v = r.srcs[s][i];
        acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
      }
      if (r.mode == RATE_PLAIN || acc.x == -1.25f) // the sources hold 1.0: a sum of them is never -1.25
        for (int d = 0; d < r.ndsts; d++) r.dsts[d][i] = acc;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) r.ns[blockIdx.x] = global_ns() - start;
}

extern "C" int rate_launch(int mode, const CUdeviceptr *srcs, int nsrcs, const CUdeviceptr *dsts, int ndsts,
                           uint64_t floats, int ctas, CUdeviceptr ns, CUstream stream) {
  if (mode < 0 || mode >= RATE_NMODES || nsrcs < 1 || nsrcs > RATE_MAX_BUFS || ndsts < 1 || ndsts > RATE_MAX_BUFS ||
      floats % 4 || ctas < 1)
    return (int)cudaErrorInvalidValue;
  rate_args r;
  for (int s = 0; s < nsrcs; s++) r.srcs[s] = (const float4 *)srcs[s];
  for (int d = 0; d < ndsts; d++) r.dsts[d] = (float4 *)dsts[d];
  r.nsrcs = nsrcs;
  r.ndsts = ndsts;
  r.mode = mode;
  r.packs = floats / 4;
  r.ns = (unsigned long long *)ns;
  rate_kernel<<<ctas, RATE_THREADS, 0, stream>>>(r);
  return (int)cudaGetLastError();
}

extern "C" int rate_preload(void) {
  cudaFuncAttributes attr;
  return (int)cudaFuncGetAttributes(&attr, (const void *)rate_kernel);
}
