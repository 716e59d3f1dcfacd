// Opt-in timing of a launch's stages (cmake -DDCCL_DEV_STAGES=ON; without it every DEV_STAGE is empty and the
// kernels are unchanged): where a small operation's time goes inside the kernel, which a kernel trace sees only
// whole. Thread 0 of CTA 0 stamps %globaltimer the first time its launch passes each stage; at the launch's end
// the stage times join module-wide sums, and every 1024th launch prints their means (device printf: the lines
// reach stdout at the next synchronise). Ranks of one process share the module, so their launches mix in the
// means. A stage a launch skips (no data stage on bulk steps: their acquire waits for the data) adds nothing, and
// the next stage's time includes it.
#ifndef DCCL_DEV_STAGES_CUH_
#define DCCL_DEV_STAGES_CUH_

#include <stdint.h>

enum {
  DEV_STAGE_ENTRY,      // the kernel starts
  DEV_STAGE_TASK,       // the first task is in shared memory, its counters read
  DEV_STAGE_ACQUIRED,   // the first step's links are ready (the direct path: every peer has met)
  DEV_STAGE_DATA_IN,    // its LL lines have all come in
  DEV_STAGE_REDUCED,    // its reduction and copies are done
  DEV_STAGE_RELEASED,   // its sends are out and its slots handed back (direct: every peer is done)
  DEV_STAGE_TASKS_DONE, // the CTA's last task has ended
  DEV_STAGE_END,        // after the launch's count of ended CTAs (a release add on host memory)
  DEV_NSTAGES
};

#ifdef DCCL_DEV_STAGES
__device__ unsigned long long dev_stage_sum_ns[DEV_NSTAGES], dev_stage_launches;

__device__ __forceinline__ void dev_stage(uint64_t *stamps, int i) {
  if (blockIdx.x == 0 && threadIdx.x == 0 && !stamps[i]) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(stamps[i]));
}

__device__ __forceinline__ void dev_stages_begin(uint64_t *stamps) {
  if (blockIdx.x || threadIdx.x) return;
  for (int i = 0; i < DEV_NSTAGES; i++) stamps[i] = 0;
  dev_stage(stamps, DEV_STAGE_ENTRY);
}

__device__ __noinline__ void dev_stages_end(uint64_t *stamps) {
  if (blockIdx.x || threadIdx.x) return;
  dev_stage(stamps, DEV_STAGE_END);
  uint64_t prev = stamps[DEV_STAGE_ENTRY];
  for (int i = 1; i < DEV_NSTAGES; i++) {
    if (!stamps[i]) continue;
    atomicAdd(&dev_stage_sum_ns[i], (unsigned long long)(stamps[i] - prev));
    prev = stamps[i];
  }
  unsigned long long n = atomicAdd(&dev_stage_launches, 1ull) + 1;
  if (n % 1024) return;
  double us[DEV_NSTAGES];
  for (int i = 1; i < DEV_NSTAGES; i++) us[i] = (double)dev_stage_sum_ns[i] / (double)n / 1000.0;
  printf("dccl kernel stages, means over %llu launches (us): task %.2f acquired %.2f data_in %.2f reduced %.2f "
         "released %.2f tasks_done %.2f end %.2f\n",
         n, us[1], us[2], us[3], us[4], us[5], us[6], us[7]);
}

#define DEV_STAGE(cta, i) dev_stage((cta)->stamps, (i))
#define DEV_STAGES_BEGIN(cta) dev_stages_begin((cta)->stamps)
#define DEV_STAGES_END(cta) dev_stages_end((cta)->stamps)
#else
#define DEV_STAGE(cta, i) ((void)0)
#define DEV_STAGES_BEGIN(cta) ((void)0)
#define DEV_STAGES_END(cta) ((void)0)
#endif

#endif
