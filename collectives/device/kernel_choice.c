/* Which kernel runs a launch (collectives/device/kernel_choice.h). */
#include "collectives/device/kernel_choice.h"

#include <stdio.h>
#include <string.h>

#include "pure/reduce_math.h"

_Static_assert(DCCL_ELEM_E5M2 + 1 == DCCL_KERNEL_NTYPES, "a kernel per element type (enum dccl_elem_type)");

void dccl_kernel_name(int k, char *name, size_t len) {
  if (k < DCCL_KERNEL_ANY)
    snprintf(name, len, "dccl_kernel_t%d", k);
  else if (k == DCCL_KERNEL_ANY)
    snprintf(name, len, "dccl_kernel_any");
  else if (k < DCCL_KERNEL_TINY(0))
    snprintf(name, len, "dccl_kernel_ll_t%d", k - DCCL_KERNEL_LL(0));
  else if (k < DCCL_KERNEL_SLIM(0))
    snprintf(name, len, "dccl_kernel_tiny_t%d", k - DCCL_KERNEL_TINY(0));
  else
    snprintf(name, len, "dccl_kernel_slim_t%d", k - DCCL_KERNEL_SLIM(0));
}

int dccl_kernel_generic(int type) { return type >= 0 && type < DCCL_KERNEL_NTYPES ? type : DCCL_KERNEL_ANY; }

int dccl_kernel_for(int type, const struct dccl_dev_task *tasks, int ntasks) {
  if (dccl_kernel_generic(type) == DCCL_KERNEL_ANY) return DCCL_KERNEL_ANY;
  for (int t = 0; t < ntasks; t++)
    if (tasks[t].proto != DCCL_PROTO_LL || tasks[t].nsteps[1] > 0 || tasks[t].sched.algo == DCCL_SCHED_DIRECT)
      return type;
  return DCCL_KERNEL_LL(type);
}

int dccl_kernel_tiny(int kernel, const struct dccl_dev_work *w) {
  if (kernel < DCCL_KERNEL_LL(0) || kernel >= DCCL_KERNEL_TINY(0) || w->tasks || w->ce.mode != DCCL_CE_NONE)
    return kernel;
  if (w->nctas == 0 || w->ntasks != w->nctas) return kernel;
  for (uint32_t b = 0; b < w->nctas; b++)
    if (w->cta_ntasks[b] != 1 || w->cta_first[b] != b) return kernel;
  for (uint32_t i = 0; i < w->ntasks; i++) {
    const struct dccl_dev_task *t = &w->inline_tasks[i];
    if (t->proto != DCCL_PROTO_LL || t->sched.algo != DCCL_SCHED_ONESHOT_ALLREDUCE || t->nsteps[0] != 2 ||
        t->nsteps[1] != 0 || t->sched.npeers < 1 || t->sched.npeers > DCCL_DEV_CONN_SLOTS ||
        t->sched.count * t->esize > DCCL_DEV_TINY_BYTES)
      return kernel;
  }
  const int type = kernel - DCCL_KERNEL_LL(0);
  return w->nctas <= DCCL_DEV_SLIM_CTAS ? DCCL_KERNEL_SLIM(type) : DCCL_KERNEL_TINY(type);
}

void dccl_dev_slim_of(const struct dccl_dev_work *w, struct dccl_dev_slim_work *s) {
  memset(s, 0, sizeof(*s));
  for (uint32_t b = 0; b < w->nctas && b < DCCL_DEV_SLIM_CTAS; b++) {
    s->rank[b] = w->rank[b]; /* a launch's rank slots number at most its CTAs */
    s->inline_tasks[b] = w->inline_tasks[b];
    s->cta_rank[b] = w->cta_rank[b];
  }
}
