/* The plan cache (collectives/plan_cache.c): a plan is reused only by a call of the same kind, count, type, root,
 * buffers' kind and reduction named. The reduction counts since the direct all-reduce: a plan made for a sum must
 * not serve a premulsum of the same shape, whose per-rank scalars only the FIFO algorithms apply; and whether the
 * buffers lie in windows, which the direct algorithms need across processes. */
#include <string.h>

#include "collectives/coll_comm.h"
#include "collectives/op.h"
#include "collectives/reduce.h"
#include "unit_check.h"

static void shape(struct dccl_op *op, struct dccl_coll_comm *comm, int called) {
  memset(op, 0, sizeof(*op));
  op->comm = comm;
  op->kind = DCCL_OP_ALLREDUCE;
  op->count = 1000;
  op->type = ncclFloat32;
  op->esize = 4;
  op->root = -1;
  op->on_device = 1;
  op->redop.called = called;
  op->send_win = op->recv_win = -1;
}

int main(void) {
  struct dccl_coll_comm comm;
  memset(&comm, 0, sizeof(comm));
  comm.nranks = 2;
  struct dccl_op planned, again;
  shape(&planned, &comm, ncclSum);
  planned.algo = DCCL_ALGO_DIRECT;
  planned.nchannels = 1;
  planned.bound = 1;
  dccl_plan_cache_put(&planned);
  check(comm.plan_cache != NULL, "the cache was made");

  shape(&again, &comm, ncclSum);
  check(dccl_plan_cache_get(&again) && again.algo == DCCL_ALGO_DIRECT && again.nchannels == 1,
        "the same call finds the plan");
  shape(&again, &comm, DCCL_CALLED_PREMULSUM);
  check(!dccl_plan_cache_get(&again), "a premulsum of the same shape does not reuse a sum's plan");
  shape(&again, &comm, ncclAvg);
  check(!dccl_plan_cache_get(&again), "an average does not reuse a sum's plan");
  shape(&again, &comm, ncclSum);
  again.count = 1001;
  check(!dccl_plan_cache_get(&again), "another count does not reuse it");
  shape(&again, &comm, ncclSum);
  again.on_device = 0;
  check(!dccl_plan_cache_get(&again), "host buffers do not reuse a device plan");
  /* Buffers in windows (the direct algorithms across processes) plan apart from buffers outside them. */
  shape(&again, &comm, ncclSum);
  again.send_win = 0;
  again.recv_win = 3;
  check(!dccl_plan_cache_get(&again), "a call in windows does not reuse a plan made outside them");
  again.algo = DCCL_ALGO_DIRECT;
  again.nchannels = 2;
  again.bound = 1;
  dccl_plan_cache_put(&again);
  shape(&again, &comm, ncclSum);
  again.send_win = 5;
  again.recv_win = DCCL_WINDOW_UNUSED;
  check(dccl_plan_cache_get(&again) && again.nchannels == 2, "another call in windows finds that plan");
  shape(&again, &comm, ncclSum);
  again.send_win = 5;
  check(!dccl_plan_cache_get(&again) || again.nchannels == 1, "half in a window is outside");
  dccl_plan_cache_free(&comm);
  printf("test_plan_cache: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
