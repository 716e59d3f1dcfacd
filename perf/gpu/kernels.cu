// The kernels of the GPU measurements (kernels.h says what each does). Flags use PTX acquire/release at system
// scope: the other side is another process, so nothing weaker is enough in general.
#include <cuda_runtime.h>

#include "kernels.h"

__device__ static uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ static uint64_t load_acquire(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ static void store_release(uint64_t *p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// 0 once *flag >= want; 1 when the deadline passed first. The timer is read every 256 polls only: each read costs.
__device__ static int wait_geq(const uint64_t *flag, uint64_t want, uint64_t deadline) {
  unsigned polls = 0;
  while (load_acquire(flag) < want)
    if ((++polls & 255) == 0 && global_ns() > deadline) return 1;
  return 0;
}

__global__ void ping_kernel(uint64_t *peer_flag, const uint64_t *own_flag, int n, uint64_t *stamps, int *status,
                            uint64_t timeout_ns) {
  uint64_t deadline = global_ns() + timeout_ns;
  int i = 1, late = 0;
  stamps[0] = global_ns();
  for (; i <= n; i++) {
    store_release(peer_flag, (uint64_t)i);
    if ((late = wait_geq(own_flag, (uint64_t)i, deadline))) break;
    stamps[i] = global_ns();
  }
  status[0] = i - 1;
  status[1] = late;
}

__global__ void pong_kernel(uint64_t *peer_flag, const uint64_t *own_flag, int n, int *status, uint64_t timeout_ns) {
  uint64_t deadline = global_ns() + timeout_ns;
  int i = 1, late = 0;
  for (; i <= n; i++) {
    if ((late = wait_geq(own_flag, (uint64_t)i, deadline))) break;
    store_release(peer_flag, (uint64_t)i);
  }
  status[0] = i - 1;
  status[1] = late;
}

__global__ void copy_kernel(unsigned char *dst, const unsigned char *src, size_t bytes) {
  size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
  size_t vec = ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) ? bytes / 16 : 0;
  uint4 *d = (uint4 *)dst;
  const uint4 *s = (const uint4 *)src;
  for (size_t i = tid; i < vec; i += stride) d[i] = s[i];
  for (size_t i = vec * 16 + tid; i < bytes; i += stride) dst[i] = src[i];
}

struct copy_pairs {
  uint4 *dst[REACH_MAX_PAIRS];
  const uint4 *src[REACH_MAX_PAIRS];
  int n;
  size_t units; // 16-byte units of each pair
};

// Work in pieces of 64 KiB (8 units a thread of 512): piece j lies in chunk j / 32 of the interleave, which is
// chunk (j / 32) / n of pair (j / 32) % n. A CTA takes pieces in turn; a thread loads its 8 units, then stores them.
#define REACH_PIECE_UNITS 4096
__global__ void multi_copy_kernel(copy_pairs p) {
  const uint32_t per_chunk = REACH_CHUNK_BYTES / 16 / REACH_PIECE_UNITS;
  const uint32_t pieces = (uint32_t)(p.units / REACH_PIECE_UNITS) * (uint32_t)p.n;
  for (uint32_t j = blockIdx.x; j < pieces; j += gridDim.x) {
    uint32_t chunk = j / per_chunk, k = chunk % (uint32_t)p.n;
    size_t at = ((size_t)(chunk / (uint32_t)p.n) * per_chunk + j % per_chunk) * REACH_PIECE_UNITS + threadIdx.x;
    uint4 v[REACH_PIECE_UNITS / 512];
#pragma unroll
    for (int u = 0; u < REACH_PIECE_UNITS / 512; u++) v[u] = p.src[k][at + (size_t)u * 512];
#pragma unroll
    for (int u = 0; u < REACH_PIECE_UNITS / 512; u++) p.dst[k][at + (size_t)u * 512] = v[u];
  }
}

struct slice_sum_args {
  const float4 *src[MESH_MAX_RANKS];
  float4 *dst[MESH_MAX_RANKS];
  int ndst, nsrc;
  size_t begin, end; // in float4 units
  size_t piece;      // 0, or float4s a piece: [begin, end) in pieces, CTA b on pieces b, b + grid, ...
  int rank, nranks;  // with `piece`: each piece's slice `rank` of `nranks`
};

// The direct two-shot all-reduce's pattern: every float4 of the slice summed over the sources in order, the sum
// stored into every destination (sources and destinations may be the same buffers: in place).
__device__ __forceinline__ void slice_sum_one(const slice_sum_args &a, size_t i) {
  float4 acc = a.src[0][i];
  for (int k = 1; k < a.nsrc; k++) {
    float4 v = a.src[k][i];
    acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
  }
  for (int k = 0; k < a.ndst; k++) a.dst[k][i] = acc;
}

// Without pieces the rank's CTAs stride together through its slice (all of them in a few pages at a time); in
// pieces (DCCL's direct all-reduce's layout) each CTA streams its own pieces, far apart.
__global__ void slice_sum_kernel(slice_sum_args a) {
  if (!a.piece) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = a.begin + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.end; i += stride)
      slice_sum_one(a, i);
    return;
  }
  const size_t per = a.piece / (size_t)a.nranks;
  for (size_t at = a.begin + (size_t)blockIdx.x * a.piece; at < a.end; at += (size_t)gridDim.x * a.piece) {
    size_t lo = at + per * (size_t)a.rank, hi = lo + per;
    if (hi > a.end) hi = a.end;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) slice_sum_one(a, i);
  }
}

__global__ void spin_kernel(const volatile uint32_t *flag, const volatile uint32_t *stop,
                            volatile unsigned long long *heartbeat, volatile uint32_t *why, uint64_t timeout_ns) {
  uint64_t deadline = global_ns() + timeout_ns;
  uint32_t reason = 0;
  for (unsigned long long beat = 1; !reason; beat++) {
    if (*flag)
      reason = 1;
    else if (*stop)
      reason = 2;
    else if (global_ns() > deadline)
      reason = 3;
    if ((beat & 1023) == 0) {
      *heartbeat = beat;
      __threadfence_system();
    }
  }
  *why = reason;
  __threadfence_system();
}

__global__ void fault_kernel(volatile uint32_t *bad) {
  *bad = 1;
}

__global__ void store_kernel(uint32_t *dst, uint32_t value) {
  *dst = value;
}

static int launched() {
  return (int)cudaGetLastError();
}

extern "C" int kernels_preload(void) {
  cudaFuncAttributes attr;
  const void *all[] = {(const void *)ping_kernel,  (const void *)pong_kernel,  (const void *)copy_kernel,
                       (const void *)multi_copy_kernel, (const void *)slice_sum_kernel, (const void *)spin_kernel,
                       (const void *)fault_kernel, (const void *)store_kernel};
  for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++) {
    cudaError_t e = cudaFuncGetAttributes(&attr, all[i]);
    if (e != cudaSuccess) return (int)e;
  }
  return 0;
}

extern "C" int ping_launch(CUdeviceptr peer_flag, CUdeviceptr own_flag, int n, CUdeviceptr stamps, CUdeviceptr status,
                           uint64_t timeout_ns, CUstream stream) {
  ping_kernel<<<1, 1, 0, stream>>>((uint64_t *)peer_flag, (const uint64_t *)own_flag, n, (uint64_t *)stamps,
                                   (int *)status, timeout_ns);
  return launched();
}

extern "C" int pong_launch(CUdeviceptr peer_flag, CUdeviceptr own_flag, int n, CUdeviceptr status, uint64_t timeout_ns,
                           CUstream stream) {
  pong_kernel<<<1, 1, 0, stream>>>((uint64_t *)peer_flag, (const uint64_t *)own_flag, n, (int *)status, timeout_ns);
  return launched();
}

extern "C" int copy_launch(CUdeviceptr dst, CUdeviceptr src, size_t bytes, int sm_count, CUstream stream) {
  const int threads = 512;
  size_t want = (bytes / 16 + threads - 1) / threads;
  int blocks = want < (size_t)(4 * sm_count) ? (int)want : 4 * sm_count;
  if (blocks < 1) blocks = 1;
  copy_kernel<<<blocks, threads, 0, stream>>>((unsigned char *)dst, (const unsigned char *)src, bytes);
  return launched();
}

extern "C" int multi_copy_launch(const CUdeviceptr *dsts, const CUdeviceptr *srcs, int n, size_t bytes,
                                 int sm_count, CUstream stream) {
  if (n < 1 || n > REACH_MAX_PAIRS || bytes == 0 || bytes % REACH_CHUNK_BYTES) return (int)cudaErrorInvalidValue;
  copy_pairs p;
  for (int k = 0; k < n; k++) {
    p.dst[k] = (uint4 *)dsts[k];
    p.src[k] = (const uint4 *)srcs[k];
  }
  p.n = n;
  p.units = bytes / 16;
  multi_copy_kernel<<<4 * sm_count, 512, 0, stream>>>(p); // 512 threads: REACH_PIECE_UNITS assumes it
  return launched();
}

extern "C" int slice_sum_launch(const CUdeviceptr *dsts, int ndst, const CUdeviceptr *srcs, int nsrc, size_t begin,
                                size_t end, size_t piece, int rank, int nranks, int ctas, CUstream stream) {
  if (ndst < 1 || ndst > MESH_MAX_RANKS || nsrc < 1 || nsrc > MESH_MAX_RANKS || begin % 16 || end % 16 ||
      end < begin || ctas < 1)
    return (int)cudaErrorInvalidValue;
  if (piece && (nranks < 1 || rank < 0 || rank >= nranks || piece % (16 * (size_t)nranks)))
    return (int)cudaErrorInvalidValue;
  slice_sum_args a;
  for (int k = 0; k < ndst; k++) a.dst[k] = (float4 *)dsts[k];
  for (int k = 0; k < nsrc; k++) a.src[k] = (const float4 *)srcs[k];
  a.ndst = ndst;
  a.nsrc = nsrc;
  a.begin = begin / 16;
  a.end = end / 16;
  a.piece = piece / 16;
  a.rank = rank;
  a.nranks = nranks;
  slice_sum_kernel<<<ctas, 512, 0, stream>>>(a);
  return launched();
}

extern "C" int spin_launch(CUdeviceptr flag, CUdeviceptr stop, CUdeviceptr heartbeat, CUdeviceptr why,
                           uint64_t timeout_ns, CUstream stream) {
  spin_kernel<<<1, 1, 0, stream>>>((const volatile uint32_t *)flag, (const volatile uint32_t *)stop,
                                   (volatile unsigned long long *)heartbeat, (volatile uint32_t *)why, timeout_ns);
  return launched();
}

extern "C" int fault_launch(CUdeviceptr bad, CUstream stream) {
  fault_kernel<<<1, 1, 0, stream>>>((volatile uint32_t *)bad);
  return launched();
}

extern "C" int store_launch(CUdeviceptr dst, uint32_t value, CUstream stream) {
  store_kernel<<<1, 1, 0, stream>>>((uint32_t *)dst, value);
  return launched();
}

extern "C" int runtime_malloc(CUdeviceptr *ptr, size_t bytes) {
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, bytes);
  *ptr = (CUdeviceptr)(uintptr_t)p;
  return (int)e;
}

extern "C" int runtime_free(CUdeviceptr ptr) {
  return (int)cudaFree((void *)(uintptr_t)ptr);
}
