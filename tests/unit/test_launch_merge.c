/* Several ranks' launches as one (collectives/device/launch_merge.h): every CTA keeps its own tasks, in order, and
 * names its rank's slot of rank words; launches that do not fit one are refused. */
#include <stdio.h>
#include <string.h>

#include "unit_check.h"

#ifdef DCCL_HAVE_DEVICE_CODE
#include "collectives/device/launch_merge.h"

static uint32_t words[DCCL_DEV_LAUNCH_RANKS][4]; /* stand-ins: each rank's abort word, status, exit counts */

/* Rank r's launch: `nctas` CTAs, CTA k with k + 1 tasks (none past the inline ones), task channels r * 100 + j. */
static void build(struct dccl_dev_work *w, int r, int nctas) {
  memset(w, 0, sizeof(*w));
  w->rank[0].abort_flag = &words[r][0];
  w->rank[0].status = (struct dccl_dev_status *)&words[r][1];
  w->rank[0].done_ctas = &words[r][2];
  w->exit_ctas = &words[r][3];
  for (int k = 0; k < nctas; k++) {
    w->cta_first[k] = (uint16_t)w->ntasks;
    w->cta_ntasks[k] = (uint16_t)(k + 1);
    for (int j = 0; j <= k; j++) w->inline_tasks[w->ntasks + j].channel = (uint32_t)(r * 100 + w->ntasks + j);
    w->ntasks += (uint32_t)(k + 1);
  }
  w->nctas = (uint32_t)nctas;
  w->rank[0].ctas = (uint32_t)nctas;
}

static void merges(void) {
  struct dccl_dev_work a, b, c, out;
  build(&a, 0, 2); /* 3 tasks */
  build(&b, 1, 1); /* 1 task */
  build(&c, 2, 2); /* 3 tasks */
  const struct dccl_dev_work *works[] = {&a, &b, &c};
  check(dccl_dev_work_merge(&out, works, 3) == 1, "3 launches of 7 tasks and 5 CTAs merge");
  check(out.nctas == 5 && out.ntasks == 7 && out.tasks == NULL, "5 CTAs, 7 inline tasks (got %u, %u)", out.nctas,
        out.ntasks);
  const uint8_t want_rank[] = {0, 0, 1, 2, 2};
  const uint32_t want_first_channel[] = {0, 1, 100, 200, 201};
  for (int k = 0; k < 5; k++) {
    const struct dccl_dev_work *from = works[want_rank[k]];
    int own = k - (want_rank[k] == 0 ? 0 : want_rank[k] == 1 ? 2 : 3);
    check(out.cta_rank[k] == want_rank[k], "CTA %d is rank slot %d's (got %d)", k, want_rank[k], out.cta_rank[k]);
    check(out.cta_ntasks[k] == from->cta_ntasks[own], "CTA %d keeps its %d tasks", k, from->cta_ntasks[own]);
    check(out.inline_tasks[out.cta_first[k]].channel == want_first_channel[k], "CTA %d starts at its own first task",
          k);
    for (int j = 0; j < out.cta_ntasks[k]; j++)
      check(out.inline_tasks[out.cta_first[k] + j].channel == from->inline_tasks[from->cta_first[own] + j].channel,
            "CTA %d task %d is its own, in order", k, j);
  }
  for (int r = 0; r < 3; r++)
    check(out.rank[r].abort_flag == &words[r][0] && out.rank[r].done_ctas == &words[r][2],
          "slot %d holds rank %d's words", r, r);
  check(out.exit_ctas == &words[0][3], "the launch counts its exits on the first rank's device counter");
  check(out.rank[0].ctas == 2 && out.rank[1].ctas == 1 && out.rank[2].ctas == 2, "each slot keeps its rank's CTAs");
}

/* A direct operation alone in its launch runs as one task that all its CTAs share (cta0, ctas): merged behind
 * another rank's CTAs, it names the CTAs where they now are. */
static void shared_tasks(void) {
  struct dccl_dev_work a, b, out;
  build(&a, 0, 2); /* 3 tasks of their own */
  memset(&b, 0, sizeof(b));
  b.nctas = 4;
  b.ntasks = 1;
  for (int k = 0; k < 4; k++) b.cta_ntasks[k] = 1; /* every CTA's task is task 0 */
  b.inline_tasks[0].channel = 0;
  b.inline_tasks[0].ctas = 4;
  const struct dccl_dev_work *works[] = {&a, &b};
  check(dccl_dev_work_merge(&out, works, 2) == 1, "3 tasks and a shared one merge");
  check(out.nctas == 6 && out.ntasks == 4, "6 CTAs, 4 tasks (got %u, %u)", out.nctas, out.ntasks);
  const struct dccl_dev_task *shared = &out.inline_tasks[3];
  check(shared->ctas == 4 && shared->cta0 == 2, "the shared task starts at CTA 2 (got %u CTAs from %u)",
        shared->ctas, shared->cta0);
  for (int k = 2; k < 6; k++) {
    const struct dccl_dev_task *t = &out.inline_tasks[out.cta_first[k]];
    check(t == shared && out.cta_ntasks[k] == 1 && out.cta_rank[k] == 1, "CTA %d runs the shared task", k);
    check(t->channel + (uint32_t)(k - t->cta0) == (uint32_t)(k - 2), "CTA %d is channel %d", k, k - 2);
  }
  check(out.inline_tasks[0].ctas == 0 && out.inline_tasks[0].cta0 == 0, "tasks of their own are left as they were");
}

static void refusals(void) {
  struct dccl_dev_work a, b, out;
  const struct dccl_dev_work *works[] = {&a, &b};
  build(&a, 0, 3); /* 6 tasks */
  build(&b, 1, 2); /* 3 more: past the inline ones */
  check(dccl_dev_work_merge(&out, works, 2) == 0, "9 tasks do not fit the parameter's %d", DCCL_DEV_INLINE_TASKS);
  build(&a, 0, 1);
  build(&b, 1, 1);
  a.nctas = DCCL_DEV_MAX_CTAS; /* CTAs without tasks, as far as the count goes */
  check(dccl_dev_work_merge(&out, works, 2) == 0, "more than %d CTAs: refused", DCCL_DEV_MAX_CTAS);
  a.nctas = 1;
  static struct dccl_dev_task host_tasks[1];
  b.tasks = host_tasks;
  check(dccl_dev_work_merge(&out, works, 2) == 0, "tasks in host memory: refused");
  b.tasks = NULL;
  b.ce.mode = DCCL_CE_REDUCE;
  check(dccl_dev_work_merge(&out, works, 2) == 0, "a copy-engine launch: refused");
  b.ce.mode = DCCL_CE_NONE;
  check(dccl_dev_work_merge(&out, works, 2) == 1, "the same two, plain: merged");
  const struct dccl_dev_work *many[DCCL_DEV_LAUNCH_RANKS + 1];
  for (int i = 0; i <= DCCL_DEV_LAUNCH_RANKS; i++) many[i] = &a;
  a.ntasks = 0;
  a.nctas = 0;
  check(dccl_dev_work_merge(&out, many, DCCL_DEV_LAUNCH_RANKS + 1) == 0, "more than %d ranks: refused",
        DCCL_DEV_LAUNCH_RANKS);
}
#endif

int main(void) {
#ifdef DCCL_HAVE_DEVICE_CODE
  merges();
  shared_tasks();
  refusals();
  printf("test_launch_merge: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed != 0;
#else
  (void)check;
  printf("test_launch_merge: no device code in this build\n");
  return 77;
#endif
}
