/* The cost model. Two constants, measured on this machine when a communicator is created:
 *   alpha: the time of one pipeline step (a slot handed from one rank to the next), from timing tiny ring
 *          all-reduces over the real connections;
 *   bw:    the rate at which a core copies memory, from timing memcpy.
 * A ring all-reduce of S bytes on N ranks in L loops takes (2N-2+L) steps and moves 2S(N-1)/N bytes per rank; a
 * double binary tree takes (2*depth+C) steps for C chunks per tree and moves about 3S bytes per rank (each
 * inner node reads two children and its input, and writes its parent and two children). One-shot (every rank
 * sends its input to every other and reduces all in rank order) takes 2 steps per chunk and moves (N-1) S bytes
 * per rank each way: it wins for small sizes. The smallest prediction wins. All ranks use the slowest rank's
 * constants, so all choose the same algorithm. */
#include "tune/tune.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bootstrap/bootstrap.h"
#include "collectives/op.h"
#include "util/error.h"
#include "util/params.h"
#include "util/wait.h"

#define TUNE_COPY_BYTES (8u << 20)
#define TUNE_ITERS 16

static double measure_copy_bw(void) {
  char *a = malloc(TUNE_COPY_BYTES), *b = malloc(TUNE_COPY_BYTES);
  double best = 1.0;
  if (!a || !b) goto out;
  memset(a, 1, TUNE_COPY_BYTES);
  memset(b, 2, TUNE_COPY_BYTES);
  for (int i = 0; i < 3; i++) {
    uint64_t t0 = (uint64_t)dccl_now_ns();
    memcpy(b, a, TUNE_COPY_BYTES);
    uint64_t dt = (uint64_t)dccl_now_ns() - t0;
    double bw = dt ? (double)TUNE_COPY_BYTES / (double)dt : 1.0;
    if (bw > best) best = bw;
  }
out:
  free(a);
  free(b);
  return best;
}

/* Times tiny ring all-reduces over the ring connections: per step latency. */
static ncclResult_t measure_step_ns(struct dccl_comm *comm, double *alpha) {
  float in = 1.0f, out;
  struct dccl_op *op = calloc(1, sizeof(*op));
  if (!op) return dccl_error(ncclSystemError, "out of memory");
  ncclResult_t res = ncclSuccess;
  uint64_t t0 = 0;
  for (int i = 0; i <= TUNE_ITERS && res == ncclSuccess; i++) {
    if (i == 1) t0 = (uint64_t)dccl_now_ns(); /* the first one warms up */
    memset(op, 0, sizeof(*op));
    op->comm = comm;
    op->kind = DCCL_OP_ALLREDUCE;
    op->sendbuff = &in;
    op->recvbuff = &out;
    op->count = 1;
    op->type = ncclFloat32;
    op->esize = sizeof(float);
    op->algo = DCCL_ALGO_RING;
    dccl_redop_builtin(&op->redop, ncclSum, ncclFloat32, comm->nranks);
    op->seq = comm->coll_seq++;
    res = dccl_op_plan(op);
    if (res == ncclSuccess) res = dccl_op_bind(op);
    if (res == ncclSuccess) res = dccl_exec_ops(&op, 1);
  }
  *alpha = (double)((uint64_t)dccl_now_ns() - t0) / TUNE_ITERS / (2.0 * comm->nranks - 1);
  free(op);
  return res;
}

ncclResult_t dccl_tune_measure(struct dccl_comm *comm) {
  double mine[2] = {0, 0}; /* alpha ns, bw bytes/ns */
  if (comm->nranks > 1) DCCLCHECK(measure_step_ns(comm, &mine[0]));
  mine[1] = measure_copy_bw();
  double *all = calloc((size_t)comm->nranks, sizeof(mine));
  if (!all) return dccl_error(ncclSystemError, "out of memory");
  memcpy(all + 2 * comm->rank, mine, sizeof(mine));
  ncclResult_t res = dccl_bootstrap_allgather(comm->bootstrap, all, sizeof(mine));
  comm->alpha_ns = 0;
  comm->bw_bytes_per_ns = 1e9;
  for (int r = 0; r < comm->nranks && res == ncclSuccess; r++) {
    if (all[2 * r] > comm->alpha_ns) comm->alpha_ns = all[2 * r];
    if (all[2 * r + 1] < comm->bw_bytes_per_ns) comm->bw_bytes_per_ns = all[2 * r + 1];
  }
  free(all);
  int64_t a = dccl_param_int(DCCL_PARAM_TUNE_ALPHA_NS), b = dccl_param_int(DCCL_PARAM_TUNE_BW_MBPS);
  if (a > 0) comm->alpha_ns = (double)a;
  if (b > 0) comm->bw_bytes_per_ns = (double)b / 1000.0;
  DCCL_INFO(DCCL_TUNE, "cost model: step %.0f ns, copy %.2f GB/s", comm->alpha_ns, comm->bw_bytes_per_ns);
  return res;
}

double dccl_tune_predict_ns(const struct dccl_comm *comm, int algo, size_t bytes) {
  double n = comm->nranks, s = (double)bytes, k = (double)dccl_param_int(DCCL_PARAM_CHUNK_SIZE);
  if (algo == DCCL_ALGO_ONESHOT) {
    double chunks = s / k < 1 ? 1 : s / k;
    return 2.0 * chunks * comm->alpha_ns + 2.0 * s * (n - 1) / comm->bw_bytes_per_ns;
  }
  if (algo == DCCL_ALGO_TREE) {
    double chunks = s / 2 / k < 1 ? 1 : s / 2 / k;
    return (2.0 * dccl_tree_depth(comm->nranks) + chunks) * comm->alpha_ns + 3.0 * s / comm->bw_bytes_per_ns;
  }
  double loops = s / (n * k) < 1 ? 1 : s / (n * k);
  return (2.0 * n - 2 + loops) * comm->alpha_ns + 2.0 * s * (n - 1) / n / comm->bw_bytes_per_ns;
}

int dccl_tune_algo(const struct dccl_comm *comm, int kind, size_t bytes) {
  const char *forced = dccl_param_str(DCCL_PARAM_ALGO);
  if (!strcasecmp(forced, "tree")) return DCCL_ALGO_TREE;
  if (!strcasecmp(forced, "ring")) return DCCL_ALGO_RING;
  if (!strcasecmp(forced, "oneshot")) return DCCL_ALGO_ONESHOT;
  if (kind != DCCL_OP_ALLREDUCE) return DCCL_ALGO_RING; /* chains beat trees for broadcast/reduce on one host */
  int best = DCCL_ALGO_RING;
  double best_ns = dccl_tune_predict_ns(comm, DCCL_ALGO_RING, bytes);
  int candidates[] = {DCCL_ALGO_TREE, comm->nranks - 1 <= DCCL_CONN_SLOTS ? DCCL_ALGO_ONESHOT : DCCL_ALGO_TREE};
  for (int i = 0; i < 2; i++) {
    double t = dccl_tune_predict_ns(comm, candidates[i], bytes);
    if (t < best_ns) best = candidates[i], best_ns = t;
  }
  return best;
}
