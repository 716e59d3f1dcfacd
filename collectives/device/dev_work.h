/* What a kernel is told: one launch runs a group's device operations, each planned into the same schedules the
 * host executor runs (pure/schedule.h), over connections whose FIFOs live in device memory (pure/conn_desc.h).
 * Compiles as C11 (the host fills it) and as CUDA (the kernel reads it). Addresses are device-visible: user
 * buffers, device memory, or pinned host memory mapped into the device's address space. */
#ifndef DCCL_DEV_WORK_H_
#define DCCL_DEV_WORK_H_

#include <stdint.h>

#include "pure/dev_conn.h"
#include "pure/schedule.h"

#define DCCL_DEV_CONN_SLOTS 8 /* = DCCL_CONN_SLOTS */
#define DCCL_DEV_THREADS 512  /* per CTA: 16 warps, split in two halves when a channel runs two streams */

/* A reduction as the kernel applies it (collectives/reduce.h's struct dccl_redop, with plain types). */
struct dccl_dev_redop {
  uint32_t type;     /* enum dccl_elem_type */
  uint32_t kind;     /* 0 sum, 1 prod, 2 max, 3 min */
  uint32_t has_pre;  /* premultiply the own input by `pre` */
  uint32_t post_div; /* 0, or divide the final value by it (integer average) */
  uint64_t pre;      /* the premultiplier's bits, in `type` */
  uint64_t pre_ptr;  /* or, when not 0: the device address each task reads them from as it starts */
};

/* The direct all-reduce's meeting point: each rank has one of these per channel in its GPU memory, and every rank
 * of the communicator reads every rank's (in its own process, or mapped from another's). A channel's CTA publishes
 * the call's buffers, then `seq`; reads every peer's once their `seq` reaches it; reduces; then sets `done` and
 * waits for every peer's. `ops` counts the channel's direct operations, on the device, so a replayed graph
 * continues the count; `aborted` tells the peers this rank gave up (they stop instead of waiting). Only the owning
 * rank's CTA of that channel writes its slot. Buffers are the owner's addresses; `send_win`/`recv_win` name the
 * window holding each (ncclCommWindowRegister), through which a reader in another process finds it, or are -1
 * where every rank shares the owner's address space. */
struct dccl_direct_slot {
  uint64_t ops, seq, done, aborted;
  const char *sendbuff;
  char *recvbuff;
  struct dccl_slot_header call; /* the call's fingerprint: ranks that called differently fail, naming both */
  int32_t send_win, recv_win;
  uint64_t pad[4]; /* 128 bytes: a slot's polled words share no line with another channel's */
};

/* What a direct operation does (DCCL_SCHED_DIRECT; collectives/device/kernels.cu, dev_direct). */
enum dccl_direct_op {
  DCCL_DIRECT_OP_ALLREDUCE,     /* rank r reduces slice r of every input, writes it into every output */
  DCCL_DIRECT_OP_REDUCESCATTER, /* rank r reduces block r of every input into its own output */
  DCCL_DIRECT_OP_ALLGATHER,     /* rank r copies its input into block r of every output */
  DCCL_DIRECT_OP_BROADCAST,     /* rank r copies slice r of the root's input into every output */
  DCCL_DIRECT_OP_REDUCE,        /* rank r reduces slice r of every input into the root's output */
};

/* Where window w of rank r lies: at `owner` in rank r's process and at `local` in this one. The table of a
 * communicator's windows, DCCL_MAX_WINDOWS rows of nranks entries, follows its board table in device memory. */
#define DCCL_MAX_WINDOWS 64
struct dccl_win_peer {
  uint64_t owner, local;
};

/* One channel of one operation: the unit a CTA runs. */
struct dccl_dev_task {
  struct dccl_sched sched; /* ring_rank points at device-visible memory */
  struct dccl_dev_conn *recv[DCCL_DEV_CONN_SLOTS], *send[DCCL_DEV_CONN_SLOTS];
  uint64_t nsteps[2];
  const char *sendbuff;
  char *recvbuff;
  struct dccl_dev_redop redop;
  uint32_t esize;
  uint32_t kind; /* enum dccl_op_kind: a send's slots say DCCL_OP_SEND, which its receiver expects */
  int32_t rank;  /* this rank: the one-shot sum puts its own input at its place in rank order */
  uint32_t proto; /* enum dccl_proto: LL (one step's payload of at most DCCL_DEV_LL_BYTES) or bulk */
  struct dccl_slot_header call; /* its slots' header but bytes and seq: their kind and the call's fingerprint */
  uint32_t channel;              /* direct: which slot of each board is this task's */
  uint32_t direct_op;            /* direct: enum dccl_direct_op */
  int16_t send_win, recv_win;    /* direct: the windows holding this rank's buffers, or -1 (one process) */
  uint8_t cta0, ctas;            /* direct, ctas > 1: the task of channels channel.. on CTAs cta0..cta0 + ctas - 1,
                                    CTA b running channel + b - cta0 (an operation alone in its launch) */
  struct dccl_direct_slot *const *boards; /* direct: every rank's board (DCCL_MAX_CHANNELS slots), by rank; the
                                             windows' table (struct dccl_win_peer) follows the nranks entries */
};

/* Where the kernel reports what stopped it; host-mapped, read by ncclCommGetAsyncError. */
struct dccl_dev_status {
  uint32_t error;     /* enum dccl_dev_error, 0 while all is well */
  int32_t peer;       /* the link's far end */
  struct dccl_slot_header want, got; /* a mismatch: this rank's header and the one that arrived */
};
/* DCCL_DEV_RECORDING: a CTA claimed the record and is writing peer, want and got; the code follows them, so a host
 * that reads a code also reads the details (it takes RECORDING as no failure yet). */
enum dccl_dev_error {
  DCCL_DEV_OK = 0,
  DCCL_DEV_ABORTED,
  DCCL_DEV_MISMATCH,
  DCCL_DEV_PEER_ABORTED,
  DCCL_DEV_RECORDING = 0xffffffffu
};

/* A kernel's share of a copy-engine collective's round (collectives/device/ce_collectives.h): the copy engines move
 * the ranks' pieces between processes, and a launch with `ce.mode` set only combines or copies what already arrived,
 * never waiting on anything, so it cannot hold the GPU from a peer's context. In a call's first round (`theirs` set)
 * it first compares every rank's call with this one's (a mismatch is recorded as a kernel's, and nothing moved).
 * REDUCE combines srcs[0..n) in rank order (srcs[own] this rank's input, the one that gets a premultiply; an
 * average's scalar is on every source) into dsts[0], count[0] elements; GATHER copies count[i] bytes from srcs[i] to
 * dsts[i], i < n. The CTAs split each range. */
#define DCCL_CE_MAX_RANKS 8
enum dccl_ce_mode { DCCL_CE_NONE = 0, DCCL_CE_REDUCE, DCCL_CE_GATHER };
struct dccl_ce_work {
  uint32_t mode, n, esize, nranks;
  int32_t own;
  struct dccl_dev_redop redop;
  struct dccl_slot_header call;  /* this rank's call, against... */
  const uint32_t *theirs;        /* ...every rank's (count low, high, what, kind | root + 1 << 8; by rank), or NULL
                                    (not a call's first round: the first finds any mismatch) */
  int32_t peer_only;             /* 1 + the one rank whose entry is compared (a receive's sender), or 0: all */
  uint64_t count[DCCL_CE_MAX_RANKS];
  const void *srcs[DCCL_CE_MAX_RANKS];
  void *dsts[DCCL_CE_MAX_RANKS];
};

/* One launch, passed to the kernel by value (its parameter: nothing for the GPU to fetch from host memory first).
 * CTA b runs tasks [cta_first[b], cta_first[b] + cta_ntasks[b]) in order: the channel c tasks of a communicator's
 * collectives share links, so one CTA runs them one after the other; point-to-point tasks of different peers get
 * CTAs of their own, so a send never waits behind a receive. Up to DCCL_DEV_INLINE_TASKS tasks travel inside the
 * parameter; a larger group's tasks lie in pinned host memory (`tasks`). One launch may run the CTAs of several
 * ranks of this process on one GPU (launch_merge.h): CTA b is rank slot cta_rank[b]'s, and checks and reports
 * through rank[cta_rank[b]]. */
#define DCCL_DEV_MAX_TASKS 1024
#define DCCL_DEV_MAX_CTAS 64
#define DCCL_DEV_INLINE_TASKS 8
#define DCCL_DEV_LAUNCH_RANKS 8
struct dccl_dev_rank_words {
  const uint32_t *abort_flag;     /* host-mapped: nonzero stops every wait */
  struct dccl_dev_status *status; /* host-mapped */
  uint32_t *done_ctas; /* host-mapped: the launch's exited CTAs are added (each its 1, or the last all of them:
                          dccl_dev_work.exit_ctas); NULL when captured (a replay is not counted) */
  uint32_t ctas;       /* the launch's CTAs of this rank (what the last CTA adds to done_ctas for all of them) */
};
struct dccl_dev_work {
  struct dccl_dev_rank_words rank[DCCL_DEV_LAUNCH_RANKS];
  const struct dccl_dev_task *tasks; /* host-mapped, or NULL: the tasks are `inline_tasks` */
  uint32_t ntasks, nctas;
  struct dccl_ce_work ce; /* mode DCCL_CE_NONE but in a copy-engine collective's launches */
  uint16_t cta_first[DCCL_DEV_MAX_CTAS], cta_ntasks[DCCL_DEV_MAX_CTAS];
  uint8_t cta_rank[DCCL_DEV_MAX_CTAS];
  /* Device memory: the launch's CTAs that have exited, whose last adds every rank's CTAs to its done_ctas at once
   * and sets it back to 0 for the communicator's next launch; NULL: each CTA adds itself (a captured launch, one of
   * fewer than 4 CTAs, a copy-engine round). */
  uint32_t *exit_ctas;
  struct dccl_dev_task inline_tasks[DCCL_DEV_INLINE_TASKS];
};

/* A tiny launch (collectives/device/kernel_choice.h) of at most DCCL_DEV_SLIM_CTAS CTAs, CTA b running task b: the
 * slim kernels' parameter, 0.8 KB where struct dccl_dev_work is 3.7 KB. The launch call's time grows with its
 * parameter (3.5 KB cost an empty kernel ~0.45 us more on an H100), and a tiny launch's call is on its path. */
#define DCCL_DEV_SLIM_CTAS 2
struct dccl_dev_slim_work {
  struct dccl_dev_rank_words rank[DCCL_DEV_SLIM_CTAS];
  struct dccl_dev_task inline_tasks[DCCL_DEV_SLIM_CTAS];
  uint8_t cta_rank[DCCL_DEV_SLIM_CTAS];
};

#endif
