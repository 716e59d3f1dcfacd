/* gpu_ipc_pair: two processes on one GPU (or, for reference, two streams of one process) share memory by CUDA
 * IPC and measure what opening costs, the kernel flag round trip, and stream-ordered copies through it. */
#ifndef DCCL_PERF_GPU_PAIR_H_
#define DCCL_PERF_GPU_PAIR_H_

#include <cuda.h>

#include "ipc_region.h"

/* A side's exported region: its 8-byte kernel flag at 0, its 32-bit stream flag at PAIR_FLAG32, its inbox at
 * PAIR_INBOX (PAIR_BYTES long). A side polls its own flags and writes the peer's. */
#define PAIR_FLAG32 256
#define PAIR_GATE 512 /* 32-bit: side 0's stream waits here until a batch of echoes is all queued */
#define PAIR_INBOX ((size_t)2 << 20)
#define PAIR_BYTES ((size_t)256 << 20)
#define PAIR_MAX_ITERS 100000
#define PAIR_MAX_EVENTS 2001
#define PAIR_ECHO_BATCH 100
#define PAIR_MAX_BATCHES ((PAIR_MAX_EVENTS - 1) / PAIR_ECHO_BATCH)

struct side {
  CUstream stream;
  CUstream gate; /* opens side 0's gate */
  struct region own;
  struct mapping peer_map; /* two processes only */
  CUdeviceptr peer;        /* the peer's region as this side addresses it */
  CUdeviceptr src;         /* PAIR_BYTES of payload */
  CUdeviceptr stamps, status;
  CUevent events[PAIR_MAX_EVENTS];
  CUevent batch_start[PAIR_MAX_BATCHES];
};

struct pair {
  int local; /* both sides in this process, on two streams */
  int role;  /* two processes: 0 = A (leads and prints), 1 = B */
  int sock;
  enum region_kind kind;
  CUdevice dev;
  int sms;
  double budget_us; /* about how long one measurement should run */
  struct side side[2];
};

/* Whether this process drives side i. */
static inline int pair_mine(const struct pair *p, int i) {
  return p->local || p->role == i;
}
/* Both processes meet here (nothing to do in one process). */
void pair_barrier(struct pair *p);
/* A's *n becomes B's. */
void pair_agree(struct pair *p, int *n);
/* Each process zeroes its own sides' flags, then they meet. */
void pair_reset_flags(struct pair *p);
/* The stream of every side this process drives finishes within timeout_s, or the program ends (status 2). */
void pair_wait(struct pair *p, double timeout_s, const char *what);

void measure_attributes(struct pair *p);
void measure_open_costs(struct pair *p);
void measure_kernel_roundtrip(struct pair *p);
void measure_stream_copies(struct pair *p);

#endif
