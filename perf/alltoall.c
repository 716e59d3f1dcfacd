/* alltoall_perf: rank r sends block p of its input to rank p and receives rank p's block r into its block p.
 * The size column is each rank's whole buffer (nranks blocks); bus bandwidth (n-1)/n of it: each rank sends
 * and receives all blocks but its own. In place, one buffer is both sent from and received into, which NCCL
 * does not order: timed, never checked (nccl-tests does not check it either). */
#include "common.h"

static void get_counts(size_t bytes, const struct perf_call *call, struct perf_counts *c) {
  size_t block = bytes / call->type->size / (size_t)call->nranks;
  size_t total = block * (size_t)call->nranks;
  *c = (struct perf_counts){block, total, total, 0, 0, total * call->type->size};
}

static ncclResult_t run(const void *send, void *recv, const struct perf_call *call, ncclComm_t comm) {
  return ncclAlltoAll(send, recv, call->counts.call_count, call->type->nccl, comm, NULL);
}

static int run_mpi(const void *send, void *recv, const struct perf_call *call, MPI_Comm comm) {
  int bytes = (int)(call->counts.call_count * call->type->size);
  return MPI_Alltoall(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, comm);
}

/* Block p of the output is block `rank` of rank p's input. */
static double expected(const struct perf_values *v, const struct perf_call *call, size_t index) {
  size_t block = call->counts.call_count;
  return perf_input_value(v, (int)(index / block), (size_t)call->rank * block + index % block);
}

static const struct perf_collective alltoall = {
    .name = "alltoall",
    .get_counts = get_counts,
    .busbw_factor = perf_busbw_all_but_own,
    .run = run,
    .run_mpi = run_mpi,
    .mpi_moves_bytes = 1,
    .in_place_unchecked = 1,
    .expected = expected,
};

int main(int argc, char **argv) {
  return perf_main(argc, argv, &alltoall);
}
