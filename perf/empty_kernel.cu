// The references for dev_latency: a kernel that does nothing, so its launch + synchronise is what any kernel costs;
// and one that does nothing with a parameter the size of DCCL's launch (struct dccl_dev_work, the work passed by
// value), so the two differ by what passing that much costs; one launched in DCCL's whole shape (that parameter,
// DCCL_DEV_THREADS threads and the shared memory of its CTA state), so what the shape costs is apart from what DCCL's
// kernel does; kernels that meet once (perf_meet_kernel), the least any collective between processes costs; and
// kernels in DCCL's shape whose every CTA meets the same CTA of every rank twice (perf_wide_meet_kernel), the least a
// direct collective's launch costs, its work left out.
#include <cuda_runtime.h>

#include "collectives/device/dev_cta.cuh"
#include "collectives/device/dev_work.h"

struct perf_fat_param {
  char bytes[sizeof(struct dccl_dev_work)];
};

__global__ void perf_empty_kernel() {}
__global__ void perf_fat_kernel(const __grid_constant__ perf_fat_param p) {}
__global__ void perf_shaped_kernel(const __grid_constant__ perf_fat_param p) {}

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

extern "C" cudaError_t perf_launch_shaped(cudaStream_t stream) {
  static perf_fat_param p;
  perf_shaped_kernel<<<1, DCCL_DEV_THREADS, sizeof(dev_cta), stream>>>(p);
  return cudaGetLastError();
}

extern "C" size_t perf_shaped_smem(void) { return sizeof(dev_cta); }

// One thread of each rank's kernel publishes `round` on its own flag and waits until every rank's flag shows it (the
// flags are words in each rank's GPU memory, mapped by CUDA IPC; one GPU, so GPU scope orders them): a kernel ends
// only once every rank's kernel of the round has started.
struct perf_meet_flags {
  uint32_t *flag[8];
  int n, me;
};
__global__ void perf_meet_kernel(const perf_meet_flags f, uint32_t round) {
  asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(f.flag[f.me]), "r"(round) : "memory");
  for (int r = 0; r < f.n; r++) {
    uint32_t v;
    do {
      asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(f.flag[r]) : "memory");
    } while (v < round);
  }
}

extern "C" cudaError_t perf_launch_meet(cudaStream_t stream, uint32_t *const *flags, int n, int me, uint32_t round) {
  perf_meet_flags f = {};
  if (n > 8) return cudaErrorInvalidValue;
  for (int r = 0; r < n; r++) f.flag[r] = flags[r];
  f.n = n;
  f.me = me;
  perf_meet_kernel<<<1, 1, 0, stream>>>(f, round);
  return cudaGetLastError();
}

// DCCL's direct collectives in outline: each CTA's thread 0 meets CTA c of every rank (`round`'s first half: every
// rank's CTA has started) and then again (its second half: every rank's CTA is done), on word c of each rank's
// flags; the parameter is the size of DCCL's launch, the CTA its shape.
struct perf_wide_param {
  uint32_t *flag[8];
  int n, me;
  char pad[sizeof(struct dccl_dev_work) - 8 * sizeof(uint32_t *) - 2 * sizeof(int)];
};
__global__ void perf_wide_meet_kernel(const __grid_constant__ perf_wide_param p, uint32_t round) {
  if (threadIdx.x) return;
  for (uint32_t half = 2 * round - 1; half <= 2 * round; half++) {
    asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(p.flag[p.me] + blockIdx.x), "r"(half) : "memory");
    for (int r = 0; r < p.n; r++) {
      uint32_t v;
      do {
        asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p.flag[r] + blockIdx.x) : "memory");
      } while (v < half);
    }
  }
}

extern "C" cudaError_t perf_launch_wide_meet(cudaStream_t stream, uint32_t *const *flags, int n, int me,
                                             uint32_t round, int ctas) {
  static perf_wide_param p; // zeros but the flags
  if (n > 8) return cudaErrorInvalidValue;
  for (int r = 0; r < n; r++) p.flag[r] = flags[r];
  p.n = n;
  p.me = me;
  perf_wide_meet_kernel<<<ctas, DCCL_DEV_THREADS, sizeof(dev_cta), stream>>>(p, round);
  return cudaGetLastError();
}
