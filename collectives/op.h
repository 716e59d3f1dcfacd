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

const char *dccl_algo_name(int algo);

struct dccl_op_channel {
  struct dccl_sched sched;
  int recv_peer[DCCL_CONN_SLOTS], send_peer[DCCL_CONN_SLOTS]; /* -1: unused */
  int lane;
  struct dccl_conn *recv[DCCL_CONN_SLOTS], *send[DCCL_CONN_SLOTS];
  uint64_t nsteps[2], done[2];
  int needs_progress; /* some connection's transport has a progress function (set when bound) */
};

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
  int stream_out; /* the output exceeds the caches: copy into it with non-temporal stores */
  uint64_t seq;
  struct dccl_op *after; /* must finish before this one starts: same comm's previous collective or same link */
  int done;
  int bound; /* its channels' connections are looked up (dccl_op_bind, or a plan cache hit) */
  const struct dccl_conn *waiting_on; /* the connection the op last found not ready, for error messages */
  struct dccl_op *next;
  int nchannels;
  struct dccl_op_channel ch[DCCL_MAX_CHANNELS]; /* last: only the first nchannels are initialised */
};

/* Chooses the algorithm, splits the work over channels and fills each channel's schedule and peers. */
ncclResult_t dccl_op_plan(struct dccl_op *op);
/* Appends the connections op needs to reqs (capacity *cap, grown with realloc); count in *n. */
ncclResult_t dccl_op_conn_reqs(const struct dccl_op *op, struct dccl_conn_req **reqs, int *n, int *cap);
/* Every link the collectives may use, appended to reqs as dccl_op_conn_reqs does: made at creation, so no
 * collective makes a link. forced_algo is DCCL_ALGO's choice (DCCL_ALGO_AUTO: none): the ring channels always (all-gather,
 * reduce-scatter and the broadcast/reduce chains use them); the two all-reduce trees unless ring or one-shot is
 * forced; one-shot unless ring or tree is forced; under a forced tree also the broadcast and reduce trees of every
 * root. */
ncclResult_t dccl_coll_creation_links(struct dccl_coll_comm *comm, int forced_algo, struct dccl_conn_req **reqs,
                                      int *n, int *cap);
/* Looks up the (now connected) connections of every channel. */
ncclResult_t dccl_op_bind(struct dccl_op *op);

/* The plan cache (plan_cache.c), keyed by (kind, count, type, root): a hit fills op's algorithm and bound
 * channels and returns 1. put remembers a bound op before it runs; free drops a communicator's cache. */
int dccl_plan_cache_get(struct dccl_op *op);
void dccl_plan_cache_put(const struct dccl_op *op);
void dccl_plan_cache_free(struct dccl_coll_comm *comm);

/* Runs ops to completion, progressing all of them at once (a group's sends and receives can be posted in any
 * order). On failure the communicators of unfinished ops are marked failed and the error is returned. */
ncclResult_t dccl_exec_ops(struct dccl_op **ops, int nops);

#endif
