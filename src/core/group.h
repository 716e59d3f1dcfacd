/* Groups: operations issued between ncclGroupStart and ncclGroupEnd run together at ncclGroupEnd. Per thread,
 * as in NCCL. */
#ifndef DCCL_GROUP_H_
#define DCCL_GROUP_H_

#include "collectives/op.h"
#include "core/comm.h"
#include "core/comm_config.h"

int dccl_group_depth(void);
/* One communicator to create: where to store it, its job's id, its rank, the device it is for (-1: none) and its
 * config, all as the creating call saw them. */
struct dccl_init_req {
  ncclComm_t *comm;
  int nranks, rank, device;
  ncclUniqueId id;
  struct dccl_comm_config config;
};
/* Remembers a communicator creation to run at ncclGroupEnd (several run at once, one thread each). */
ncclResult_t dccl_group_defer_init(const struct dccl_init_req *req);
/* Takes ownership of an op from dccl_op_get: runs it now outside a group, at ncclGroupEnd inside one. Returns
 * ncclInProgress when a nonblocking communicator's progress thread finishes it. */
ncclResult_t dccl_group_enqueue(struct dccl_op *op);
/* Drops the calling thread's operations of `comm` from its open group (ncclCommAbort: they would outlive it). */
void dccl_group_drop_comm(const struct dccl_coll_comm *comm);
/* The open group's last operation (NULL: none), and dropping every one queued after it: a call made of several
 * (all-to-all, gather, scatter) that fails half-way leaves nothing of itself to run. */
struct dccl_op *dccl_group_last(void);
void dccl_group_drop_after(struct dccl_op *mark);
/* Runs a list of ops now, whatever group the thread is in (the library's own operations, at creation). */
ncclResult_t dccl_group_run_now(struct dccl_op *head);

/* comm_api.c: creates n communicators at once, one thread each. */
ncclResult_t dccl_init_many(const struct dccl_init_req *reqs, int n);

#endif
