/* The device side of the GPU measurements. Every wait in a kernel gives up at a deadline on the GPU's global
 * timer, so a peer that never answers ends the kernel instead of hanging the machine. Launchers return a
 * cudaError_t as int (0 = launched). Pointers are device addresses (CUdeviceptr). */
#ifndef DCCL_PERF_GPU_KERNELS_H_
#define DCCL_PERF_GPU_KERNELS_H_

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Loads every kernel now (no lazy loading while a peer kernel spins). */
int kernels_preload(void);

/* The flag ping-pong, one thread each side, 8-byte flags, system-scope release stores and acquire loads.
 * ping: for i = 1..n: stamps[i-1] = now; store i to *peer_flag; wait until *own_flag >= i; stamps[n] = now.
 * pong: for i = 1..n: wait until *own_flag >= i; store i to *peer_flag.
 * status[0] = round trips completed, status[1] = 1 when the deadline passed first. */
int ping_launch(CUdeviceptr peer_flag, CUdeviceptr own_flag, int n, CUdeviceptr stamps, CUdeviceptr status,
                uint64_t timeout_ns, CUstream stream);
int pong_launch(CUdeviceptr peer_flag, CUdeviceptr own_flag, int n, CUdeviceptr status, uint64_t timeout_ns,
                CUstream stream);

/* Copies `bytes` from src to dst with 16-byte loads and stores where both are aligned, on about 4 CTAs per SM. */
int copy_launch(CUdeviceptr dst, CUdeviceptr src, size_t bytes, int sm_count, CUstream stream);

/* Copies `n` pairs (at most REACH_MAX_PAIRS) of `bytes` each (a multiple of 2 MiB) at once: the pairs' 2 MiB
 * chunks interleaved, so every source and destination is in use from the kernel's start to its end. */
#define REACH_MAX_PAIRS 8
#define REACH_CHUNK_BYTES (2u << 20)
int multi_copy_launch(const CUdeviceptr *dsts, const CUdeviceptr *srcs, int n, size_t bytes, int sm_count,
                      CUstream stream);

/* A rank's part of a direct two-shot all-reduce of float32 sums (at most MESH_MAX_RANKS buffers a side): bytes
 * [begin, end) (multiples of 16) of the nsrc sources summed in order, the sums stored into the ndst destinations,
 * on `ctas` CTAs of 512 threads striding together. With `piece` (bytes, a multiple of 16 nranks) [begin, end) is
 * cut in pieces instead, CTA b taking pieces b, b + ctas, ... and slice `rank` of `nranks` equal slices of each:
 * DCCL's direct all-reduce's layout before 2026-12-07. */
#define MESH_MAX_RANKS 8
int slice_sum_launch(const CUdeviceptr *dsts, int ndst, const CUdeviceptr *srcs, int nsrc, size_t begin, size_t end,
                     size_t piece, int rank, int nranks, int ctas, CUstream stream);

/* Spins until the 32-bit *flag (device memory, may be a peer's) or *stop (mapped host memory) is nonzero or
 * timeout_ns pass; meanwhile increments *heartbeat (mapped host memory) so the host sees it run. On exit writes
 * *why: 1 = the flag, 2 = stop, 3 = the deadline. */
int spin_launch(CUdeviceptr flag, CUdeviceptr stop, CUdeviceptr heartbeat, CUdeviceptr why, uint64_t timeout_ns,
                CUstream stream);

/* Stores to `bad`, an address nothing is mapped at: an illegal-address fault in this context. */
int fault_launch(CUdeviceptr bad, CUstream stream);

/* *dst = value, one thread: the smallest piece of new work. */
int store_launch(CUdeviceptr dst, uint32_t value, CUstream stream);

/* The runtime's cudaMalloc and cudaFree (in the current device's primary context), for memory allocated as
 * applications allocate it; 0 or the cudaError. */
int runtime_malloc(CUdeviceptr *ptr, size_t bytes);
int runtime_free(CUdeviceptr ptr);

#ifdef __cplusplus
}
#endif

#endif
