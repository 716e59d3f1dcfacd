/* Tearing a communicator down, and recording its failure. Nothing here waits for a peer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bootstrap/bootstrap.h"
#include "collectives/device/dev_exec.h"
#include "collectives/op.h"
#include "core/comm.h"
#include "core/comm_init.h"
#include "core/comm_lazy_map.h"
#include "transports/registry.h"
#include "util/clock.h"
#include "util/cuda_driver.h"
#include "util/error.h"

/* Every wait stops, kernels exit, and the peers are told at once, so they stop waiting for this rank instead of
 * discovering it later. */
static void stop_everything(struct dccl_comm *comm) {
  comm->abort_flag = 1;
  dccl_dev_comm_abort(&comm->coll); /* kernels poll their own copy of the flag */
  pthread_mutex_lock(&comm->conn_lock);
  for (struct dccl_conn_entry *e = atomic_load(&comm->conns); e; e = e->next)
    if (e->conn.transport) e->conn.transport->abort(&e->conn);
  pthread_mutex_unlock(&comm->conn_lock);
}

static void note_error_text(struct dccl_comm *comm, const char *text) {
  pthread_mutex_lock(&comm->error_lock);
  if (!comm->error_text[0]) snprintf(comm->error_text, sizeof(comm->error_text), "%s", text ? text : "");
  pthread_mutex_unlock(&comm->error_lock);
}

void dccl_comm_set_failed(struct dccl_comm *comm, ncclResult_t code, const char *text) {
  if (!atomic_load(&comm->revoked)) { /* a revoked communicator's stopped operations fail as they should */
    note_error_text(comm, text);
    int ok = ncclSuccess;
    atomic_compare_exchange_strong(&comm->async_error, &ok, (int)code);
  }
  stop_everything(comm);
}

void dccl_comm_revoke(struct dccl_comm *comm) {
  note_error_text(comm, "the communicator was revoked (ncclCommRevoke, or ncclCommShrink with NCCL_SHRINK_ABORT)");
  atomic_store(&comm->revoked, 1);
  stop_everything(comm);
}

int dccl_comm_quiescent(struct dccl_comm *comm) {
  return atomic_load(&comm->coll.queue.pending) == 0 && atomic_load(&comm->coll.ops_out) == 0 &&
         !dccl_dev_comm_busy(&comm->coll);
}

ncclResult_t dccl_comm_failure_over(struct dccl_comm *comm, ncclResult_t res) {
  int failed = atomic_load(&comm->async_error);
  if (res == ncclSuccess || failed == ncclSuccess) return res;
  return dccl_error((ncclResult_t)failed, "%s", comm->error_text);
}

/* A link failure names the neighbour that broke it; if that neighbour only gave up because another rank died,
 * the monitor reports the dead rank within milliseconds: wait briefly for it, so the error names the real cause.
 * The same for a stall report's verdict, which reaches this rank's monitor thread just after the neighbour that
 * acted on it first has aborted the link. */
#define DCCL_DEATH_REPORT_GRACE_NS 500000000ll
ncclResult_t dccl_comm_explain_failure(struct dccl_comm *comm, ncclResult_t r, const char *what, int peer) {
  char cause[512];
  snprintf(cause, sizeof(cause), "%s", dccl_last_error()); /* dccl_error below overwrites the buffer */
  int64_t deadline = dccl_now_ns() + DCCL_DEATH_REPORT_GRACE_NS;
  while (atomic_load(&comm->dead_rank) < 0 && atomic_load(&comm->async_error) != ncclInvalidUsage &&
         dccl_now_ns() < deadline) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  if (atomic_load(&comm->async_error) == ncclInvalidUsage)
    return dccl_error(ncclInvalidUsage, "%s failed: %s", what, comm->error_text);
  int dead = atomic_load(&comm->dead_rank);
  if (dead >= 0)
    return dccl_error(r, "%s failed: rank %d (host %s, pid %d) died (seen here as: %s)", what, dead,
                      comm->peers[dead].hostname, comm->peers[dead].pid, cause);
  if (peer >= 0) return dccl_error(r, "%s failed while waiting for rank %d: %s", what, peer, cause);
  return dccl_error(r, "%s failed: %s", what, cause);
}

void dccl_comm_free(struct dccl_comm *comm, int goodbye) {
  if (!comm) return;
  if (comm->bootstrap) {
    if (goodbye) dccl_bootstrap_say_goodbye(comm->bootstrap);
    dccl_bootstrap_close(comm->bootstrap); /* stops the monitor thread before anything it reads is freed */
  }
  /* The kernels use the links, which the pump moves, and the pump reads the GPU side's state: the kernels end
   * first, then the pump (what they sent leaves first), then the GPU side, then the links. */
  dccl_dev_comm_wait(&comm->coll);
  dccl_comm_pump_stop(comm);
  dccl_dev_comm_free(&comm->coll);
  dccl_comm_free_windows(comm);
  dccl_lazy_map_free(comm);
  struct dccl_conn_entry *e = atomic_load(&comm->conns);
  while (e) {
    struct dccl_conn_entry *next = e->next;
    if (e->conn.transport) e->conn.transport->close(&e->conn);
    free(e);
    e = next;
  }
  for (int i = 0; i < dccl_transport_count(); i++) {
    dccl_transport_at(i)->comm_free(comm->tctx.transport_state[i], atomic_load(&comm->abort_flag));
    comm->tctx.transport_state[i] = NULL;
  }
  dccl_plan_cache_free(&comm->coll);
  dccl_op_pool_free(&comm->coll);
  pthread_mutex_destroy(&comm->coll.queue.lock);
  pthread_cond_destroy(&comm->coll.queue.posted);
  for (int c = 0; c < DCCL_MAX_CHANNELS; c++) free(comm->coll.rings[c].order);
  free(comm->peers);
  free(comm->p2p_send_seq);
  free(comm->p2p_recv_seq);
  pthread_mutex_destroy(&comm->conn_lock);
  pthread_mutex_destroy(&comm->error_lock);
  pthread_mutex_destroy(&comm->stall_lock);
  dccl_comm_free_registrations(comm);
  pthread_mutex_destroy(&comm->reg_lock);
  if (comm->cu_ctx) dccl_cuda_primary_ctx_release(comm->cuda_device);
  comm->magic = 0;
  free(comm);
}
