/* The cost model: picks ring, tree or one-shot per call from constants measured on this machine at creation
 * (all-reduce chooses among the three; the other collectives run on rings). */
#ifndef DCCL_TUNE_H_
#define DCCL_TUNE_H_

#include <stddef.h>

#include "core/comm.h"

/* Measures the per-step latency and the copy bandwidth (collective over comm: every rank ends with the same
 * constants, so every rank picks the same algorithm). Needs the ring connections. */
ncclResult_t dccl_tune_measure(struct dccl_comm *comm);
/* Predicted time in ns of an all-reduce of `bytes` with algo (DCCL_ALGO_RING, _TREE or _ONESHOT). */
double dccl_tune_predict_ns(const struct dccl_comm *comm, int algo, size_t bytes);
/* The algorithm for a collective of kind (enum dccl_op_kind) moving `bytes`: DCCL_ALGO if set, else the model. */
int dccl_tune_algo(const struct dccl_comm *comm, int kind, size_t bytes);

#endif
