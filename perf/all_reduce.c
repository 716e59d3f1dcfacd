/* all_reduce_perf: every rank ends with the reduction of all inputs. Bus bandwidth 2(n-1)/n: a ring moves each
 * byte through n-1 reduce steps and n-1 copy steps. */
#include "common.h"

static double busbw_factor(int nranks) {
  return 2.0 * (nranks - 1) / nranks;
}

static ncclResult_t run(const void *send, void *recv, const struct perf_call *call, ncclComm_t comm) {
  return ncclAllReduce(send, recv, call->counts.call_count, call->type->nccl, call->nccl_op, comm, NULL);
}

static int run_mpi(const void *send, void *recv, const struct perf_call *call, MPI_Comm comm) {
  return MPI_Allreduce(send, recv, (int)call->counts.call_count, call->type->mpi, perf_mpi_op(call->op), comm);
}

static double expected(const struct perf_values *v, const struct perf_call *call, size_t index) {
  (void)call;
  return perf_reduced_value(v, index);
}

static const struct perf_collective all_reduce = {
    .name = "all_reduce",
    .uses_op = 1,
    .get_counts = perf_counts_whole_row,
    .busbw_factor = busbw_factor,
    .run = run,
    .run_mpi = run_mpi,
    .expected = expected,
};

int main(int argc, char **argv) {
  return perf_main(argc, argv, &all_reduce);
}
