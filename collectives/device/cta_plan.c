/* A launch's CTAs (collectives/device/cta_plan.h). */
#include "collectives/device/cta_plan.h"

#include "util/error.h"

struct lane {
  int kind, peer, channel;
};

static int is_p2p(const struct dccl_op *op) { return op->kind == DCCL_OP_SEND || op->kind == DCCL_OP_RECV; }

static int runs(const struct dccl_op *op, const struct dccl_coll_comm *comm) {
  return op->comm == comm && op->on_device && !op->finished;
}

static int has_steps(const struct dccl_op *op, int c) { return op->ch[c].nsteps[0] + op->ch[c].nsteps[1] > 0; }

/* The index of lane (kind, peer, channel) in lanes[0..*n), added at the end when new. */
static int lane_index(struct lane *lanes, int *n, const struct dccl_op *op, int c) {
  for (int i = 0; i < *n; i++)
    if (lanes[i].kind == op->kind && lanes[i].peer == op->peer && lanes[i].channel == c) return i;
  lanes[*n] = (struct lane){op->kind, op->peer, c};
  return (*n)++;
}

ncclResult_t dccl_cta_plan(struct dccl_cta_plan *plan, const struct dccl_op *list, const struct dccl_coll_comm *comm,
                           int share) {
  struct lane lanes[DCCL_DEV_MAX_TASKS]; /* a lane has a task at least */
  int nlanes = 0, ncoll = 0, ntasks = 0;
  for (const struct dccl_op *op = list; op; op = op->next) {
    if (!runs(op, comm)) continue;
    for (int c = 0; c < op->nchannels; c++) {
      if (!has_steps(op, c)) continue;
      if (++ntasks <= DCCL_DEV_MAX_TASKS && is_p2p(op)) lane_index(lanes, &nlanes, op, c);
      else if (c + 1 > ncoll) ncoll = c + 1;
    }
  }
  *plan = (struct dccl_cta_plan){.ntasks = ntasks, .ncoll = ncoll, .nlanes = nlanes};
  if (ntasks > DCCL_DEV_MAX_TASKS)
    return dccl_error(ncclInvalidUsage, "a group of device operations needs %d kernel tasks; at most %d", ntasks,
                      DCCL_DEV_MAX_TASKS);
  if (share > DCCL_DEV_MAX_CTAS) share = DCCL_DEV_MAX_CTAS;
  if (nlanes + (ncoll > 0) > share)
    return dccl_error(ncclInvalidUsage, "a group of device operations needs %d CTAs for its point-to-point peers%s; "
                      "this launch may use %d (DCCL_MAX_CTAS, or fewer peers per group)", nlanes,
                      ncoll ? " and one for its collectives" : "", share);
  plan->fold = ncoll + nlanes > share ? share - nlanes : ncoll;
  int task = 0;
  for (const struct dccl_op *op = list; op; op = op->next) {
    if (!runs(op, comm)) continue;
    for (int c = 0; c < op->nchannels; c++) {
      if (!has_steps(op, c)) continue;
      int cta = is_p2p(op) ? plan->fold + lane_index(lanes, &nlanes, op, c) : c % plan->fold;
      plan->cta[task++] = (uint8_t)cta;
      if (cta + 1 > plan->nctas) plan->nctas = cta + 1;
    }
  }
  return ncclSuccess;
}
