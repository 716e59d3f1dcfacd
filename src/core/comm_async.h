/* Creation that finishes in the background, for nonblocking communicators (comm_async.c). */
#ifndef DCCL_COMM_ASYNC_H_
#define DCCL_COMM_ASYNC_H_

#include "core/comm.h"

/* Runs fn(arg) on a thread nobody joins. */
ncclResult_t dccl_run_detached(void *(*fn)(void *), void *arg);
/* Publishes the outcome of a background creation (a failure is recorded on the communicator first). */
void dccl_comm_finish_init(struct dccl_comm *comm, ncclResult_t res);
/* Waits until the communicator's background creation and the splits it runs are over (destroy, abort). */
void dccl_comm_wait_background(struct dccl_comm *comm);

#endif
