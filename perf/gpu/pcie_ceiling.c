/* pcie_ceiling [MiB=1024] [reps=5]
 * The ceiling of the staged path (GPU -> pinned host -> GPU), measured rather than taken from the link's name: how
 * fast one GPU moves bytes to and from pinned host memory, one way and both ways at once, by copy engines
 * (cuMemcpyDtoHAsync/HtoDAsync) and by kernels (16-byte loads and stores through the mapped host pointer, as the
 * staged path's kernels do). A 2-rank ring all-reduce through host memory sends every rank's S bytes down the link
 * and reads S bytes back up, both ways at once, so its algbw ceiling is half the both-ways rate of one direction.
 * Prints each figure as the median of `reps` runs; exit status 0 measured, 2 a call failed, 3 the watchdog. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu_common.h"
#include "kernels.h"

enum mover { ENGINES, KERNELS };
struct buffers {
  CUdeviceptr dev[2], host_dev[2]; /* host_dev: the pinned buffers' device addresses */
  void *host[2];
  size_t bytes;
  int sms;
  CUstream s[2];
  CUevent start, end[2];
};

/* Direction 0 moves dev[0] down to host[0], direction 1 host[1] up to dev[1]. */
static void move(struct buffers *b, enum mover how, int dir, int share) {
  CUstream s = b->s[dir];
  if (how == ENGINES) {
    CU_MUST(dir == 0 ? cuMemcpyDtoHAsync(b->host[0], b->dev[0], b->bytes, s)
                     : cuMemcpyHtoDAsync(b->dev[1], b->host[1], b->bytes, s));
    return;
  }
  int err = dir == 0 ? copy_launch(b->host_dev[0], b->dev[0], b->bytes, b->sms / share, s)
                     : copy_launch(b->dev[1], b->host_dev[1], b->bytes, b->sms / share, s);
  if (err) {
    printf("FAILED: copy kernel launch: cudaError %d\n", err);
    exit(2);
  }
}

/* One timed run of the directions in `dirs` (bit 0: down, bit 1: up), started together on their own streams. The
 * rate of each direction is its bytes over its own time from the common start. */
static void run(struct buffers *b, enum mover how, int dirs, double gbps[2]) {
  int both = dirs == 3;
  CU_MUST(cuEventRecord(b->start, b->s[0]));
  CU_MUST(cuStreamWaitEvent(b->s[1], b->start, 0));
  for (int d = 0; d < 2; d++)
    if (dirs >> d & 1) {
      move(b, how, d, both ? 2 : 1);
      CU_MUST(cuEventRecord(b->end[d], b->s[d]));
    }
  for (int d = 0; d < 2; d++) {
    gbps[d] = 0;
    if (!(dirs >> d & 1)) continue;
    if (stream_wait(b->s[d], 60) != CUDA_SUCCESS) {
      printf("FAILED: a copy did not end within 60 s\n");
      exit(2);
    }
    float ms = 0;
    CU_MUST(cuEventElapsedTime(&ms, b->start, b->end[d]));
    gbps[d] = b->bytes / (ms * 1e6);
  }
}

/* Both directions' buffers hold their own pattern; after a run the destination words must be the source's. */
static int arrived(struct buffers *b, int dirs) {
  uint32_t got = 0;
  size_t last = b->bytes / 4 - 1;
  if ((dirs & 1) && (((uint32_t *)b->host[0])[0] != 0x0d0d0d0du || ((uint32_t *)b->host[0])[last] != 0x0d0d0d0du))
    return 0;
  if (dirs & 2) {
    CU_MUST(cuMemcpyDtoH(&got, b->dev[1] + last * 4, 4));
    if (got != 0x07070707u) return 0;
  }
  return 1;
}

static void measure(struct buffers *b, enum mover how, int dirs, int reps, const char *what) {
  double down[64], up[64];
  for (int r = 0; r < reps; r++) {
    CU_MUST(cuMemsetD32(b->dev[0], 0x0d0d0d0du, b->bytes / 4));
    CU_MUST(cuMemsetD32(b->host_dev[1], 0x07070707u, b->bytes / 4));
    CU_MUST(cuMemsetD32(b->host_dev[0], 0, b->bytes / 4));
    CU_MUST(cuMemsetD32(b->dev[1], 0, b->bytes / 4));
    CU_MUST(cuCtxSynchronize());
    double g[2];
    run(b, how, dirs, g);
    if (!arrived(b, dirs)) {
      printf("FAILED: %s: the copied bytes are wrong\n", what);
      exit(2);
    }
    down[r] = g[0], up[r] = g[1];
  }
  double d = median(down, reps), u = median(up, reps);
  printf("%-46s", what);
  if (dirs & 1) printf("  down %6.2f GB/s", d);
  if (dirs & 2) printf("  up %6.2f GB/s", u);
  if (dirs == 3) printf("  (2-rank staged ring ceiling: %.2f GB/s of algbw)", (d < u ? d : u) / 2);
  printf("\n");
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 1024;
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  if (mib == 0 || reps < 1 || reps > 64) {
    fprintf(stderr, "usage: pcie_ceiling [MiB=1024] [reps=5 (1-64)]\n");
    return 2;
  }
  watchdog_arm(300, "pcie_ceiling");
  CUdevice dev = gpu_open();
  struct buffers b = {.bytes = mib << 20, .sms = gpu_sm_count(dev)};
  for (int i = 0; i < 2; i++) {
    CU_MUST(cuMemAlloc(&b.dev[i], b.bytes));
    CU_MUST(cuMemHostAlloc(&b.host[i], b.bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    CU_MUST(cuMemHostGetDevicePointer(&b.host_dev[i], b.host[i], 0));
    CU_MUST(cuStreamCreate(&b.s[i], CU_STREAM_NON_BLOCKING));
    CU_MUST(cuEventCreate(&b.end[i], CU_EVENT_DEFAULT));
  }
  CU_MUST(cuEventCreate(&b.start, CU_EVENT_DEFAULT));
  printf("pcie_ceiling: %zu MiB each way, median of %d, %d SMs\n", mib, reps, b.sms);
  measure(&b, ENGINES, 1, reps, "copy engine, device to pinned host");
  measure(&b, ENGINES, 2, reps, "copy engine, pinned host to device");
  measure(&b, ENGINES, 3, reps, "copy engines, both ways at once");
  measure(&b, KERNELS, 1, reps, "kernel stores into pinned host");
  measure(&b, KERNELS, 2, reps, "kernel loads from pinned host");
  measure(&b, KERNELS, 3, reps, "kernels, both ways at once (half the SMs each)");
  return 0;
}
