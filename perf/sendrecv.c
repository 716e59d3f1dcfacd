/* sendrecv_perf: a ring shift. Each rank sends its buffer to rank+1 and receives rank-1's, both in one group.
 * Bus bandwidth equals algorithm bandwidth. In place, one buffer is both sent and received into: timed only. */
#include "common.h"

static int next_rank(const struct perf_call *call) {
  return (call->rank + 1) % call->nranks;
}
static int prev_rank(const struct perf_call *call) {
  return (call->rank - 1 + call->nranks) % call->nranks;
}

static ncclResult_t run(const void *send, void *recv, const struct perf_call *call, ncclComm_t comm) {
  ncclResult_t res = ncclGroupStart();
  if (res != ncclSuccess) return res;
  ncclResult_t send_res = ncclSend(send, call->counts.call_count, call->type->nccl, next_rank(call), comm, NULL);
  ncclResult_t recv_res = ncclRecv(recv, call->counts.call_count, call->type->nccl, prev_rank(call), comm, NULL);
  res = ncclGroupEnd(); /* always close the group, even after a failed call inside it */
  if (send_res != ncclSuccess) return send_res;
  if (recv_res != ncclSuccess) return recv_res;
  return res;
}

static int run_mpi(const void *send, void *recv, const struct perf_call *call, MPI_Comm comm) {
  int bytes = (int)(call->counts.call_count * call->type->size);
  return MPI_Sendrecv(send, bytes, MPI_BYTE, next_rank(call), 0, recv, bytes, MPI_BYTE, prev_rank(call), 0, comm,
                      MPI_STATUS_IGNORE);
}

static double expected(const struct perf_values *v, const struct perf_call *call, size_t index) {
  return perf_input_value(v, prev_rank(call), index);
}

static const struct perf_collective sendrecv = {
    .name = "sendrecv",
    .get_counts = perf_counts_whole_row,
    .busbw_factor = perf_busbw_whole_row,
    .run = run,
    .run_mpi = run_mpi,
    .mpi_moves_bytes = 1,
    .in_place_unchecked = 1,
    .expected = expected,
};

int main(int argc, char **argv) {
  return perf_main(argc, argv, &sendrecv);
}
