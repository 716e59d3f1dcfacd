/* The progress thread of a nonblocking communicator: callers post host-buffer operations and return
 * ncclInProgress; this thread runs them (dccl_queue_progress) and is the only one that touches the queue's posted
 * list. It sleeps on a condition variable while nothing is posted, and waits like every other DCCL wait (spin,
 * yield, sleep with a growing interval) while operations wait for peers. A failure is recorded on the
 * communicator, where ncclCommGetAsyncError finds it. */
#include <stdio.h>

#include "collectives/op.h"
#include "core/comm.h"
#include "util/cuda_driver.h"
#include "util/error.h"
#include "util/log.h"
#include "util/wait.h"

/* Sleeps until something is posted or the thread is told to stop; returns 0 when it should exit. */
static int wait_for_work(struct dccl_op_queue *q) {
  pthread_mutex_lock(&q->lock);
  while (!q->stop && !q->incoming && !q->head) pthread_cond_wait(&q->posted, &q->lock);
  int run = q->incoming || q->head;
  pthread_mutex_unlock(&q->lock);
  return run;
}

static void fail(struct dccl_comm *comm, ncclResult_t res) {
  (void)dccl_op_failed(comm, NULL, res); /* a nonblocking communicator is not kept: the failure is recorded */
  dccl_queue_abandon(&comm->coll);
}

static void *progress_main(void *arg) {
  struct dccl_comm *comm = arg;
  struct dccl_op_queue *q = &comm->coll.queue;
  dccl_log_set_rank(comm->rank);
  dccl_cuda_set_current(comm->cu_ctx); /* a DCCL thread: the device's context */
  struct dccl_waiter w;
  dccl_waiter_init(&w, comm->oversubscribed);
  while (wait_for_work(q)) {
    int progressed = 0;
    ncclResult_t res = dccl_queue_progress(&comm->coll, &progressed);
    if (res == ncclSuccess && !progressed && dccl_waiter_idle(&w))
      res = dccl_queue_check_stalled(&comm->coll, (uint64_t)dccl_now_ns() - w.idle_since_ns);
    if (res != ncclSuccess) fail(comm, res);
    if (progressed || res != ncclSuccess) dccl_waiter_reset(&w);
  }
  return NULL;
}

ncclResult_t dccl_progress_thread_start(struct dccl_comm *comm) {
  struct dccl_op_queue *q = &comm->coll.queue;
  q->progress_thread = 1;
  int err = pthread_create(&comm->progress_thread, NULL, progress_main, comm);
  if (err) {
    q->progress_thread = 0;
    return dccl_error(ncclSystemError, "cannot start the progress thread of a nonblocking communicator: error %d",
                      err);
  }
  comm->progress_started = 1;
  DCCL_INFO(DCCL_INIT, "nonblocking communicator: host-buffer operations run on a progress thread");
  return ncclSuccess;
}

void dccl_progress_thread_stop(struct dccl_comm *comm) {
  if (!comm->progress_started) return;
  struct dccl_op_queue *q = &comm->coll.queue;
  pthread_mutex_lock(&q->lock);
  q->stop = 1;
  pthread_cond_signal(&q->posted);
  pthread_mutex_unlock(&q->lock);
  pthread_join(comm->progress_thread, NULL);
  comm->progress_started = 0;
}
