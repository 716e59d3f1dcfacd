/* Internal steps of communicator creation and teardown, shared by init, split and init-all. */
#ifndef DCCL_COMM_INIT_H_
#define DCCL_COMM_INIT_H_

#include "core/comm.h"

struct dccl_comm *dccl_comm_alloc(int rank, int nranks);
/* With comm->bootstrap, rank and nranks set: exchange peer info, build rings, connect, measure, start the
 * monitor. */
ncclResult_t dccl_comm_init_from_bootstrap(struct dccl_comm *comm);
/* The GPU memory and pinned host memory the communicator holds now (dcclCommMemoryUsage). */
void dccl_comm_memory(const struct dccl_comm *comm, size_t *device_bytes, size_t *pinned_host_bytes);
struct dccl_init_req;
/* Records the GPU the communicator is for (-1: none) and retains its primary context. */
void dccl_comm_set_device(struct dccl_comm *comm, int device);
/* A communicator for `req` (device, config, rank), not yet joined to its peers; NULL when out of memory. */
struct dccl_comm *dccl_comm_create(const struct dccl_init_req *req);
/* Joins the job of `id` and completes creation (blocks until all ranks join); a nonblocking communicator's
 * progress thread is started. On failure the communicator is left to be freed. */
ncclResult_t dccl_comm_init_run(struct dccl_comm *comm, const ncclUniqueId *id);
/* Creates the communicator `req` describes (blocks until all its ranks join) and stores it in *req->comm. */
ncclResult_t dccl_comm_init_rank(const struct dccl_init_req *req);
/* The same for a nonblocking communicator: the handle is stored at once and creation finishes on a thread of its
 * own (comm_async.c); returns ncclInProgress. */
ncclResult_t dccl_comm_init_async(const struct dccl_init_req *req);
/* Releases everything; `goodbye` tells the peers this is a clean departure (not a death). Never blocks. */
void dccl_comm_free(struct dccl_comm *comm, int goodbye);

#endif
