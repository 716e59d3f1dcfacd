/* hbm_ceiling [MiB=1024] [reps=5]
 * The direct path's ceiling, measured on the machine at hand rather than taken from the H200's figure: one
 * device-to-device copy of MiB (cuMemcpyDtoDAsync, as gpu-lab.md measured 4.22 TB/s on the H200) reads and writes
 * every byte once, so its HBM traffic rate is 2 x bytes / time. The all-reduce floor of docs/design.md (every
 * input read once, every output written once: 2 N S bytes) is at that rate.
 * Prints the median of `reps` copies; exit status 0 measured, 2 a call failed or the copy was wrong, 3 the
 * watchdog. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu_common.h"

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 1024;
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  if (mib == 0 || reps < 1 || reps > 64) {
    fprintf(stderr, "usage: hbm_ceiling [MiB=1024] [reps=5 (1-64)]\n");
    return 2;
  }
  watchdog_arm(120, "hbm_ceiling");
  gpu_open();
  size_t bytes = mib << 20;
  CUdeviceptr src, dst;
  CUstream s;
  CUevent start, end;
  CU_MUST(cuMemAlloc(&src, bytes));
  CU_MUST(cuMemAlloc(&dst, bytes));
  CU_MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_MUST(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CU_MUST(cuEventCreate(&end, CU_EVENT_DEFAULT));
  double tbps[64];
  for (int r = 0; r < reps; r++) {
    uint32_t mark = 0x5a000000u + (uint32_t)r, got = 0;
    CU_MUST(cuMemsetD32(src, mark, bytes / 4));
    CU_MUST(cuMemsetD32(dst, 0, bytes / 4));
    CU_MUST(cuCtxSynchronize());
    CU_MUST(cuEventRecord(start, s));
    CU_MUST(cuMemcpyDtoDAsync(dst, src, bytes, s));
    CU_MUST(cuEventRecord(end, s));
    if (stream_wait(s, 30) != CUDA_SUCCESS) {
      printf("FAILED: the copy did not end within 30 s\n");
      return 2;
    }
    CU_MUST(cuMemcpyDtoH(&got, dst + bytes - 4, 4));
    if (got != mark) {
      printf("FAILED: the copy's last word is %#x, not %#x\n", got, mark);
      return 2;
    }
    float ms = 0;
    CU_MUST(cuEventElapsedTime(&ms, start, end));
    tbps[r] = 2.0 * (double)bytes / (ms * 1e9);
  }
  double t = median(tbps, (size_t)reps);
  printf("hbm_ceiling: device-to-device copy of %zu MiB, median of %d: %.1f GB/s copied, HBM traffic %.3f TB/s\n",
         mib, reps, t / 2 * 1e3, t);
  return 0;
}
