/* Which of the module's kernels (collectives/device/kernels.cu) runs a launch, and their names. Each element type
 * has a generic kernel, which runs every kind of task, an LL kernel, built for single-stream LL steps only (a small
 * operation's path, compact: its time is not spent fetching code), and a tiny kernel, a warp a CTA (and one that
 * counts its exit), for the smallest one-shot all-reduces; groups mixing types take the generic kernel for any type.
 * Plain host code, so the choice is unit-tested without a GPU. */
#ifndef DCCL_KERNEL_CHOICE_H_
#define DCCL_KERNEL_CHOICE_H_

#include <stddef.h>

#include "collectives/device/dev_work.h"

#define DCCL_KERNEL_NTYPES 12 /* enum dccl_elem_type */
/* Kernel indices: 0..NTYPES-1 the generic kernel of each type, then the one for any type, then the LL kernels, then
 * the tiny ones, then the slim ones (tiny kernels whose parameter is struct dccl_dev_slim_work). */
#define DCCL_KERNEL_ANY DCCL_KERNEL_NTYPES
#define DCCL_KERNEL_LL(type) (DCCL_KERNEL_NTYPES + 1 + (type))
#define DCCL_KERNEL_TINY(type) (2 * DCCL_KERNEL_NTYPES + 1 + (type))
#define DCCL_KERNEL_SLIM(type) (3 * DCCL_KERNEL_NTYPES + 1 + (type))
#define DCCL_NKERNELS (4 * DCCL_KERNEL_NTYPES + 1)

/* The name kernels.cu gives kernel `k`, into name[len]. */
void dccl_kernel_name(int k, char *name, size_t len);

/* The generic kernel of `type` (an enum dccl_elem_type; anything else: a mix), which runs every kind of task: the
 * copy-engine collectives' launches take it. */
int dccl_kernel_generic(int type);

/* The kernel for a launch of `tasks` whose element type is `type` (an enum dccl_elem_type; anything else: a mix):
 * the LL kernel where every task runs LL steps on one stream (no tree, no direct path), else the generic one. */
int dccl_kernel_for(int type, const struct dccl_dev_task *tasks, int ntasks);

/* The tiny kernel of LL kernel `kernel`'s type where it may run launch `w` (collectives/device/dev_tiny.cuh: one
 * warp per CTA runs its task and a second counts its exit, none of the LL path's task copy, schedule or CTA
 * barriers), else `kernel`: the tasks travel in the parameter, CTA b runs task b, and each is a one-shot all-reduce
 * of a single step of at most DCCL_DEV_TINY_BYTES with at most DCCL_DEV_CONN_SLOTS peers. A generic kernel's launch
 * stays on it. */
#define DCCL_DEV_TINY_BYTES 128
#define DCCL_DEV_TINY_THREADS 64
int dccl_kernel_tiny(int kernel, const struct dccl_dev_work *w);
/* A launch of at most DCCL_DEV_SLIM_CTAS CTAs takes the slim tiny kernel, whose parameter (*s) holds only what the
 * tiny kernels read: each CTA's task and its rank's words. */
void dccl_dev_slim_of(const struct dccl_dev_work *w, struct dccl_dev_slim_work *s);

#endif
