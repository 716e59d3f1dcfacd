/* The views a communicator gives its lower layers (transports/transport.h, collectives/coll_comm.h): copies of its
 * facts, pointers to its failure state, and its services behind function pointers. */
#include "collectives/op.h"
#include "core/comm.h"
#include "tune/tune.h"

static int is_registered(const struct dccl_transport_ctx *t, const void *ptr, uint64_t bytes) {
  return dccl_comm_is_registered(dccl_comm_of_tctx(t), ptr, bytes);
}

static struct dccl_conn *find_conn(struct dccl_coll_comm *c, int peer, int is_send, int lane) {
  return dccl_comm_find_conn(dccl_comm_of_coll(c), peer, is_send, lane);
}

static ncclResult_t op_failed(struct dccl_coll_comm *c, const struct dccl_op *alone, ncclResult_t res) {
  return dccl_op_failed(dccl_comm_of_coll(c), alone, res);
}

static ncclResult_t drain_error(struct dccl_coll_comm *c, const struct dccl_op *op) {
  return dccl_drain_error(dccl_comm_of_coll(c), op->kind, op->seq);
}

static ncclResult_t explain_failure(struct dccl_coll_comm *c, ncclResult_t r, const char *what, int peer) {
  return dccl_comm_explain_failure(dccl_comm_of_coll(c), r, what, peer);
}

static ncclResult_t mismatch(struct dccl_coll_comm *c, const struct dccl_slot_header *theirs, int peer,
                             const struct dccl_slot_header *mine) {
  return dccl_stall_mismatch(dccl_comm_of_coll(c), theirs, peer, mine);
}

static void waiting(struct dccl_coll_comm *c, const struct dccl_slot_header *call, int peer, uint64_t idle_ns) {
  dccl_stall_note(dccl_comm_of_coll(c), call, peer, idle_ns);
}

void dccl_comm_fill_views(struct dccl_comm *comm) {
  struct dccl_transport_ctx *t = &comm->tctx;
  t->rank = comm->rank;
  t->nranks = comm->nranks;
  t->peers = comm->peers;
  t->oversubscribed = comm->oversubscribed;
  t->abort_flag = &comm->abort_flag;
  t->is_registered = is_registered;
  t->cu_ctx = comm->cu_ctx;
  t->cuda_ordinal = comm->cuda_device;

  struct dccl_coll_comm *c = &comm->coll;
  c->rank = comm->rank;
  c->nranks = comm->nranks;
  c->oversubscribed = comm->oversubscribed;
  c->nhosts = comm->nhosts;
  c->ranks_per_host = comm->ranks_per_host;
  c->peers = comm->peers;
  c->abort_flag = &comm->abort_flag;
  c->dead_rank = &comm->dead_rank;
  c->error_text = comm->error_text;
  c->pick_algo = dccl_tune_algo;
  c->pick_proto = dccl_tune_proto;
  c->find_conn = find_conn;
  c->op_failed = op_failed;
  c->drain_pending = &comm->drain_pending;
  c->drain_error = drain_error;
  c->explain_failure = explain_failure;
  c->waiting = waiting;
  c->mismatch = mismatch;
  c->failure_code = &comm->async_error;
}
