#ifndef DCCL_REDOP_H_
#define DCCL_REDOP_H_

#include "collectives/reduce.h"
#include "core/comm.h"

/* Resolves a user's op for type on comm into a dccl_redop; InvalidArgument for an unknown or mismatched op. */
ncclResult_t dccl_redop_resolve(const struct dccl_comm *comm, ncclRedOp_t op, ncclDataType_t type,
                                struct dccl_redop *out, const char *call);

#endif
