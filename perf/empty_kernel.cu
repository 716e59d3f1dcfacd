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

// Publishes `value` at word `word` of this rank's flags and waits until that word of every rank's shows it.
__device__ __forceinline__ void perf_meet_at(const perf_meet_flags &f, unsigned word, uint32_t value) {
  asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(f.flag[f.me] + word), "r"(value) : "memory");
  for (int r = 0; r < f.n; r++) {
    uint32_t v;
    do {
      asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(f.flag[r] + word) : "memory");
    } while (v < value);
  }
}

__global__ void perf_meet_kernel(const perf_meet_flags f, uint32_t round) { perf_meet_at(f, 0, round); }

static cudaError_t meet_flags(uint32_t *const *flags, int n, int me, perf_meet_flags *f) {
  if (n > 8) return cudaErrorInvalidValue;
  *f = perf_meet_flags{};
  for (int r = 0; r < n; r++) f->flag[r] = flags[r];
  f->n = n;
  f->me = me;
  return cudaSuccess;
}

extern "C" cudaError_t perf_launch_meet(cudaStream_t stream, uint32_t *const *flags, int n, int me, uint32_t round) {
  perf_meet_flags f;
  cudaError_t e = meet_flags(flags, n, me, &f);
  if (e != cudaSuccess) return e;
  perf_meet_kernel<<<1, 1, 0, stream>>>(f, round);
  return cudaGetLastError();
}

// DCCL's direct collectives in outline: each CTA's thread 0 meets CTA c of every rank (`round`'s first half: every
// rank's CTA has started) and then again (its second half: every rank's CTA is done), on word c of each rank's
// flags; the parameter is the size of DCCL's launch, the CTA its shape.
struct perf_wide_param {
  perf_meet_flags f;
  char pad[sizeof(struct dccl_dev_work) - sizeof(perf_meet_flags)];
};
__global__ void perf_wide_meet_kernel(const __grid_constant__ perf_wide_param p, uint32_t round) {
  if (threadIdx.x) return;
  perf_meet_at(p.f, blockIdx.x, 2 * round - 1);
  perf_meet_at(p.f, blockIdx.x, 2 * round);
}

extern "C" cudaError_t perf_launch_wide_meet(cudaStream_t stream, uint32_t *const *flags, int n, int me,
                                             uint32_t round, int ctas) {
  static perf_wide_param p; // zeros but the flags
  cudaError_t e = meet_flags(flags, n, me, &p.f);
  if (e != cudaSuccess) return e;
  perf_wide_meet_kernel<<<ctas, DCCL_DEV_THREADS, sizeof(dev_cta), stream>>>(p, round);
  return cudaGetLastError();
}
