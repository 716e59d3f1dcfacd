/* Reduction operators: the built-in ones and those made by ncclRedOpCreatePreMulSum. */
#include "core/redop.h"

#include <string.h>

#include "core/comm.h"
#include "util/cuda_driver.h"
#include "util/error.h"

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  DCCLCHECK(dccl_comm_check(comm, "ncclRedOpCreatePreMulSum"));
  if (!op || !scalar) return dccl_error(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: NULL op or scalar");
  if (dccl_type_size(datatype) == 0)
    return dccl_error(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: unknown datatype %d", (int)datatype);
  if (residence != ncclScalarHostImmediate && residence != ncclScalarDevice)
    return dccl_error(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: unknown residence %d", (int)residence);
  /* A host scalar is read now. A device scalar in GPU memory is read by each operation's kernel as it runs (as
   * NCCL does: the caller may change it between calls, and destroy the operator right after one); a "device"
   * scalar in host memory (no GPU in play) reads like a host one. */
  const void *dev_scalar = residence == ncclScalarDevice && dccl_cuda_is_device_ptr(scalar) ? scalar : NULL;
  for (int i = 0; i < DCCL_MAX_USER_OPS; i++) {
    struct dccl_redop_entry *e = &comm->user_ops[i];
    if (e->in_use) continue;
    e->in_use = 1;
    e->type = datatype;
    memset(e->raw, 0, sizeof(e->raw));
    e->dev_scalar = dev_scalar;
    if (!dev_scalar) memcpy(e->raw, scalar, dccl_type_size(datatype));
    *op = (ncclRedOp_t)(ncclNumOps + i);
    return ncclSuccess;
  }
  return dccl_error(ncclInvalidUsage, "ncclRedOpCreatePreMulSum: all %d user operators are in use (destroy some)",
                    DCCL_MAX_USER_OPS);
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  DCCLCHECK(dccl_comm_check(comm, "ncclRedOpDestroy"));
  int i = (int)op - ncclNumOps;
  if ((int)op < ncclNumOps || i >= DCCL_MAX_USER_OPS || !comm->user_ops[i].in_use)
    return dccl_error(ncclInvalidArgument, "ncclRedOpDestroy: %d is not an operator made by ncclRedOpCreatePreMulSum",
                      (int)op);
  comm->user_ops[i].in_use = 0;
  return ncclSuccess;
}

ncclResult_t dccl_redop_resolve(const struct dccl_comm *comm, ncclRedOp_t op, ncclDataType_t type,
                                struct dccl_redop *out, const char *call) {
  if ((int)op >= 0 && (int)op < ncclNumOps) {
    dccl_redop_builtin(out, op, type, comm->nranks);
    return ncclSuccess;
  }
  int i = (int)op - ncclNumOps;
  if ((int)op < ncclNumOps || i >= DCCL_MAX_USER_OPS || !comm->user_ops[i].in_use)
    return dccl_error(ncclInvalidArgument, "%s: unknown reduction operator %d", call, (int)op);
  if (comm->user_ops[i].type != type)
    return dccl_error(ncclInvalidArgument, "%s: operator %d was made for type %d, used with type %d", call, (int)op,
                      (int)comm->user_ops[i].type, (int)type);
  dccl_redop_builtin(out, ncclSum, type, comm->nranks);
  out->has_pre = 1;
  out->called = DCCL_CALLED_PREMULSUM;
  memcpy(out->pre, comm->user_ops[i].raw, sizeof(out->pre));
  out->pre_dev = comm->user_ops[i].dev_scalar;
  return ncclSuccess;
}
