/* Which CTA of a launch runs each of its tasks (one task: one channel of one operation). Channel c of the
 * collectives runs on CTA c % fold, in issue order (channel c's operations share links). Channels folded onto fewer
 * CTAs than there are stay deadlock-free whatever another rank folds: every rank runs its tasks in one order,
 * (operation, channel), so the first unfinished task anywhere waits only on its own channel's peers, which are at it
 * or past it. Each point-to-point lane (direction, peer, channel) gets a CTA of its own after them, so a send never
 * waits behind a receive, and a send's channels move at once. */
#ifndef DCCL_CTA_PLAN_H_
#define DCCL_CTA_PLAN_H_

#include <stdint.h>

#include "collectives/device/dev_work.h"
#include "collectives/op.h"

struct dccl_cta_plan {
  int ntasks, nctas;
  int ncoll;  /* the collectives' channels */
  int nlanes; /* point-to-point lanes */
  int fold;   /* CTAs the collectives' channels run on */
  uint8_t cta[DCCL_DEV_MAX_TASKS]; /* by task, in issue order */
};

/* Places the tasks of `comm`'s unfinished device operations in `list` (those of channels with steps to run) on at
 * most `share` CTAs. ncclInvalidUsage when they cannot fit: more tasks than a launch holds, or more lanes than
 * share leaves beside one CTA for the collectives. */
ncclResult_t dccl_cta_plan(struct dccl_cta_plan *plan, const struct dccl_op *list, const struct dccl_coll_comm *comm,
                           int share);

#endif
