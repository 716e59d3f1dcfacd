/* One kernel launch for several ranks of this process on one GPU. When one thread calls for all of them in a group
 * (ncclCommInitAll's ranks driven by one thread), launching each rank's kernel in turn starts each a launch call
 * (~5 us) after the one before, and the CTAs of the first wait that long for their peers. Merged, every rank's CTAs
 * start together: each rank's launch is built as if alone, then becomes a range of the shared launch's CTAs and
 * tasks, its CTAs naming its slot of rank words (dev_work.h). */
#ifndef DCCL_LAUNCH_MERGE_H_
#define DCCL_LAUNCH_MERGE_H_

#include "collectives/device/dev_work.h"

/* Merges works[0..n), each one rank's launch (its rank words in slot 0, every CTA naming slot 0, tasks inline, no
 * copy-engine part), into *out, rank i in slot i. Returns 1, or 0 when they do not fit one launch (more than
 * DCCL_DEV_LAUNCH_RANKS ranks, DCCL_DEV_MAX_CTAS CTAs or DCCL_DEV_INLINE_TASKS tasks in all, or tasks in host
 * memory); *out is then unspecified. */
int dccl_dev_work_merge(struct dccl_dev_work *out, const struct dccl_dev_work *const *works, int n);

#endif
