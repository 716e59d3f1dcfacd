#ifndef DCCL_COMM_REGISTRY_H_
#define DCCL_COMM_REGISTRY_H_

#include "core/comm.h"

ncclResult_t dccl_registry_add(struct dccl_comm *comm);
void dccl_registry_remove(struct dccl_comm *comm);
/* 1 if comm is a live communicator (no error recorded either way). */
int dccl_comm_is_live(const struct dccl_comm *comm);

#endif
