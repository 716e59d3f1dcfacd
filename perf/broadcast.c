/* broadcast_perf: the root's buffer reaches every rank. Bus bandwidth equals algorithm bandwidth: each rank
 * receives the whole buffer once. */
#include "common.h"

static ncclResult_t run(const void *send, void *recv, const struct perf_call *call, ncclComm_t comm) {
  return ncclBroadcast(send, recv, call->counts.call_count, call->type->nccl, call->root, comm, NULL);
}

/* MPI_Bcast works in place: the root sends from its input, the others receive into their output. */
static int run_mpi(const void *send, void *recv, const struct perf_call *call, MPI_Comm comm) {
  void *buf = call->rank == call->root ? (void *)send : recv;
  return MPI_Bcast(buf, (int)(call->counts.call_count * call->type->size), MPI_BYTE, call->root, comm);
}

static double expected(const struct perf_values *v, const struct perf_call *call, size_t index) {
  return perf_input_value(v, call->root, index);
}

static const struct perf_collective broadcast = {
    .name = "broadcast",
    .uses_root = 1,
    .get_counts = perf_counts_whole_row,
    .busbw_factor = perf_busbw_whole_row,
    .run = run,
    .run_mpi = run_mpi,
    .mpi_moves_bytes = 1,
    .expected = expected,
};

int main(int argc, char **argv) {
  return perf_main(argc, argv, &broadcast);
}
