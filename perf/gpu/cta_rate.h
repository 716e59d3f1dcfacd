/* The device side of perf/gpu/cta_rate: what a CTA of 512 threads moves, in the direct all-reduce's pattern. */
#ifndef DCCL_PERF_GPU_CTA_RATE_H_
#define DCCL_PERF_GPU_CTA_RATE_H_

#include <cuda.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RATE_MAX_BUFS 4
#define RATE_THREADS 512
enum rate_mode {
  RATE_DCCL,   /* DCCL's own loop (dev_reduce_copy_for, float32 sum): every source summed, into every destination */
  RATE_PLAIN,  /* the same sums, one 16-byte pack a thread at a time, each source loaded in turn */
  RATE_LOADS,  /* the sums only: nothing stored (a store no sum can reach keeps the loads) */
  RATE_STORES, /* a constant into every destination: no loads */
  RATE_NMODES
};

/* Runs `mode` over `floats` floats of each buffer on `ctas` CTAs striding together, as the direct all-reduce's
 * channels do. Each CTA writes its own time (ns, %globaltimer, between barriers at its start and end) into
 * ns[blockIdx.x]. Returns a cudaError_t as int (0 = launched). */
int rate_launch(int mode, const CUdeviceptr *srcs, int nsrcs, const CUdeviceptr *dsts, int ndsts, uint64_t floats,
                int ctas, CUdeviceptr ns, CUstream stream);
/* Loads the kernel now (no lazy loading in a timed launch). */
int rate_preload(void);

#ifdef __cplusplus
}
#endif

#endif
