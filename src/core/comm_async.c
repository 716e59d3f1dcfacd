/* Nonblocking communicators: creation that finishes in the background. The handle exists (and is registered, so
 * ncclCommGetAsyncError and ncclCommAbort accept it) from the call on; a detached thread does the joining, which
 * waits for peers, and publishes the outcome in init_state last. ncclCommGetAsyncError reports ncclInProgress
 * until then; ncclCommAbort stops it through the abort flag, which every bootstrap wait polls. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/comm.h"
#include "core/comm_async.h"
#include "core/comm_init.h"
#include "core/comm_registry.h"
#include "core/group.h"
#include "util/cuda_driver.h"
#include "util/error.h"

ncclResult_t dccl_run_detached(void *(*fn)(void *), void *arg) {
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int err = pthread_create(&thread, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  if (err) return dccl_error(ncclSystemError, "cannot start a thread for a nonblocking call: error %d", err);
  return ncclSuccess;
}

void dccl_comm_finish_init(struct dccl_comm *comm, ncclResult_t res) {
  if (res != ncclSuccess) dccl_comm_set_failed(comm, res, dccl_last_error());
  /* The last touch of comm by the creating thread: a waiting ncclCommDestroy may free it right after. */
  atomic_store(&comm->init_state, res == ncclSuccess ? DCCL_INIT_READY : DCCL_INIT_FAILED);
}

void dccl_comm_wait_background(struct dccl_comm *comm) {
  while (atomic_load(&comm->init_state) == DCCL_INIT_PENDING || atomic_load(&comm->splits_running) > 0) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

struct init_task {
  struct dccl_comm *comm;
  ncclUniqueId id;
};

static void *init_main(void *arg) {
  struct init_task t = *(struct init_task *)arg;
  free(arg);
  dccl_cuda_set_current(t.comm->cu_ctx); /* a DCCL thread: the device's context */
  dccl_comm_finish_init(t.comm, dccl_comm_init_run(t.comm, &t.id));
  return NULL;
}

ncclResult_t dccl_comm_init_async(const struct dccl_init_req *req) {
  struct init_task *t = malloc(sizeof(*t));
  struct dccl_comm *comm = dccl_comm_create(req);
  if (!t || !comm) {
    free(t);
    dccl_comm_free(comm, 0);
    return dccl_error(ncclSystemError, "out of memory creating a communicator");
  }
  atomic_store(&comm->init_state, DCCL_INIT_PENDING);
  ncclResult_t res = dccl_registry_add(comm);
  if (res == ncclSuccess) {
    *t = (struct init_task){comm, req->id};
    res = dccl_run_detached(init_main, t);
    if (res != ncclSuccess) dccl_registry_remove(comm);
  }
  if (res != ncclSuccess) {
    free(t);
    dccl_comm_free(comm, 0);
    return res;
  }
  *req->comm = comm;
  return ncclInProgress;
}
