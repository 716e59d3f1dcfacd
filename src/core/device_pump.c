/* A communicator's link pump (transports/link_pump.h): device links over sockets have kernels at both ends and a
 * transport that moves the bytes, so a thread of the communicator's progresses them. It spins while the
 * communicator's uncaptured kernels run, a launch wakes it, and once a graph has captured some of its work it
 * looks every DCCL_DEV_NET_POLL_US, which bounds how long a replayed graph's kernels wait for it. A link that
 * breaks fails the communicator, which stops every kernel, and a kernel that gives up fails it too, which closes
 * the links, so the peers' kernels stop as well. */
#include "collectives/device/dev_exec.h"
#include "core/comm.h"
#include "transports/link_pump.h"
#include "util/error.h"
#include "util/params.h"

static int pump_busy(void *arg) {
  struct dccl_comm *comm = arg;
  return dccl_dev_comm_busy(&comm->coll);
}

/* A link broke: the communicator fails with this rank's own kernel's reason if it has one (it may have found a
 * mismatched call just as the peers it stopped closed their links), else with the link's. */
static void pump_failed(void *arg, ncclResult_t res) {
  struct dccl_comm *comm = arg;
  char text[512];
  ncclResult_t err = dccl_dev_comm_error(&comm->coll, text, sizeof(text));
  if (err != ncclSuccess)
    dccl_comm_set_failed(comm, err, text);
  else
    dccl_comm_set_failed(comm, res, dccl_last_error());
}

/* A kernel that gave up (a mismatched call, a peer's abort) marked only this side's FIFOs of its network links: the
 * communicator fails here, as ncclCommGetAsyncError would make it, which closes those links, so the ranks at their
 * other ends fail and stop their kernels too. Two loads of pinned memory, asked before every pass. */
static int pump_gave_up(void *arg) {
  struct dccl_comm *comm = arg;
  if (atomic_load(&comm->abort_flag)) return 1; /* failed already: the links are aborted */
  char text[512];
  ncclResult_t err = dccl_dev_comm_error(&comm->coll, text, sizeof(text));
  if (err == ncclSuccess) return 0;
  dccl_comm_set_failed(comm, err, text);
  return 1;
}

ncclResult_t dccl_comm_pump_link(struct dccl_comm *comm, struct dccl_conn *c) {
  if (!c->device || !c->transport->moves_bytes) return ncclSuccess;
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&comm->conn_lock);
  if (!comm->pump) {
    struct dccl_link_pump_hooks hooks = {
        .busy = pump_busy, .failed = pump_failed, .gave_up = pump_gave_up, .arg = comm};
    res = dccl_link_pump_create(&comm->pump, &hooks, (int)dccl_param_int(DCCL_PARAM_DEV_NET_POLL_US),
                                comm->oversubscribed);
  }
  pthread_mutex_unlock(&comm->conn_lock);
  return res == ncclSuccess ? dccl_link_pump_add(comm->pump, c) : res;
}

void dccl_comm_pump_launched(struct dccl_comm *comm) {
  if (!comm->pump) return;
  if (dccl_dev_comm_captured(&comm->coll)) dccl_link_pump_expect_replays(comm->pump);
  dccl_link_pump_kick(comm->pump);
}

void dccl_comm_pump_stop(struct dccl_comm *comm) {
  int64_t timeout_s = dccl_param_int(DCCL_PARAM_TIMEOUT);
  dccl_link_pump_free(comm->pump, timeout_s > 0 ? (double)timeout_s : 10.0, &comm->abort_flag);
  comm->pump = NULL;
}
