/* all_gather_perf: every rank ends with all ranks' inputs, in rank order. The size column is the gathered
 * (total) size; bus bandwidth (n-1)/n of it: each rank receives the n-1 blocks it did not have. */
#include "common.h"

static void get_counts(size_t bytes, const struct perf_call *call, struct perf_counts *c) {
  const size_t type_size = call->type->size;
  size_t block = bytes / type_size / (size_t)call->nranks;
  size_t total = block * (size_t)call->nranks;
  /* In place, each rank's input is already its own block of the output. */
  *c = (struct perf_counts){block, block, total, (size_t)call->rank * block, 0, total * type_size};
}

static ncclResult_t run(const void *send, void *recv, const struct perf_call *call, ncclComm_t comm) {
  return ncclAllGather(send, recv, call->counts.call_count, call->type->nccl, comm, NULL);
}

static int run_mpi(const void *send, void *recv, const struct perf_call *call, MPI_Comm comm) {
  int bytes = (int)(call->counts.call_count * call->type->size);
  return MPI_Allgather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, comm);
}

static double expected(const struct perf_values *v, const struct perf_call *call, size_t index) {
  return perf_gathered_value(v, call->counts.call_count, index);
}

static const struct perf_collective all_gather = {
    .name = "all_gather",
    .get_counts = get_counts,
    .busbw_factor = perf_busbw_all_but_own,
    .run = run,
    .run_mpi = run_mpi,
    .mpi_moves_bytes = 1,
    .expected = expected,
};

int main(int argc, char **argv) {
  return perf_main(argc, argv, &all_gather);
}
