/* reduce_scatter_perf: rank r ends with block r of the reduction of all inputs. The size column is the input
 * (total) size; bus bandwidth (n-1)/n of it: each rank sends n-1 partial blocks. */
#include "common.h"

static void get_counts(size_t bytes, const struct perf_call *call, struct perf_counts *c) {
  const size_t type_size = call->type->size;
  size_t block = bytes / type_size / (size_t)call->nranks;
  size_t total = block * (size_t)call->nranks;
  /* In place, each rank's output is its own block of the input. */
  *c = (struct perf_counts){block, total, block, 0, (size_t)call->rank * block, total * type_size};
}

static ncclResult_t run(const void *send, void *recv, const struct perf_call *call, ncclComm_t comm) {
  return ncclReduceScatter(send, recv, call->counts.call_count, call->type->nccl, call->nccl_op, comm, NULL);
}

static int run_mpi(const void *send, void *recv, const struct perf_call *call, MPI_Comm comm) {
  return MPI_Reduce_scatter_block(send, recv, (int)call->counts.call_count, call->type->mpi, perf_mpi_op(call->op),
                                  comm);
}

static double expected(const struct perf_values *v, const struct perf_call *call, size_t index) {
  return perf_reduced_value(v, (size_t)call->rank * call->counts.call_count + index);
}

static const struct perf_collective reduce_scatter = {
    .name = "reduce_scatter",
    .uses_op = 1,
    .get_counts = get_counts,
    .busbw_factor = perf_busbw_all_but_own,
    .run = run,
    .run_mpi = run_mpi,
    .expected = expected,
};

int main(int argc, char **argv) {
  return perf_main(argc, argv, &reduce_scatter);
}
