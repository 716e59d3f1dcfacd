/* Which CTA runs each task of a launch (collectives/device/cta_plan.h): the collectives' channel c on CTA c % fold,
 * in issue order; each point-to-point lane (direction, peer, channel) on a CTA of its own after them, shared by the
 * operations of that lane; only this communicator's unfinished device operations and channels with steps count;
 * groups that cannot fit are refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DCCL_HAVE_DEVICE_CODE
#include "unit_check.h"
#include "collectives/coll_comm.h"
#include "collectives/device/cta_plan.h"

static struct dccl_coll_comm comm, other;
static struct dccl_op ops[80];
static int nops;

/* Appends an operation of `nch` channels, each with one step, to the list. */
static struct dccl_op *add(int kind, int peer, int nch) {
  struct dccl_op *op = &ops[nops];
  memset(op, 0, sizeof(*op));
  op->comm = &comm;
  op->kind = kind;
  op->peer = peer;
  op->on_device = 1;
  op->nchannels = nch;
  for (int c = 0; c < nch; c++) op->ch[c].nsteps[0] = 1;
  if (nops > 0) ops[nops - 1].next = op;
  nops++;
  return op;
}

static void reset(void) { nops = 0; }

static struct dccl_cta_plan plan;

static void collectives_only(void) {
  reset();
  add(DCCL_OP_ALLREDUCE, -1, 4);
  add(DCCL_OP_ALLGATHER, -1, 2);
  check(dccl_cta_plan(&plan, ops, &comm, 64) == ncclSuccess, "two collectives plan");
  static const int want[] = {0, 1, 2, 3, 0, 1};
  check(plan.ntasks == 6 && plan.nctas == 4 && plan.fold == 4 && plan.nlanes == 0, "6 tasks on 4 CTAs (got %d on %d)",
        plan.ntasks, plan.nctas);
  for (int t = 0; t < 6; t++) check(plan.cta[t] == want[t], "task %d on CTA %d (got %d)", t, want[t], plan.cta[t]);
  /* Folded: 8 channels on 3 CTAs, channel c on c % 3. */
  reset();
  add(DCCL_OP_ALLREDUCE, -1, 8);
  check(dccl_cta_plan(&plan, ops, &comm, 3) == ncclSuccess && plan.fold == 3 && plan.nctas == 3, "8 channels fold "
        "onto 3 CTAs (fold %d, %d CTAs)", plan.fold, plan.nctas);
  for (int t = 0; t < 8; t++) check(plan.cta[t] == t % 3, "channel %d on CTA %d (got %d)", t, t % 3, plan.cta[t]);
}

static void lanes(void) {
  /* An all-reduce of 2 channels, then sends and receives to peers 1 and 2 of 2 channels each, then a second send
   * to peer 1 (its lanes are the first send's). */
  reset();
  add(DCCL_OP_ALLREDUCE, -1, 2);
  add(DCCL_OP_SEND, 1, 2);
  add(DCCL_OP_RECV, 1, 2);
  add(DCCL_OP_SEND, 2, 2);
  add(DCCL_OP_RECV, 2, 1);
  add(DCCL_OP_SEND, 1, 2);
  check(dccl_cta_plan(&plan, ops, &comm, 64) == ncclSuccess, "collective and sends plan");
  check(plan.ntasks == 11 && plan.nlanes == 7 && plan.fold == 2 && plan.nctas == 9, "11 tasks, 7 lanes after 2 "
        "collective CTAs (got %d, %d, fold %d, %d CTAs)", plan.ntasks, plan.nlanes, plan.fold, plan.nctas);
  static const int want[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 2, 3};
  for (int t = 0; t < 11; t++) check(plan.cta[t] == want[t], "task %d on CTA %d (got %d)", t, want[t], plan.cta[t]);
  /* 8 CTAs: the lanes keep theirs, the collective folds onto the one left. */
  check(dccl_cta_plan(&plan, ops, &comm, 8) == ncclSuccess && plan.fold == 1 && plan.cta[1] == 0 &&
            plan.cta[2] == 1 && plan.nctas == 8,
        "8 CTAs: the collective's 2 channels on CTA 0 (fold %d, CTA of channel 1 %d)", plan.fold, plan.cta[1]);
  /* 7 CTAs: no room for the collective beside 7 lanes. */
  check(dccl_cta_plan(&plan, ops, &comm, 7) == ncclInvalidUsage, "7 lanes and a collective on 7 CTAs are refused");
  check(strstr(ncclGetLastError(NULL), "needs 7 CTAs for its point-to-point peers and one for its collectives") !=
            NULL,
        "the error says why: %s", ncclGetLastError(NULL));
  /* Without the collective, 7 lanes fit 7 CTAs, the first on CTA 0. */
  check(dccl_cta_plan(&plan, &ops[1], &comm, 7) == ncclSuccess && plan.nctas == 7 && plan.cta[0] == 0,
        "7 lanes alone fit 7 CTAs (%d CTAs)", plan.nctas);
}

static void what_counts(void) {
  reset();
  struct dccl_op *done = add(DCCL_OP_SEND, 3, 1);
  done->finished = 1; /* run by the copy engines already */
  add(DCCL_OP_SEND, 4, 1)->comm = &other;
  add(DCCL_OP_SEND, 5, 1)->on_device = 0;
  struct dccl_op *idle = add(DCCL_OP_ALLREDUCE, -1, 3);
  idle->ch[1].nsteps[0] = 0; /* a channel with nothing to move */
  add(DCCL_OP_RECV, 6, 1);
  check(dccl_cta_plan(&plan, ops, &comm, 64) == ncclSuccess && plan.ntasks == 3 && plan.nlanes == 1 &&
            plan.ncoll == 3 && plan.nctas == 4 && plan.cta[0] == 0 && plan.cta[1] == 2 && plan.cta[2] == 3,
        "only unfinished device ops of this comm with steps: 3 tasks on CTAs 0, 2, 3 (got %d: %d %d %d)",
        plan.ntasks, plan.cta[0], plan.cta[1], plan.cta[2]);
  reset();
  add(DCCL_OP_ALLREDUCE, -1, 2)->finished = 1;
  check(dccl_cta_plan(&plan, ops, &comm, 64) == ncclSuccess && plan.ntasks == 0 && plan.nctas == 0,
        "nothing to run: no CTAs");
}

static void too_many_tasks(void) {
  /* 64 operations of 17 channels: 1088 tasks, more than a launch holds. */
  reset();
  for (int i = 0; i < 64; i++) add(DCCL_OP_ALLREDUCE, -1, 17);
  check(dccl_cta_plan(&plan, ops, &comm, 64) == ncclInvalidUsage &&
            strstr(ncclGetLastError(NULL), "needs 1088 kernel tasks; at most 1024") != NULL,
        "1088 tasks are refused: %s", ncclGetLastError(NULL));
}

int main(void) {
  collectives_only();
  lanes();
  what_counts();
  too_many_tasks();
  printf("test_cta_plan: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
#else
int main(void) {
  printf("test_cta_plan: built without device code\n");
  return 77;
}
#endif
