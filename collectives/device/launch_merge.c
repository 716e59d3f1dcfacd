/* Several ranks' launches as one (collectives/device/launch_merge.h). */
#include "collectives/device/launch_merge.h"

#include <stddef.h>
#include <string.h>

int dccl_dev_work_merge(struct dccl_dev_work *out, const struct dccl_dev_work *const *works, int n) {
  uint32_t ntasks = 0, nctas = 0;
  if (n < 1 || n > DCCL_DEV_LAUNCH_RANKS) return 0;
  for (int i = 0; i < n; i++) {
    if (works[i]->tasks || works[i]->ce.mode != DCCL_CE_NONE) return 0;
    ntasks += works[i]->ntasks;
    nctas += works[i]->nctas;
  }
  if (ntasks > DCCL_DEV_INLINE_TASKS || nctas > DCCL_DEV_MAX_CTAS) return 0;
  memset(out, 0, offsetof(struct dccl_dev_work, inline_tasks));
  out->exit_ctas = works[0]->exit_ctas; /* the first rank's: its launches are ordered, this one among them */
  for (int i = 0; i < n; i++) {
    const struct dccl_dev_work *w = works[i];
    out->rank[i] = w->rank[0];
    for (uint32_t k = 0; k < w->nctas; k++) {
      out->cta_first[out->nctas + k] = (uint16_t)(out->ntasks + w->cta_first[k]);
      out->cta_ntasks[out->nctas + k] = w->cta_ntasks[k];
      out->cta_rank[out->nctas + k] = (uint8_t)i;
    }
    memcpy(&out->inline_tasks[out->ntasks], w->inline_tasks, w->ntasks * sizeof(struct dccl_dev_task));
    for (uint32_t t = 0; t < w->ntasks; t++) /* a task shared by CTAs names them where they now are */
      if (out->inline_tasks[out->ntasks + t].ctas > 1) out->inline_tasks[out->ntasks + t].cta0 += (uint8_t)out->nctas;
    out->ntasks += w->ntasks;
    out->nctas += w->nctas;
  }
  return 1;
}
