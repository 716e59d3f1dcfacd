/* scatter_perf: rank r ends with block r of the root's input; the other ranks send nothing. The size column is
 * the scattered (root's) size; bus bandwidth (n-1)/n of it: the root sends the n-1 blocks it does not keep. */
#include "common.h"

static void get_counts(size_t bytes, const struct perf_call *call, struct perf_counts *c) {
  const size_t type_size = call->type->size;
  size_t block = bytes / type_size / (size_t)call->nranks;
  size_t total = block * (size_t)call->nranks;
  if (call->rank == call->root) /* in place, the root's output is its own block of the input */
    *c = (struct perf_counts){block, total, block, 0, (size_t)call->root * block, total * type_size};
  else /* no send buffer: only the root's is read */
    *c = (struct perf_counts){block, 0, block, 0, 0, total * type_size};
}

static ncclResult_t run(const void *send, void *recv, const struct perf_call *call, ncclComm_t comm) {
  return ncclScatter(send, recv, call->counts.call_count, call->type->nccl, call->root, comm, NULL);
}

static int run_mpi(const void *send, void *recv, const struct perf_call *call, MPI_Comm comm) {
  int bytes = (int)(call->counts.call_count * call->type->size);
  return MPI_Scatter(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, call->root, comm);
}

static double expected(const struct perf_values *v, const struct perf_call *call, size_t index) {
  return perf_input_value(v, call->root, (size_t)call->rank * call->counts.call_count + index);
}

static const struct perf_collective scatter = {
    .name = "scatter",
    .uses_root = 1,
    .get_counts = get_counts,
    .busbw_factor = perf_busbw_all_but_own,
    .run = run,
    .run_mpi = run_mpi,
    .mpi_moves_bytes = 1,
    .expected = expected,
};

int main(int argc, char **argv) {
  return perf_main(argc, argv, &scatter);
}
