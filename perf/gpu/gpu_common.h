/* What the GPU measurement programs share: checked driver calls, host clocks, medians, the primary context. */
#ifndef DCCL_PERF_GPU_COMMON_H_
#define DCCL_PERF_GPU_COMMON_H_

#include <cuda.h>
#include <stddef.h>

/* A driver call that must work: on failure the program says which call and exits 2 (the measurement is void). */
#define CU_MUST(call)                                              \
  do {                                                             \
    CUresult r_ = (call);                                          \
    if (r_ != CUDA_SUCCESS) cu_die(r_, #call, __FILE__, __LINE__); \
  } while (0)

void cu_die(CUresult r, const char *what, const char *file, int line);
/* The driver's name for a result ("CUDA_ERROR_ILLEGAL_ADDRESS"), or its number when the driver has none. */
const char *cu_name(CUresult r);

double now_us(void);
void sleep_ms(int ms);
/* Sorts v in place; the median of its n values (0 for n = 0). */
double median(double *v, size_t n);
/* The p-th percentile (0..100) of v, already sorted by median(). */
double percentile_sorted(const double *v, size_t n, double p);

/* cuInit, device 0's primary context retained and made current (the library's own rule: never create one).
 * Kernels are loaded now: lazy loading could need a context-wide wait while a peer's kernel spins. */
CUdevice gpu_open(void);
int gpu_sm_count(CUdevice dev);
/* 1 when this process's contexts on dev go through MPS (the driver's own attribute). */
int gpu_mps_enabled(CUdevice dev);
/* Waits for the stream's work by polling, at most timeout_s: CUDA_ERROR_NOT_READY when it is still running then,
 * else what cuStreamQuery said (a blocking synchronise could wait forever on a kernel that never ends). */
CUresult stream_wait(CUstream s, double timeout_s);
/* Ends the program with status 3 after `seconds` unless it finished: no measurement may hang the GPU machine's call. */
void watchdog_arm(int seconds, const char *who);

#endif
