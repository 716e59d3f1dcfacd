/* One operation as the host executor runs it: a collective or one side of a point-to-point transfer, planned
 * into per-channel schedules over bound connections. */
#ifndef DCCL_OP_H_
#define DCCL_OP_H_

#include <stddef.h>
#include <stdint.h>

#include "collectives/coll_comm.h"
#include "collectives/reduce.h"
#include "pure/schedule.h"

const char *dccl_op_name(int kind);
/* The header a kernel's slots of this op carry, but bytes and seq (executor.c; the fingerprint zero under
 * DCCL_CHECK=0). */
struct dccl_slot_header dccl_op_call_header(const struct dccl_op *op);
/* The same with the call's count, types and root whatever DCCL_CHECK says: what a report names. */
struct dccl_slot_header dccl_op_call(const struct dccl_op *op);
/* "1048576 x float32 sum, root 0", "4096 bytes": the call a slot header's fingerprint stands for (executor.c). */
void dccl_describe_call(const struct dccl_slot_header *h, char *out, size_t len);
/* What a kernel's record of a mismatch says: rank `rank` expected `want` where rank `peer`'s slot carried `got`
 * (other operations; other calls; other bytes; or the same step in the other protocol) (executor.c). */
void dccl_describe_device_mismatch(const struct dccl_slot_header *want, const struct dccl_slot_header *got, int peer,
                                   int rank, char *text, size_t len);

const char *dccl_algo_name(int algo);

struct dccl_op_channel {
  struct dccl_sched sched;
  int recv_peer[DCCL_CONN_SLOTS], send_peer[DCCL_CONN_SLOTS]; /* -1: unused */
  int lane;
  struct dccl_conn *recv[DCCL_CONN_SLOTS], *send[DCCL_CONN_SLOTS];
  uint64_t nsteps[2], done[2];
  int needs_progress; /* some connection's transport has a progress function (set when bound) */
};

/* A buffer the call does not use on this rank (a broadcast's input off the root, a reduce's output): as good as in a
 * window for the direct algorithms, and never read through one. */
#define DCCL_WINDOW_UNUSED (-2)

struct dccl_op {
  struct dccl_coll_comm *comm;
  int kind;
  const void *sendbuff;
  void *recvbuff;
  size_t count; /* elements: per rank for all-gather / reduce-scatter, else the whole buffer */
  ncclDataType_t type;
  size_t esize;
  struct dccl_redop redop;
  int root, peer;
  int algo;
  int proto; /* enum dccl_proto the slots of this operation ask for (a link without LL carries bulk) */
  int stream_out; /* the output exceeds the caches: copy into it with non-temporal stores */
  int on_device;  /* device buffers: runs in a kernel on `stream` (collectives/device/) */
  int send_win, recv_win; /* the mapped windows holding the buffers (DCCL_DIRECT_WINDOWS), -1, or
                             DCCL_WINDOW_UNUSED */
  void *stream;   /* the user's cudaStream_t */
  uint64_t seq;
  /* Posted before this one on the same links (the comm's previous collective, or the previous send/recv to the
   * same peer): it must finish first. Cleared when that op completes. */
  struct dccl_op *after;
  int finished;     /* the progressor's: every step ran and the bytes left this process */
  _Atomic int done; /* published when the progressor retires it; read by whoever waits for it */
  int bound; /* its channels' connections are looked up (dccl_op_bind, or a plan cache hit) */
  /* Nobody waits for it (a nonblocking communicator's op): the progressor returns it to the pool when done. */
  int detached;
  const struct dccl_conn *waiting_on; /* the connection the op last found not ready, for error messages */
  struct dccl_slot_header call; /* its slots' header but the bytes: the call's fingerprint (executor.c) */
  int call_ready;               /* `call` is filled (at the first progress) */
  struct dccl_op *next;  /* the caller's list (a group's operations) */
  struct dccl_op *qnext; /* the communicator's queue of posted operations */
  int nchannels;
  struct dccl_op_channel ch[DCCL_MAX_CHANNELS]; /* last: only the first nchannels are initialised */
};

/* Both buffers lie in mapped windows (or are unused): the direct algorithms can reach them from other processes. */
static inline int dccl_op_in_windows(const struct dccl_op *op) {
  return (op->send_win >= 0 || op->send_win == DCCL_WINDOW_UNUSED) &&
         (op->recv_win >= 0 || op->recv_win == DCCL_WINDOW_UNUSED);
}

/* The bytes a collective of `nranks` reads from its send buffer and writes to its receive buffer. */
static inline size_t dccl_op_in_bytes(const struct dccl_op *op, int nranks) {
  return op->count * op->esize * (op->kind == DCCL_OP_REDUCESCATTER ? (size_t)nranks : 1);
}
static inline size_t dccl_op_out_bytes(const struct dccl_op *op, int nranks) {
  return op->count * op->esize * (op->kind == DCCL_OP_ALLGATHER ? (size_t)nranks : 1);
}

/* Chooses the algorithm, splits the work over channels and fills each channel's schedule and peers. */
ncclResult_t dccl_op_plan(struct dccl_op *op);
/* The channels of a send/recv of `bytes`: 1 for host buffers, up to DCCL_DEV_P2P_NCHANNELS for device buffers (one
 * per MiB), and no more than let an all-to-all's group (2 (n - 1) lanes a channel, a CTA each) fit the communicator's
 * device channels. A send and its receive move the same bytes on communicators that agreed their device channels
 * at creation, so both ends find the same number. */
int dccl_p2p_nchannels(const struct dccl_coll_comm *comm, int on_device, uint64_t bytes);
/* Appends the connections op needs to reqs (capacity *cap, grown with realloc); count in *n. */
ncclResult_t dccl_op_conn_reqs(const struct dccl_op *op, struct dccl_conn_req **reqs, int *n, int *cap);
/* Every link the collectives may use, appended to reqs as dccl_op_conn_reqs does: made at creation, so no
 * collective makes a link. on_device: the device links (DCCL_LANE_DEVICE lanes) instead of the host's. forced_algo
 * is DCCL_ALGO's choice (DCCL_ALGO_AUTO: none): the ring channels always (all-gather, reduce-scatter and the
 * broadcast/reduce chains use them); the two all-reduce trees unless ring or one-shot is forced; one-shot unless
 * ring or tree is forced; under a forced tree also the broadcast and reduce trees of every root. */
ncclResult_t dccl_coll_creation_links(struct dccl_coll_comm *comm, int on_device, int forced_algo,
                                      struct dccl_conn_req **reqs, int *n, int *cap);
/* Looks up the (now connected) connections of every channel. */
ncclResult_t dccl_op_bind(struct dccl_op *op);

/* The plan cache (plan_cache.c), keyed by (kind, count, type, root, reduction): a hit fills op's algorithm and bound
 * channels and returns 1. put remembers a bound op before it runs; free drops a communicator's cache. */
int dccl_plan_cache_get(struct dccl_op *op);
void dccl_plan_cache_put(const struct dccl_op *op);
void dccl_plan_cache_free(struct dccl_coll_comm *comm);

/* Like dccl_op_bind, but only when every connection exists already: returns 0 (and sets no error) otherwise. */
int dccl_op_try_bind(struct dccl_op *op);

/* --- the op pool (op_pool.c): a communicator's ops are reused, so the per-call path allocates nothing --- */

/* A cleared op of comm (channels excepted: planning clears each one it uses); NULL when out of memory. */
/* The most channels a plan of comm's ops may use (an op holds that many): its host channels, the double tree's two,
 * or its device channels where it has a GPU. */
int dccl_op_max_channels(const struct dccl_coll_comm *comm);
struct dccl_op *dccl_op_get(struct dccl_coll_comm *comm);
/* Returns an op to its communicator's pool. */
void dccl_op_put(struct dccl_op *op);
/* Frees the pool (at destroy: no op of the communicator is in use any more). */
void dccl_op_pool_free(struct dccl_coll_comm *comm);

/* --- post, progress, wait (op_queue.c) --- */

/* Appends op to its communicator's queue, after every posted op it shares links with. */
void dccl_op_post(struct dccl_op *op);
/* Progresses one op as far as its links allow (executor.c); sets op->finished when it completes, *progressed if
 * anything moved. */
ncclResult_t dccl_op_progress(struct dccl_op *op, int *progressed);
/* One round over a communicator's posted ops: progresses each whose predecessors are done, retires the finished
 * ones (returning detached ones to the pool). On failure returns the error; the queue is then abandoned. */
ncclResult_t dccl_queue_progress(struct dccl_coll_comm *comm, int *progressed);
/* Slow-path checks of a queue's ops while nothing moves (a dead peer, an abort, a deadline). */
ncclResult_t dccl_queue_check_stalled(struct dccl_coll_comm *comm, uint64_t idle_ns);
/* The same for one op, queued or not. */
ncclResult_t dccl_op_check_stalled(struct dccl_op *op, uint64_t idle_ns);
/* Removes every op from the queue after a failure; detached ones go back to the pool, the others to their
 * waiters, who see them done. */
void dccl_queue_abandon(struct dccl_coll_comm *comm);
/* Waits until every op of the list (linked by next) is done, progressing the queues of their communicators
 * (except those a progress thread owns). On failure every communicator involved is marked failed and the error
 * is returned. */
ncclResult_t dccl_ops_wait(struct dccl_op *list);
/* Whether op (alone in its list) may skip the queue: a blocking communicator's only op, nothing posted before it. */
int dccl_op_runs_alone(const struct dccl_op *op);
/* Runs such an op to completion on this thread; on failure the communicator is marked failed. */
ncclResult_t dccl_op_run_alone(struct dccl_op *op);

#endif
