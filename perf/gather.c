/* gather_perf: the root ends with every rank's block, in rank order; the other ranks receive nothing. The size
 * column is the gathered (root's) size; bus bandwidth (n-1)/n of it: the root receives the n-1 blocks it did
 * not have. */
#include "common.h"

static void get_counts(size_t bytes, const struct perf_call *call, struct perf_counts *c) {
  const size_t type_size = call->type->size;
  size_t block = bytes / type_size / (size_t)call->nranks;
  size_t total = block * (size_t)call->nranks;
  if (call->rank == call->root) /* in place, the root's input is already its own block of the output */
    *c = (struct perf_counts){block, block, total, (size_t)call->root * block, 0, total * type_size};
  else /* no receive buffer: a write into it hits the guards */
    *c = (struct perf_counts){block, block, 0, 0, 0, total * type_size};
}

static ncclResult_t run(const void *send, void *recv, const struct perf_call *call, ncclComm_t comm) {
  return ncclGather(send, recv, call->counts.call_count, call->type->nccl, call->root, comm, NULL);
}

static int run_mpi(const void *send, void *recv, const struct perf_call *call, MPI_Comm comm) {
  int bytes = (int)(call->counts.call_count * call->type->size);
  return MPI_Gather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, call->root, comm);
}

static int rank_has_result(const struct perf_call *call) {
  return call->rank == call->root;
}

static double expected(const struct perf_values *v, const struct perf_call *call, size_t index) {
  return perf_gathered_value(v, call->counts.call_count, index);
}

static const struct perf_collective gather = {
    .name = "gather",
    .uses_root = 1,
    .get_counts = get_counts,
    .busbw_factor = perf_busbw_all_but_own,
    .run = run,
    .run_mpi = run_mpi,
    .mpi_moves_bytes = 1,
    .rank_has_result = rank_has_result,
    .expected = expected,
};

int main(int argc, char **argv) {
  return perf_main(argc, argv, &gather);
}
