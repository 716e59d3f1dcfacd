/* cta_rate [--kib "K ..."=32 1024] [--reps R=9]
 * What one CTA of 512 threads moves in the direct all-reduce's pattern at 4 ranks (it sums K KiB of each of 4
 * sources and stores the sums into 4 destinations), alone and beside others. DCCL's 4-rank all-reduce below 16 MiB
 * took ~5.2 us per 32 KiB of each source a CTA whatever the number of CTAs (~50 GB/s a CTA, far below the HBM's share
 * of an SM; docs/performance.md, 2026-12-07): which part sets that, the loads, the stores, or DCCL's loop? Modes
 * (cta_rate.h): dccl (DCCL's own dev_reduce_copy_for), plain (one pack a thread at a time), loads (nothing stored),
 * stores (nothing loaded). Each CTA times itself between barriers (%globaltimer, no launch in it); a line gives the
 * slowest CTA's median over R launches and what a CTA moved per microsecond (read + written).
 * Exit status: 0 measured, 2 a call failed or a sum was wrong, 3 the watchdog. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cta_rate.h"
#include "gpu_common.h"

#define MAX_REPS 64
#define MAX_KIBS 8
#define NBUFS 4

static const char *const mode_names[RATE_NMODES] = {"dccl", "plain", "loads", "stores"};

/* The slowest CTA's time of one launch, in us. */
static double slowest_us(CUdeviceptr ns, int ctas) {
  static unsigned long long t[1024];
  CU_MUST(cuMemcpyDtoH(t, ns, (size_t)ctas * sizeof t[0]));
  unsigned long long worst = 0;
  for (int b = 0; b < ctas; b++) worst = t[b] > worst ? t[b] : worst;
  return (double)worst / 1e3;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  size_t kibs[MAX_KIBS] = {32, 1024};
  int nkibs = 2, reps = 9;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--kib") && i + 1 < argc) {
      nkibs = 0;
      for (char *p = argv[++i], *end; *p && nkibs < MAX_KIBS; p = end) {
        kibs[nkibs] = strtoull(p, &end, 10);
        if (end == p || kibs[nkibs] == 0) break;
        nkibs++;
      }
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else {
      nkibs = 0;
    }
  }
  if (nkibs == 0 || reps < 1 || reps > MAX_REPS) {
    fprintf(stderr, "usage: cta_rate [--kib \"K ...\" (KiB of each source a CTA, default \"32 1024\")] "
                    "[--reps R=9 (1-%d)]\n", MAX_REPS);
    return 2;
  }
  watchdog_arm(240, "cta_rate");
  CUdevice dev = gpu_open();
  int err = rate_preload();
  if (err) {
    printf("FAILED: loading the kernel: cudaError %d\n", err);
    return 2;
  }
  const int sms = gpu_sm_count(dev);
  int counts[] = {1, 8, 32, 128, sms};
  const int ncounts = sms > 128 ? 5 : 4;
  size_t kib_max = 0;
  for (int k = 0; k < nkibs; k++) kib_max = kibs[k] > kib_max ? kibs[k] : kib_max;
  const size_t bytes = (size_t)sms * kib_max << 10; /* every buffer, for the most CTAs at the most KiB */
  CUdeviceptr srcs[NBUFS], dsts[NBUFS], ns;
  for (int b = 0; b < NBUFS; b++) {
    CU_MUST(cuMemAlloc(&srcs[b], bytes));
    CU_MUST(cuMemAlloc(&dsts[b], bytes));
    CU_MUST(cuMemsetD32(srcs[b], 0x3f800000u, bytes / 4)); /* 1.0f */
  }
  CU_MUST(cuMemAlloc(&ns, 1024 * sizeof(unsigned long long)));
  CUstream s;
  CU_MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  printf("cta_rate: %d SMs, %d threads a CTA, 4 sources -> 4 destinations, median of %d launches\n", sms,
         RATE_THREADS, reps);
  for (int k = 0; k < nkibs; k++) {
    for (int c = 0; c < ncounts; c++) {
      const int ctas = counts[c];
      const uint64_t floats = (uint64_t)ctas * kibs[k] * 1024 / 4;
      for (int mode = 0; mode < RATE_NMODES; mode++) {
        double us[MAX_REPS];
        for (int r = 0; r < reps; r++) {
          for (int b = 0; b < NBUFS; b++) CU_MUST(cuMemsetD32Async(dsts[b], 0, floats, s));
          err = rate_launch(mode, srcs, NBUFS, dsts, NBUFS, floats, ctas, ns, s);
          if (err) {
            printf("FAILED: launching mode %s: cudaError %d\n", mode_names[mode], err);
            return 2;
          }
          if (stream_wait(s, 30) != CUDA_SUCCESS) {
            printf("FAILED: mode %s did not end within 30 s\n", mode_names[mode]);
            return 2;
          }
          us[r] = slowest_us(ns, ctas);
        }
        if (mode == RATE_DCCL || mode == RATE_PLAIN) { /* every destination's first and last float is 4 */
          for (int b = 0; b < NBUFS; b++) {
            float first = 0, last = 0;
            CU_MUST(cuMemcpyDtoH(&first, dsts[b], 4));
            CU_MUST(cuMemcpyDtoH(&last, dsts[b] + (floats - 1) * 4, 4));
            if (first != 4.0f || last != 4.0f) {
              printf("FAILED: mode %s stored %g and %g, not 4\n", mode_names[mode], first, last);
              return 2;
            }
          }
        }
        const double t = median(us, (size_t)reps);
        const int moved = mode == RATE_LOADS || mode == RATE_STORES ? NBUFS : 2 * NBUFS; /* buffers a CTA touches */
        const double cta_gbs = (double)moved * (double)(kibs[k] << 10) / (t * 1e3);
        printf("cta_rate: %-6s %5zu KiB of each buffer a CTA, %3d CTAs: slowest CTA %8.2f us, a CTA %6.1f GB/s, all "
               "%7.1f GB/s\n", mode_names[mode], kibs[k], ctas, t, cta_gbs, cta_gbs * ctas);
      }
    }
  }
  return 0;
}
