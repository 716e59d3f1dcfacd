/* Post, progress, wait. A call plans an op, posts it to its communicator's queue, and someone progresses the
 * queue until the op is done: the calling thread for host buffers of a blocking communicator (it waits in
 * dccl_ops_wait), the progress thread for a nonblocking one. Ops on the same links run in issue order; the rest
 * progress together, so a group's sends and receives may be posted in any order. */
#include "collectives/op.h"
#include "util/error.h"
#include "util/wait.h"

static int p2p(const struct dccl_op *op) {
  return op->kind == DCCL_OP_SEND || op->kind == DCCL_OP_RECV;
}

/* Whether b, posted earlier, uses links a also uses: a comm's collectives share the channel lanes, and send/recv
 * operations of one (peer, direction) share a point-to-point lane. */
static int shares_links(const struct dccl_op *a, const struct dccl_op *b) {
  if (!p2p(a) && !p2p(b)) return 1;
  return p2p(a) && a->kind == b->kind && a->peer == b->peer;
}

static void append(struct dccl_op_queue *q, struct dccl_op *op) {
  op->after = NULL;
  for (struct dccl_op *b = q->head; b; b = b->qnext)
    if (shares_links(op, b)) op->after = b; /* the newest such op */
  op->qnext = NULL;
  if (q->tail)
    q->tail->qnext = op;
  else
    q->head = op;
  q->tail = op;
}

/* The count of posted, unretired ops. Without a progress thread only the calling thread posts and retires (a
 * communicator is not used by two threads at once), so a plain update does: a locked one costs a per-call
 * fraction the host's 8-byte all-reduce can see. */
static void count_pending(struct dccl_op_queue *q, int delta) {
  if (q->progress_thread)
    atomic_fetch_add_explicit(&q->pending, delta, memory_order_release);
  else
    atomic_store_explicit(&q->pending, atomic_load_explicit(&q->pending, memory_order_relaxed) + delta,
                          memory_order_relaxed);
}

void dccl_op_post(struct dccl_op *op) {
  struct dccl_op_queue *q = &op->comm->queue;
  count_pending(q, 1);
  if (!q->progress_thread) {
    append(q, op);
    return;
  }
  op->qnext = NULL;
  pthread_mutex_lock(&q->lock);
  if (q->incoming_tail)
    q->incoming_tail->qnext = op;
  else
    q->incoming = op;
  q->incoming_tail = op;
  pthread_cond_signal(&q->posted);
  pthread_mutex_unlock(&q->lock);
}

/* The progress thread takes what callers posted since its last round. */
static void take_incoming(struct dccl_op_queue *q) {
  if (!q->progress_thread) return;
  pthread_mutex_lock(&q->lock);
  struct dccl_op *op = q->incoming;
  q->incoming = q->incoming_tail = NULL;
  pthread_mutex_unlock(&q->lock);
  while (op) {
    struct dccl_op *next = op->qnext;
    append(q, op);
    op = next;
  }
}

/* Unlinks a finished op (prev: its predecessor in the queue, or NULL), releases its successors, and hands it to
 * its waiter or, if it has none, back to the pool. */
static void retire(struct dccl_op_queue *q, struct dccl_op *prev, struct dccl_op *op) {
  if (prev)
    prev->qnext = op->qnext;
  else
    q->head = op->qnext;
  if (q->tail == op) q->tail = prev;
  for (struct dccl_op *b = op->qnext; b; b = b->qnext)
    if (b->after == op) b->after = NULL;
  count_pending(q, -1);
  if (op->detached)
    dccl_op_put(op);
  else
    atomic_store_explicit(&op->done, 1, memory_order_release);
}

ncclResult_t dccl_queue_progress(struct dccl_coll_comm *comm, int *progressed) {
  struct dccl_op_queue *q = &comm->queue;
  take_incoming(q);
  struct dccl_op *prev = NULL, *op = q->head;
  while (op) {
    struct dccl_op *next = op->qnext;
    if (!op->after) {
      ncclResult_t r = dccl_op_progress(op, progressed);
      if (r == ncclSuccess && !op->finished && atomic_load_explicit(comm->abort_flag, memory_order_relaxed))
        r = dccl_queue_check_stalled(comm, 0);
      if (r != ncclSuccess) return r;
      if (op->finished) {
        retire(q, prev, op);
        op = next;
        continue;
      }
    }
    prev = op;
    op = next;
  }
  return ncclSuccess;
}

void dccl_queue_abandon(struct dccl_coll_comm *comm) {
  struct dccl_op_queue *q = &comm->queue;
  take_incoming(q);
  while (q->head) retire(q, NULL, q->head);
}

/* Calls fn once per distinct communicator among the list's ops whose queue this thread progresses. Groups are
 * small (a few ops per communicator): a quadratic scan costs less than any bookkeeping. */
#define FOR_EACH_OWN_QUEUE(list, c, body)                                      \
  for (struct dccl_op *o_ = (list); o_; o_ = o_->next) {                       \
    struct dccl_coll_comm *c = o_->comm;                                       \
    int seen_ = c->queue.progress_thread;                                      \
    for (struct dccl_op *p_ = (list); p_ != o_ && !seen_; p_ = p_->next) seen_ = p_->comm == c; \
    if (!seen_) body                                                           \
  }

static ncclResult_t fail_all(struct dccl_op *list, ncclResult_t res) {
  ncclResult_t out = res;
  FOR_EACH_OWN_QUEUE(list, c, {
    if (atomic_load_explicit(&c->queue.pending, memory_order_relaxed) > 0) out = c->op_failed(c, NULL, res);
    dccl_queue_abandon(c);
  })
  return out;
}

static int all_done(struct dccl_op *list) {
  for (struct dccl_op *op = list; op; op = op->next)
    if (!atomic_load_explicit(&op->done, memory_order_acquire)) return 0;
  return 1;
}

ncclResult_t dccl_ops_wait(struct dccl_op *list) {
  struct dccl_waiter w;
  dccl_waiter_init(&w, list && list->comm->oversubscribed);
  ncclResult_t res = ncclSuccess;
  while (!all_done(list)) {
    int progressed = 0;
    FOR_EACH_OWN_QUEUE(list, c, {
      if (res == ncclSuccess) res = dccl_queue_progress(c, &progressed);
    })
    if (res == ncclSuccess && !progressed && dccl_waiter_idle(&w)) {
      uint64_t idle = (uint64_t)dccl_now_ns() - w.idle_since_ns;
      FOR_EACH_OWN_QUEUE(list, c, {
        if (res == ncclSuccess) res = dccl_queue_check_stalled(c, idle);
      })
    }
    if (res != ncclSuccess) return fail_all(list, res);
    if (progressed) dccl_waiter_reset(&w);
  }
  return ncclSuccess;
}

/* The host's smallest calls, the common case of a blocking communicator: one op, nothing posted before it, and
 * this thread the progressor. Nothing can be ordered before or beside it, so it runs here to completion without
 * entering the queue (the queue's bookkeeping is a fifth of an 8-byte all-reduce's time on a fast host). The
 * waiting, stall checks and failure are dccl_ops_wait's. */
int dccl_op_runs_alone(const struct dccl_op *op) {
  const struct dccl_op_queue *q = &op->comm->queue;
  return !op->next && !q->progress_thread && !q->head;
}

ncclResult_t dccl_op_run_alone(struct dccl_op *op) {
  struct dccl_coll_comm *c = op->comm;
  struct dccl_waiter w;
  dccl_waiter_init(&w, c->oversubscribed);
  for (;;) {
    int progressed = 0;
    ncclResult_t res = dccl_op_progress(op, &progressed);
    if (res == ncclSuccess && op->finished) return ncclSuccess;
    if (res == ncclSuccess && atomic_load_explicit(c->abort_flag, memory_order_relaxed))
      res = dccl_op_check_stalled(op, 0);
    if (res == ncclSuccess && !progressed && dccl_waiter_idle(&w))
      res = dccl_op_check_stalled(op, (uint64_t)dccl_now_ns() - w.idle_since_ns);
    if (res != ncclSuccess) return c->op_failed(c, op, res);
    if (progressed) dccl_waiter_reset(&w);
  }
}
