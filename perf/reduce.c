/* reduce_perf: the root ends with the reduction of all inputs; other ranks' outputs are undefined. Bus
 * bandwidth equals algorithm bandwidth. */
#include "common.h"

static ncclResult_t run(const void *send, void *recv, const struct perf_call *call, ncclComm_t comm) {
  return ncclReduce(send, recv, call->counts.call_count, call->type->nccl, call->nccl_op, call->root, comm, NULL);
}

static int run_mpi(const void *send, void *recv, const struct perf_call *call, MPI_Comm comm) {
  return MPI_Reduce(send, recv, (int)call->counts.call_count, call->type->mpi, perf_mpi_op(call->op), call->root, comm);
}

static int rank_has_result(const struct perf_call *call) {
  return call->rank == call->root;
}

static double expected(const struct perf_values *v, const struct perf_call *call, size_t index) {
  (void)call;
  return perf_reduced_value(v, index);
}

static const struct perf_collective reduce = {
    .name = "reduce",
    .uses_op = 1,
    .uses_root = 1,
    .get_counts = perf_counts_whole_row,
    .busbw_factor = perf_busbw_whole_row,
    .run = run,
    .run_mpi = run_mpi,
    .rank_has_result = rank_has_result,
    .expected = expected,
};

int main(int argc, char **argv) {
  return perf_main(argc, argv, &reduce);
}
