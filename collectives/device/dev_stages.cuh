// Opt-in timing of a launch's stages (cmake -DDCCL_DEV_STAGES=ON; without it every DEV_STAGE is empty and the
// kernels are unchanged): where a small operation's time goes inside the kernel, which a kernel trace sees only
// whole. Thread 0 of CTA 0 stamps %globaltimer each time its launch passes a stage, in the order they come (a
// one-shot passes the step stages twice: its send step, then its receive step), up to DEV_MAX_MARKS a launch. At the
// launch's end the time since the mark before joins a module-wide sum per position in that sequence, and every
// 1024th launch prints the means with each position's stage name. Ranks of one process share the module, so their
// launches mix in the means: read them only where every launch takes the same path. Some parts run twice in a
// stage build (DEV_AGAIN: the schedule, thread 0's acquire, the LL lines), each run timed: a first run much slower
// than the second spent its time fetching what the second finds cached (code, mostly: the data is in registers
// and shared memory).
#ifndef DCCL_DEV_STAGES_CUH_
#define DCCL_DEV_STAGES_CUH_

#include <stdint.h>

enum {
  DEV_STAGE_ENTRY,      // the kernel starts
  DEV_STAGE_TASK,       // a task is in shared memory, its links copied in
  DEV_STAGE_STEP,       // a step starts (thread 0, before its schedule and its wait for the links)
  DEV_STAGE_SCHED,      // thread 0 has the step from the schedule
  DEV_STAGE_AGAIN,      // thread 0 has run what it ran since the mark before a second time (warm: see DEV_AGAIN)
  DEV_STAGE_T0_READY,   // thread 0 has acquired the step's links (before the barrier that tells the CTA)
  DEV_STAGE_ACQUIRED,   // the step's links are ready (the direct path: every peer has met)
  DEV_STAGE_DATA_IN,    // its LL lines have all come in, their headers checked
  DEV_STAGE_REDUCED,    // its reduction and copies are done
  DEV_STAGE_SENT,       // thread 0 has written its LL lines
  DEV_STAGE_RELEASED,   // its sends are out and its slots handed back (direct: every peer is done)
  DEV_STAGE_TASKS_DONE, // the CTA's last task has ended
  DEV_STAGE_END,        // after the launch's count of ended CTAs (a release add on host memory)
  DEV_NSTAGES
};

#define DEV_MAX_MARKS 32

struct dev_marks {
  uint64_t at[DEV_MAX_MARKS];
  uint8_t stage[DEV_MAX_MARKS];
  int n;
};

#ifdef DCCL_DEV_STAGES
__device__ unsigned long long dev_mark_sum_ns[DEV_MAX_MARKS], dev_mark_launches;

__device__ __forceinline__ uint64_t dev_now() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void dev_stage(dev_marks *m, int stage) {
  if (blockIdx.x || threadIdx.x || m->n == DEV_MAX_MARKS) return;
  m->at[m->n] = dev_now();
  m->stage[m->n++] = (uint8_t)stage;
}

// Every CTA's start and end (thread 0), for the launch's spread: the last CTA to end adds how far apart the CTAs
// started and ended, and from the first start to the last end; CTA 0 prints the means after its stages (one thread
// prints both, so another CTA's line cannot land inside the stages line). CTA 0's stages cannot show a launch's
// other CTAs starting late or ending late.
#define DEV_SPREAD_CTAS 128
__device__ unsigned long long dev_cta_in[DEV_SPREAD_CTAS], dev_cta_out[DEV_SPREAD_CTAS];
__device__ unsigned long long dev_spread_sum_ns[3], dev_spread_launches;
__device__ unsigned int dev_ctas_out;

__device__ void dev_spread_end() {
  const unsigned ctas = gridDim.x < DEV_SPREAD_CTAS ? gridDim.x : DEV_SPREAD_CTAS;
  if (blockIdx.x < ctas) dev_cta_out[blockIdx.x] = dev_now();
  __threadfence();
  if (atomicAdd(&dev_ctas_out, 1u) != gridDim.x - 1) return;
  __threadfence();
  uint64_t in_lo = ~0ull, in_hi = 0, out_lo = ~0ull, out_hi = 0;
  for (unsigned b = 0; b < ctas; b++) {
    const uint64_t i = *(volatile unsigned long long *)&dev_cta_in[b];
    const uint64_t o = *(volatile unsigned long long *)&dev_cta_out[b];
    in_lo = i < in_lo ? i : in_lo;
    in_hi = i > in_hi ? i : in_hi;
    out_lo = o < out_lo ? o : out_lo;
    out_hi = o > out_hi ? o : out_hi;
  }
  dev_ctas_out = 0; // the stream's next launch starts after every CTA of this one has ended
  atomicAdd(&dev_spread_sum_ns[0], (unsigned long long)(in_hi - in_lo));
  atomicAdd(&dev_spread_sum_ns[1], (unsigned long long)(out_hi - out_lo));
  atomicAdd(&dev_spread_sum_ns[2], (unsigned long long)(out_hi - in_lo));
  atomicAdd(&dev_spread_launches, 1ull);
}

// CTA 0's print of the spread's means so far (the last CTA of this launch may not have added its own yet).
__device__ void dev_spread_print() {
  const unsigned long long n = *(volatile unsigned long long *)&dev_spread_launches;
  if (!n) return;
  printf("dccl launch spread, means over %llu launches of %u CTAs (us): starts %.2f, ends %.2f, first start to last "
         "end %.2f\n", n, gridDim.x, (double)dev_spread_sum_ns[0] / (double)n / 1000.0,
         (double)dev_spread_sum_ns[1] / (double)n / 1000.0, (double)dev_spread_sum_ns[2] / (double)n / 1000.0);
}

__device__ __forceinline__ void dev_stages_begin(dev_marks *m) {
  if (threadIdx.x) return;
  if (blockIdx.x < DEV_SPREAD_CTAS) dev_cta_in[blockIdx.x] = dev_now();
  if (blockIdx.x) return;
  m->n = 0;
  dev_stage(m, DEV_STAGE_ENTRY);
}

__device__ __noinline__ void dev_stages_end(dev_marks *m) {
  if (threadIdx.x) return;
  dev_stage(m, DEV_STAGE_END); // CTA 0's
  dev_spread_end();
  if (blockIdx.x) return;
  for (int i = 1; i < m->n; i++) atomicAdd(&dev_mark_sum_ns[i], (unsigned long long)(m->at[i] - m->at[i - 1]));
  unsigned long long n = atomicAdd(&dev_mark_launches, 1ull) + 1;
  if (n % 1024) return;
  static const char *const names[DEV_NSTAGES] = {"entry",   "task",    "step",       "sched", "again",
                                                 "t0_ready", "acquired", "data_in",   "reduced", "sent", "released",
                                                 "tasks_done", "end"};
  printf("dccl kernel stages, means over %llu launches (us since the mark before):", n);
  for (int i = 1; i < m->n; i++)
    printf(" %s %.2f", names[m->stage[i]], (double)dev_mark_sum_ns[i] / (double)n / 1000.0);
  printf("\n");
  dev_spread_print();
}

#define DEV_STAGE(cta, i) dev_stage(&(cta)->marks, (i))
#define DEV_STAGES_BEGIN(cta) dev_stages_begin(&(cta)->marks)
#define DEV_STAGES_END(cta) dev_stages_end(&(cta)->marks)
// Runs `what` (idempotent, no waiting) a second time and marks it: the first run's time against the second's says
// how much of it was fetching code and data the second finds cached.
#define DEV_AGAIN(cta, what) \
  do {                       \
    what;                    \
    DEV_STAGE(cta, DEV_STAGE_AGAIN); \
  } while (0)
#else
#define DEV_STAGE(cta, i) ((void)0)
#define DEV_STAGES_BEGIN(cta) ((void)0)
#define DEV_STAGES_END(cta) ((void)0)
#define DEV_AGAIN(cta, what) ((void)0)
#endif

#endif
