/* The host executor: runs a planned operation's schedule over connections, on host buffers, as far as its links
 * allow. Nothing here waits: the queue (op_queue.c) calls dccl_op_progress on every posted op in turn, so no
 * operation can wait on another that has not been started. */
#include <stdio.h>
#include <string.h>

#include "collectives/copy_stream.h"
#include "collectives/op.h"
#include "util/error.h"
#include "util/params.h"
#include "util/wait.h"

/* Which of the channel's connections a step uses, as a bit mask over indices 0..DCCL_CONN_SLOTS-1. */
static uint32_t step_mask(const struct dccl_prim_step *st, int is_send, int npeers) {
  uint32_t m = 0, flags = st->flags;
  if (flags & (is_send ? DCCL_PRIM_SEND_PEER : DCCL_PRIM_RECV_PEER)) m |= 1u << st->peer;
  if (flags & (is_send ? DCCL_PRIM_SEND0 : DCCL_PRIM_RECV0)) m |= 1u << 0;
  if (flags & (is_send ? DCCL_PRIM_SEND1 : DCCL_PRIM_RECV1)) m |= 1u << 1;
  if (flags & (is_send ? DCCL_PRIM_SEND_PARENT : DCCL_PRIM_RECV_PARENT)) m |= 1u << DCCL_TREE_PARENT;
  if (flags & (is_send ? DCCL_PRIM_SEND_ALL : DCCL_PRIM_RECV_ALL)) m |= (1u << npeers) - 1;
  return m;
}

/* A failure seen on a link, restated with the operation and, if known, the rank that died. */
static ncclResult_t explain_failure(struct dccl_op *op, ncclResult_t r, int peer) {
  char what[96];
  snprintf(what, sizeof(what), "%s #%llu", dccl_op_name(op->kind), (unsigned long long)op->seq);
  return op->comm->explain_failure(op->comm, r, what, peer);
}

static int has_reduction(int kind) {
  return kind == DCCL_OP_ALLREDUCE || kind == DCCL_OP_REDUCE || kind == DCCL_OP_REDUCESCATTER;
}

/* A slot's header as this operation sends it: the step's bytes, the operation, and the call's fingerprint. */
static struct dccl_slot_header call_header(const struct dccl_op *op, uint64_t bytes) {
  struct dccl_slot_header h = {bytes, op->seq, (uint32_t)(op->kind == DCCL_OP_RECV ? DCCL_OP_SEND : op->kind), 0,
                               op->count, 0, op->root};
  if (op->kind == DCCL_OP_SEND || op->kind == DCCL_OP_RECV) {
    h.count = op->count * op->esize; /* a send and its receive agree on bytes, not on types */
    h.root = -1;
  } else {
    h.what = (uint32_t)op->type + 1;
    if (has_reduction(op->kind)) h.what |= (uint32_t)(op->redop.called + 1) << 8;
  }
  return h;
}

struct dccl_slot_header dccl_op_call(const struct dccl_op *op) { return call_header(op, 0); }

struct dccl_slot_header dccl_op_call_header(const struct dccl_op *op) {
  struct dccl_slot_header h = call_header(op, 0);
  if (!dccl_param_int(DCCL_PARAM_CHECK)) { /* every rank sends the same, so no compare fails */
    h.count = h.what = 0;
    h.root = -1;
  }
  return h;
}

void dccl_describe_call(const struct dccl_slot_header *h, char *out, size_t len) {
  static const char *const red_names[] = {"sum", "prod", "max", "min", "avg"};
  if (h->kind == DCCL_OP_SEND || h->kind == DCCL_OP_RECV) {
    snprintf(out, len, "%llu bytes", (unsigned long long)h->count);
    return;
  }
  int red = (int)(h->what >> 8) - 1;
  const char *red_name = red < 0                       ? ""
                         : red == DCCL_CALLED_PREMULSUM ? " premulsum"
                         : red < 5                      ? red_names[red]
                                                        : "?";
  int n = snprintf(out, len, "%llu x %s%s%s", (unsigned long long)h->count,
                   dccl_type_name((ncclDataType_t)((h->what & 0xff) - 1)), red >= 0 && red < 5 ? " " : "", red_name);
  if (h->root >= 0 && n > 0 && (size_t)n < len) snprintf(out + n, len - (size_t)n, ", root %d", h->root);
}

void dccl_describe_device_mismatch(const struct dccl_slot_header *want, const struct dccl_slot_header *got, int peer,
                                   int rank, char *text, size_t len) {
  char theirs[96], ours[96];
  dccl_describe_call(got, theirs, sizeof(theirs));
  dccl_describe_call(want, ours, sizeof(ours));
  const char *name = dccl_op_name((int)want->kind);
  if (got->kind != want->kind || got->seq != want->seq)
    snprintf(text, len,
             "mismatched operations on the device link with rank %d: it sent %s (operation %llu on the link) where "
             "rank %d expects %s (operation %llu)",
             peer, dccl_op_name((int)got->kind), (unsigned long long)got->seq, rank, name,
             (unsigned long long)want->seq);
  else if (got->count != want->count || got->what != want->what || got->root != want->root)
    snprintf(text, len, "mismatched calls on the device link: rank %d called %s with %s, rank %d with %s", peer, name,
             theirs, rank, ours);
  else if (got->bytes != want->bytes)
    snprintf(text, len, "%s: rank %d sent %llu bytes where rank %d expects %llu (counts differ between ranks)", name,
             peer, (unsigned long long)got->bytes, rank, (unsigned long long)want->bytes);
  else /* the same call and step: the two kernels chose different protocols (LL, bulk) for it */
    snprintf(text, len,
             "%s: ranks %d and %d sent the same step in different protocols (LL and bulk): DCCL_PROTO must be alike "
             "on every rank",
             name, peer, rank);
}

/* Checks a received slot belongs to this operation; a mismatch means the ranks called different operations, or the
 * same one with different arguments. */
static ncclResult_t check_slot(const struct dccl_op *op, const struct dccl_conn *c, const struct dccl_slot_header *h,
                               uint64_t bytes) {
  if (h->abort)
    return dccl_error(ncclRemoteError, "%s #%llu: rank %d aborted the operation", dccl_op_name(op->kind),
                      (unsigned long long)op->seq, c->peer);
  const struct dccl_slot_header *call = &op->call;
  int other_op = h->seq != op->seq || h->kind != call->kind;
  if (other_op || ((h->count != call->count || h->what != call->what || h->root != call->root) &&
                   dccl_param_int(DCCL_PARAM_CHECK))) {
    struct dccl_slot_header mine = *call;
    mine.bytes = bytes;
    mine.kind = (uint32_t)op->kind; /* a receive is named as one */
    return op->comm->mismatch(op->comm, h, c->peer, &mine);
  }
  if (h->bytes != bytes)
    return dccl_error(ncclInvalidUsage,
                      "%s #%llu: rank %d sent %llu bytes where rank %d expects %llu (counts differ between ranks)",
                      dccl_op_name(op->kind), (unsigned long long)op->seq, c->peer, (unsigned long long)h->bytes,
                      op->comm->rank, (unsigned long long)bytes);
  return ncclSuccess;
}

/* out = x_0 op x_1 op ... op x_{N-1} in rank order, x_me = pre(own input): every rank computes the same bits. The
 * receive connections are in rank order without this rank; the own data goes in at its place. */
static void reduce_rank_order(const struct dccl_op *op, void *out, const void *in, struct dccl_conn *const *rconn,
                              const void *const *srcs, int nrecv, uint64_t nelem, int post) {
  const void *ordered[DCCL_CONN_SLOTS + 1];
  int n = 0, placed = 0;
  const void *own = in; /* the input itself, or pre(input) in the output */
  if (op->redop.has_pre) {
    dccl_reduce_host(&op->redop, out, in, NULL, 0, nelem, 0);
    own = out;
  }
  for (int j = 0; j < nrecv; j++) {
    if (!placed && rconn[j]->peer > op->comm->rank) ordered[n++] = own, placed = 1;
    ordered[n++] = srcs[j];
  }
  if (!placed) ordered[n++] = own;
  struct dccl_redop plain = op->redop;
  plain.has_pre = 0; /* the other ranks applied their own premultiply before sending */
  dccl_reduce_host(&plain, out, NULL, ordered, n, nelem, post);
}

/* A step that only forwards user input to one peer may leave the bytes where they are, if the transport can read
 * them there (net_ib, from a registered buffer). LL payloads travel in the slot's units and small bulk ones in the
 * header's line: always copied. */
static int sends_in_place(struct dccl_conn *const *sconn, const struct dccl_send_slot *ss, int nsend, int nrecv,
                          const char *in, const char *out, const struct dccl_redop *redop, int post, uint64_t bytes) {
  if (nsend != 1 || nrecv != 0 || !in || out || redop->has_pre || post || ss[0].proto != DCCL_PROTO_BULK ||
      bytes <= DCCL_SLOT_INLINE_BYTES) /* a small payload rides in the header's line */
    return 0;
  return sconn[0]->transport->send_from(sconn[0], ss[0].pos, in, bytes);
}

/* Executes one step if every connection it needs is ready; *ready says whether it ran. */
static ncclResult_t exec_step(struct dccl_op *op, struct dccl_op_channel *ch, const struct dccl_prim_step *st,
                              int *ready) {
  struct dccl_send_slot ss[DCCL_CONN_SLOTS];
  struct dccl_conn *rconn[DCCL_CONN_SLOTS], *sconn[DCCL_CONN_SLOTS];
  const void *srcs[DCCL_CONN_SLOTS];
  int nrecv = 0, nsend = 0;
  uint64_t bytes = st->nelem * op->esize;
  *ready = 0;
  uint32_t rmask = step_mask(st, 0, ch->sched.npeers), smask = step_mask(st, 1, ch->sched.npeers);
  for (uint32_t m = rmask; m; m &= m - 1) {
    struct dccl_conn *c = ch->recv[__builtin_ctz(m)];
    if (!c) continue;
    if (dccl_conn_peer_aborted(c)) {
      /* This rank's own stop (a revoke, an abort, a failure noted) marks its links too: name that stop's cause. */
      if (atomic_load_explicit(op->comm->abort_flag, memory_order_relaxed)) return dccl_op_check_stalled(op, 0);
      dccl_error(ncclRemoteError, "rank %d gave up on the operation (its own error says why)", c->peer);
      return explain_failure(op, ncclRemoteError, c->peer);
    }
    struct dccl_recv_slot rs;
    if (!dccl_conn_recv_slot(c, &rs)) {
      op->waiting_on = c;
      return ncclSuccess;
    }
    DCCLCHECK(check_slot(op, c, &rs.h, bytes));
    rconn[nrecv] = c;
    srcs[nrecv++] = rs.payload;
  }
  for (uint32_t m = smask; m; m &= m - 1) {
    struct dccl_conn *c = ch->send[__builtin_ctz(m)];
    if (!c) continue;
    if (bytes > c->desc.slot_bytes)
      return dccl_error(
          ncclInternalError, "%s: a step of %llu bytes exceeds the %llu-byte slots of the link to rank %d",
          dccl_op_name(op->kind), (unsigned long long)bytes, (unsigned long long)c->desc.slot_bytes, c->peer);
    if (!dccl_conn_send_slot(c, bytes, op->proto, &ss[nsend])) {
      op->waiting_on = c;
      return ncclSuccess;
    }
    sconn[nsend++] = c;
  }

  const char *in = NULL;
  if (st->flags & DCCL_PRIM_INPUT)
    in = (st->flags & DCCL_PRIM_INPUT_FROM_OUTPUT ? (const char *)op->recvbuff : (const char *)op->sendbuff) +
         st->in_off * op->esize;
  char *out = (st->flags & DCCL_PRIM_OUTPUT) ? (char *)op->recvbuff + st->out_off * op->esize : NULL;
  int post = (st->flags & DCCL_PRIM_POST) != 0;
  /* The root of an all-reduce tree forwards data that already had its input's premultiply: plain copy. */
  const struct dccl_redop *redop = &op->redop;
  struct dccl_redop plain;
  if (st->flags & DCCL_PRIM_INPUT_FROM_OUTPUT) {
    plain = op->redop;
    plain.has_pre = 0;
    redop = &plain;
  }
  if (st->nelem > 0 && (st->flags & DCCL_PRIM_RANK_ORDER)) {
    reduce_rank_order(op, out, in, rconn, srcs, nrecv, st->nelem, post);
  } else if (st->nelem > 0 && sends_in_place(sconn, ss, nsend, nrecv, in, out, redop, post, bytes)) {
    /* the transport reads the user's input itself */
  } else if (st->nelem > 0) {
    /* Reduce once, into the first destination; copy from there to the others. */
    void *dst = nsend > 0 ? ss[0].payload : out;
    /* Large outputs bypass the caches, except where the output is this step's input (in-place): its lines were
     * just read, so plain stores find them in cache, and non-temporal ones would first have to evict them. */
    void *(*copy_out)(void *, const void *, size_t) = op->stream_out && out != in ? dccl_copy_stream : memcpy;
    if (dst == out && !in && nrecv == 1 && !post)
      copy_out(out, srcs[0], bytes); /* a received block's last stop */
    else if (dst)
      dccl_reduce_host(redop, dst, in, srcs, nrecv, st->nelem, post);
    for (int j = 1; j < nsend; j++) memcpy(ss[j].payload, dst, bytes);
    if (out && dst != out) copy_out(out, dst, bytes);
  }
  struct dccl_slot_header h = op->call;
  h.bytes = bytes;
  for (int j = 0; j < nsend; j++) dccl_conn_send_post_header(sconn[j], &ss[j], &h);
  for (int j = 0; j < nrecv; j++) dccl_conn_recv_done(rconn[j]);
  *ready = 1;
  return ncclSuccess;
}

static ncclResult_t progress_conn(struct dccl_op *op, struct dccl_conn *c) {
  if (!c) return ncclSuccess;
  ncclResult_t r = c->transport->progress(c);
  return r == ncclSuccess ? r : explain_failure(op, r, c->peer);
}

static ncclResult_t progress_conns(struct dccl_op *op, struct dccl_op_channel *ch) {
  if (!ch->needs_progress) return ncclSuccess; /* shm: the executor's own stores move the bytes */
  for (int i = 0; i < DCCL_CONN_SLOTS; i++) {
    DCCLCHECK(progress_conn(op, ch->recv[i]));
    DCCLCHECK(progress_conn(op, ch->send[i]));
  }
  return ncclSuccess;
}

static int channel_flushed(const struct dccl_op_channel *ch) {
  for (int i = 0; i < DCCL_CONN_SLOTS; i++)
    if (ch->send[i] && !ch->send[i]->transport->send_flushed(ch->send[i]))
      return 0;
  return 1;
}

/* Runs as many steps as are ready; sets *progressed if any ran. */
ncclResult_t dccl_op_progress(struct dccl_op *op, int *progressed) {
  if (!op->call_ready) {
    op->call = call_header(op, 0);
    op->call_ready = 1;
  }
  int all_done = 1;
  for (int c = 0; c < op->nchannels; c++) {
    struct dccl_op_channel *ch = &op->ch[c];
    DCCLCHECK(progress_conns(op, ch));
    for (int s = 0; s < 2; s++) {
      while (ch->done[s] < ch->nsteps[s]) {
        struct dccl_prim_step st;
        dccl_sched_step(&ch->sched, s, ch->done[s], &st);
        if (st.wait_up >= 0 && (int64_t)ch->done[0] <= st.wait_up) break;
        int ready;
        DCCLCHECK(exec_step(op, ch, &st, &ready));
        if (!ready) break;
        ch->done[s]++;
        *progressed = 1;
      }
      if (ch->done[s] < ch->nsteps[s]) all_done = 0;
    }
    /* Bytes a transport still holds for the peer must leave before the op counts as done. */
    if (all_done) DCCLCHECK(progress_conns(op, ch));
    if (all_done && !channel_flushed(ch)) all_done = 0;
  }
  if (all_done) {
    op->finished = 1;
    *progressed = 1;
  }
  return ncclSuccess;
}

/* Slow-path checks while nothing moves: a dead peer, an abort, a deadline. */
ncclResult_t dccl_op_check_stalled(struct dccl_op *op, uint64_t idle_ns) {
  struct dccl_coll_comm *comm = op->comm;
  if (atomic_load(comm->abort_flag)) {
    int dead = atomic_load(comm->dead_rank);
    if (dead >= 0)
      return dccl_error(ncclRemoteError, "%s #%llu failed: rank %d (host %s, pid %d) died", dccl_op_name(op->kind),
                        (unsigned long long)op->seq, dead, comm->peers[dead].hostname, comm->peers[dead].pid);
    int code = atomic_load(comm->failure_code);
    return dccl_error(code == ncclInvalidUsage ? ncclInvalidUsage : ncclRemoteError, "%s #%llu %s: %s",
                      dccl_op_name(op->kind), (unsigned long long)op->seq,
                      code == ncclInvalidUsage ? "failed" : "aborted",
                      comm->error_text[0] ? comm->error_text : "the communicator was aborted");
  }
  if (atomic_load_explicit(comm->drain_pending, memory_order_relaxed)) DCCLCHECK(comm->drain_error(comm, op));
  const struct dccl_conn *w = op->waiting_on;
  if (w) {
    ncclResult_t r = w->transport->check_peer((struct dccl_conn *)w);
    if (r != ncclSuccess) return explain_failure(op, r, w->peer);
  }
  if (idle_ns > 0) {
    struct dccl_slot_header call = call_header(op, 0);
    call.kind = (uint32_t)op->kind; /* a receive is shown as one */
    comm->waiting(comm, &call, w ? w->peer : -1, idle_ns);
  }
  int64_t timeout_s = dccl_param_int(DCCL_PARAM_TIMEOUT);
  if (timeout_s > 0 && idle_ns > (uint64_t)timeout_s * 1000000000ull)
    return dccl_error(ncclSystemError, "%s #%llu timed out: no progress for %lld s (DCCL_TIMEOUT) waiting for rank %d",
                      dccl_op_name(op->kind), (unsigned long long)op->seq, (long long)timeout_s, w ? w->peer : -1);
  return ncclSuccess;
}

ncclResult_t dccl_queue_check_stalled(struct dccl_coll_comm *comm, uint64_t idle_ns) {
  for (struct dccl_op *op = comm->queue.head; op; op = op->qnext)
    if (!op->finished) DCCLCHECK(dccl_op_check_stalled(op, idle_ns));
  return ncclSuccess;
}
