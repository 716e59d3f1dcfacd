/* Internal steps of communicator creation and teardown, shared by init, split and init-all. */
#ifndef DCCL_COMM_INIT_H_
#define DCCL_COMM_INIT_H_

#include "core/comm.h"

struct dccl_comm *dccl_comm_alloc(int rank, int nranks);
/* With comm->bootstrap, rank and nranks set: exchange peer info, build rings, connect, measure, start the
 * monitor. */
ncclResult_t dccl_comm_init_from_bootstrap(struct dccl_comm *comm);
struct dccl_init_req;
/* Creates the communicator `req` describes (blocks until all its ranks join) and stores it in *req->comm. */
ncclResult_t dccl_comm_init_rank(const struct dccl_init_req *req);
/* Releases everything; `goodbye` tells the peers this is a clean departure (not a death). Never blocks. */
void dccl_comm_free(struct dccl_comm *comm, int goodbye);

#endif
