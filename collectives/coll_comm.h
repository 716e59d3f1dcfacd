/* What collectives may see of their communicator: core embeds one view in it, fills it at creation, and supplies
 * the few core services planning and execution need as function pointers, so collectives include nothing of
 * src/core. op->comm points here. */
#ifndef DCCL_COLL_COMM_H_
#define DCCL_COLL_COMM_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "dccl.h"
#include "transports/transport.h"

#define DCCL_MAX_CHANNELS 64 /* lanes 0..63: below DCCL_LANE_P2P */
/* Lanes 0..nchannels-1 serve collectives; lanes from DCCL_LANE_P2P serve send/recv, so a group may run a
 * collective and point-to-point at once. */
#define DCCL_LANE_P2P 64
/* Device-buffer links are other links (their FIFOs are in GPU memory): the same lanes, offset by this. */
#define DCCL_LANE_DEVICE 128
/* Connections per channel: ring uses index 0; trees two children and the parent (DCCL_TREE_PARENT); one-shot
 * every other rank, so it serves up to DCCL_CONN_SLOTS + 1 ranks. */
#define DCCL_CONN_SLOTS 8

enum dccl_op_kind {
  DCCL_OP_ALLREDUCE = 1,
  DCCL_OP_BROADCAST,
  DCCL_OP_REDUCE,
  DCCL_OP_ALLGATHER,
  DCCL_OP_REDUCESCATTER,
  DCCL_OP_SEND,
  DCCL_OP_RECV,
};
/* DCCL_ALGO_ORDERED: deterministic mode's reductions (collectives/plan.c, plan_ordered). */
/* Where the direct all-reduce reaches every rank's buffers: every rank's GPU side is on this GPU and its board
 * mapped here; in one process any buffer is an address here, across processes only buffers in windows
 * (ncclCommWindowRegister) are mapped. */
enum dccl_direct_reach { DCCL_DIRECT_NONE = 0, DCCL_DIRECT_ONE_PROCESS = 1, DCCL_DIRECT_WINDOWS = 2 };
/* DCCL_ALGO_DIRECT: device all-reduce reading every rank's buffers in place (plan.c, plan_direct). */
enum dccl_algo {
  DCCL_ALGO_AUTO = 0,
  DCCL_ALGO_RING,
  DCCL_ALGO_TREE,
  DCCL_ALGO_ONESHOT,
  DCCL_ALGO_ORDERED,
  DCCL_ALGO_DIRECT,
  DCCL_ALGO_CE /* device all-reduce of ranks in several processes on one GPU by copy engines (dev_exec.h) */
};

/* One ring channel: the rank order, and where this rank sits. */
struct dccl_ring {
  int *order; /* nranks ranks; hosts kept together */
  int pos;    /* index of this rank in order */
  int prev, next;
};

/* One wanted link. */
struct dccl_conn_req {
  int peer, is_send, lane;
};

struct dccl_op;
struct dccl_op_pool;
struct dccl_dev_comm;

/* The operations posted on a communicator and not yet complete, in issue order (collectives/op_queue.c). One
 * thread progresses it at a time: the caller's for a blocking communicator, the progress thread for a nonblocking
 * one, which takes posts through `incoming` under `lock`. */
struct dccl_op_queue {
  struct dccl_op *head, *tail;
  struct dccl_op *incoming, *incoming_tail; /* posted by callers, not yet taken by the progress thread */
  pthread_mutex_t lock;                     /* guards incoming, stop and the pool (progress_thread only) */
  pthread_cond_t posted;                    /* signalled on a post or a stop: the progress thread waits on it */
  int progress_thread;                      /* 1: a progress thread owns this queue (nonblocking communicator) */
  int stop;                                 /* the progress thread exits once the queue is empty */
  _Atomic int pending;                      /* posted ops not yet complete */
};

struct dccl_coll_comm {
  int rank, nranks;
  int oversubscribed;                 /* more ranks than processing units on this host: waits yield at once */
  int nhosts, ranks_per_host;         /* hosts as DCCL_HOSTID sees them, and the busiest one's ranks (cost model) */
  const struct dccl_peer_info *peers; /* for messages naming a rank's host and pid */
  int nchannels;
  int dev_nchannels; /* channels of a device-buffer collective (one CTA each) */
  int direct_ok;     /* enum dccl_direct_reach: whose buffers the direct all-reduce can read (0: none) */
  int dev_net;       /* some device links go over a network transport: bulk slots only (its proxy reads headers) */
  int deterministic; /* DCCL_DETERMINISTIC: reductions in rank order, the same bits on every path */
  /* Plans of recent collectives, reused by identical calls (collectives/plan_cache.c). */
  struct dccl_plan_cache *plan_cache;
  struct dccl_op_pool *pool; /* free ops (collectives/op_pool.c) */
  _Atomic int ops_out;       /* ops taken from the pool and not back: a call may still be using the communicator */
  struct dccl_dev_comm *dev; /* the GPU state (collectives/device/dev_exec.c); NULL: host buffers only */
  struct dccl_op_queue queue;
  /* Cost model constants, measured at creation (src/tune). */
  double alpha_ns; /* per pipeline step latency (between hosts, where ring 0 crosses them: its slowest hop) */
  double alpha_intra_ns; /* one hand-off between ranks of a host (measured on ring 0's hops inside a host) */
  double bw_bytes_per_ns;
  double bw_net_bytes_per_ns; /* a ring step's rate between hosts (network or copies, the slower); 0: one host */
  /* The communicator's failure state, owned by core. */
  _Atomic int *abort_flag; /* nonzero: every wait stops */
  _Atomic int *dead_rank;  /* -1, or the rank whose death was reported */
  const char *error_text;  /* the first failure, "" until one */

  /* The algorithm for a collective of `kind` moving `bytes` (the cost model, src/tune). */
  int (*pick_algo)(const struct dccl_coll_comm *c, int kind, size_t bytes);
  /* The protocol (enum dccl_proto) for a collective of `kind` moving `bytes` (the cost model, src/tune). */
  int (*pick_proto)(const struct dccl_coll_comm *c, int kind, size_t bytes);
  /* The connection for (peer, direction, lane), or NULL if not connected yet. */
  struct dccl_conn *(*find_conn)(struct dccl_coll_comm *c, int peer, int is_send, int lane);
  /* An operation failed with `res` (its error text the thread's last error). `alone`: the one blocking host
   * collective that failed, else NULL (a group, a progress thread). A mismatch every rank can leave drains the
   * collective links and keeps the communicator; anything else records the failure (first one wins), sets the
   * abort flag and tells the peers' FIFOs. Returns the error for the caller. */
  ncclResult_t (*op_failed)(struct dccl_coll_comm *c, const struct dccl_op *alone, ncclResult_t res);
  /* Nonzero while a mismatch verdict asks the ranks to drain; drain_error then says whether `op` must fail. */
  _Atomic int *drain_pending;
  ncclResult_t (*drain_error)(struct dccl_coll_comm *c, const struct dccl_op *op);
  /* Rewrites the last error of a failed `what` so it names the rank that died, if the monitor reports one within
   * a short grace period, else `peer` (-1: none). Returns r. */
  ncclResult_t (*explain_failure)(struct dccl_coll_comm *c, ncclResult_t r, const char *what, int peer);
  /* A wait for `peer` on the operation whose call `call` describes has made no progress for idle_ns: noted for
   * stall reports, which it asks for once it has lasted DCCL_STALL_REPORT_MS (core/stall_report.c). */
  void (*waiting)(struct dccl_coll_comm *c, const struct dccl_slot_header *call, int peer, uint64_t idle_ns);
  _Atomic int *failure_code; /* the first failure's ncclResult_t, ncclSuccess until one */
  /* A slot from `peer` carried a call (`theirs`) other than this rank's (`mine`): tells every rank at once, and
   * returns ncclInvalidUsage with the error naming both calls. */
  ncclResult_t (*mismatch)(struct dccl_coll_comm *c, const struct dccl_slot_header *theirs, int peer,
                           const struct dccl_slot_header *mine);
  /* Last: the fields above, read on every call, keep their lines whatever DCCL_MAX_CHANNELS is. */
  struct dccl_ring rings[DCCL_MAX_CHANNELS];
};

#endif
