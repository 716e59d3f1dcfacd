/* Whether ranks of different processes on one GPU run their kernels at once (core/gpu_sharing_probe.h). */
#include "core/gpu_sharing_probe.h"

#include <stdlib.h>
#include <string.h>

#include "collectives/device/dev_exec.h"
#include "collectives/op.h"
#include "collectives/reduce.h"
#include "core/group.h"
#include "util/error.h"
#include "util/log.h"
#include "util/params.h"

#define ROUNDS 5
/* Under MPS the probe's all-reduce takes tens of microseconds; without it, milliseconds (docs/gpu.md: a round trip
 * between two processes' kernels costs 4.5 ms there against 1.6 us). */
#define SLOW_US 1000.0

/* Two ranks of different processes on one GPU of one host. */
static int processes_share_a_gpu(const struct dccl_comm *comm, int *a_out, int *b_out) {
  const struct dccl_peer_info *p = comm->peers;
  for (int a = 0; a < comm->nranks; a++)
    for (int b = a + 1; b < comm->nranks; b++)
      if (p[a].has_device && p[b].has_device && p[a].pid != p[b].pid && p[a].real_host_hash == p[b].real_host_hash &&
          !memcmp(p[a].device_uuid, p[b].device_uuid, sizeof(p[a].device_uuid))) {
        *a_out = a;
        *b_out = b;
        return 1;
      }
  return 0;
}

/* One 4-byte device all-reduce on `stream`, through the same plan and launch as ncclAllReduce. */
static ncclResult_t issue_allreduce(void *arg, void *stream, void *scratch) {
  struct dccl_comm *comm = arg;
  struct dccl_op *op = dccl_op_get(&comm->coll);
  if (!op) return dccl_error(ncclSystemError, "out of memory");
  op->kind = DCCL_OP_ALLREDUCE;
  op->on_device = 1;
  op->stream = stream;
  op->sendbuff = op->recvbuff = scratch;
  op->count = 1;
  op->type = ncclFloat32;
  op->esize = 4;
  dccl_redop_builtin(&op->redop, ncclSum, ncclFloat32, 1);
  op->root = op->peer = -1;
  /* Deterministic mode refuses GPU buffers in its own plans; the probe's result does not matter: the ring. */
  if (comm->coll.deterministic) op->algo = DCCL_ALGO_RING;
  op->seq = comm->coll_seq++;
  ncclResult_t res = dccl_op_plan(op);
  if (res != ncclSuccess) {
    dccl_op_put(op);
    return res;
  }
  return dccl_group_run_now(op);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

ncclResult_t dccl_gpu_sharing_probe(struct dccl_comm *comm, int *take_turns) {
  int a, b;
  *take_turns = 0;
  if (!comm->device_links || !comm->coll.dev || !processes_share_a_gpu(comm, &a, &b)) return ncclSuccess;
  double us[ROUNDS];
  DCCLCHECK(dccl_dev_time_rounds(&comm->coll, ROUNDS, issue_allreduce, comm, us));
  qsort(us + 1, ROUNDS - 1, sizeof(double), cmp_double); /* the first round is a warm-up */
  double median = (us[ROUNDS / 2] + us[(ROUNDS + 1) / 2]) / 2;
  *take_turns = median > SLOW_US;
  if (median > SLOW_US && comm->rank == 0)
    DCCL_WARN(DCCL_INIT,
              "ranks of different processes share a GPU (ranks %d and %d, pids %d and %d) and do not run "
              "their kernels at once: a 4-byte device all-reduce took %.0f us at creation (median of %d; under MPS, "
              "tens of microseconds). Every hand-off between those processes waits for the GPU's time slice (the "
              "collectives take the copy engines unless DCCL_CE=0; send/recv and what is made of them wait): start MPS "
              "(nvidia-cuda-mps-control -d) before the job",
              a, b, comm->peers[a].pid, comm->peers[b].pid, median, ROUNDS - 1);
  else
    DCCL_INFO(DCCL_INIT,
              "rank %d: ranks of different processes share a GPU; a 4-byte device all-reduce took %.1f us "
              "(median of %d)%s",
              comm->rank, median, ROUNDS - 1, median > SLOW_US ? ": their kernels take turns" : "");
  return ncclSuccess;
}
