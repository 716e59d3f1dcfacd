/* The op pool: a communicator keeps the ops it has used on a free list, so after the first calls (warm-up) the
 * per-call path allocates nothing. An op is its header and its channels' schedules and connections; the pool
 * holds as many as were ever in flight at once. A nonblocking communicator's progress thread returns ops while
 * the caller takes them, so there the list is guarded by the queue's lock. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/op.h"

struct dccl_op_pool {
  struct dccl_op *free; /* linked by next */
};

static void lock(struct dccl_coll_comm *comm) {
  if (comm->queue.progress_thread) pthread_mutex_lock(&comm->queue.lock);
}
static void unlock(struct dccl_coll_comm *comm) {
  if (comm->queue.progress_thread) pthread_mutex_unlock(&comm->queue.lock);
}

/* An op holds only the channels its communicator's plans may use (dccl_op_max_channels: 2 for a host
 * communicator by default, up to DCCL_MAX_CHANNELS where it has a GPU). A full-size op for every host call was
 * measured to cost the 2-rank host all-reduce ~5% at 8 B and up to 20% at 1 MiB (perf/ab_inproc), through no
 * instruction it runs. Ops are taken only once creation has settled comm->dev, so a communicator's ops are all
 * one size. */
static size_t op_bytes(const struct dccl_coll_comm *comm) {
  return offsetof(struct dccl_op, ch) + (size_t)dccl_op_max_channels(comm) * sizeof(((struct dccl_op *)NULL)->ch[0]);
}

/* Counts the ops out of the pool. A call holds its ops until it returns, so none out means no thread is inside a
 * call on this communicator: a watchdog that revoked it may then destroy it (dccl_comm_quiescent). Without a
 * progress thread only the calling thread takes and returns ops, so a plain update does (the release orders the
 * call's last touches of the communicator before the count a destroying thread reads). */
static void count_out(struct dccl_coll_comm *comm, int delta) {
  if (comm->queue.progress_thread)
    atomic_fetch_add_explicit(&comm->ops_out, delta, memory_order_acq_rel);
  else
    atomic_store_explicit(&comm->ops_out, atomic_load_explicit(&comm->ops_out, memory_order_relaxed) + delta,
                          memory_order_release);
}

struct dccl_op *dccl_op_get(struct dccl_coll_comm *comm) {
  struct dccl_op *op = NULL;
  lock(comm);
  if (!comm->pool) comm->pool = calloc(1, sizeof(*comm->pool));
  if (comm->pool && comm->pool->free) {
    op = comm->pool->free;
    comm->pool->free = op->next;
  }
  unlock(comm);
  if (!op && !(op = malloc(op_bytes(comm)))) return NULL;
  count_out(comm, 1);
  memset(op, 0, offsetof(struct dccl_op, ch));
  op->comm = comm;
  op->send_win = op->recv_win = -1;
  return op;
}

void dccl_op_put(struct dccl_op *op) {
  struct dccl_coll_comm *comm = op->comm;
  lock(comm);
  if (comm->pool) {
    op->next = comm->pool->free;
    comm->pool->free = op;
    op = NULL;
  }
  unlock(comm);
  free(op); /* no pool: it could not be made */
  count_out(comm, -1); /* the last touch of the communicator */
}

void dccl_op_pool_free(struct dccl_coll_comm *comm) {
  if (!comm->pool) return;
  struct dccl_op *op = comm->pool->free;
  while (op) {
    struct dccl_op *next = op->next;
    free(op);
    op = next;
  }
  free(comm->pool);
  comm->pool = NULL;
}
