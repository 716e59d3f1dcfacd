/* How many CTAs one launch may take of its GPU's resident capacity. Kernels of different ranks wait on each other,
 * so every CTA of every kernel that may run at once must be resident together, or one that cannot be scheduled
 * leaves the others spinning forever. The kernels that may run at once on a GPU are those of every rank of every
 * live communicator there: each launch takes the resident CTAs over that count. This process knows its own
 * communicators; processes sharing a GPU are assumed alike (each holding the same communicators). */
#ifndef DCCL_CTA_SHARE_H_
#define DCCL_CTA_SHARE_H_

/* A communicator's rank on GPU `ordinal` joins: `ranks_on_gpu` of the communicator share the GPU, `local` of them
 * in this process (each of those joins too). Returns what leave() takes back. */
long dccl_cta_share_join(int ordinal, int ranks_on_gpu, int local);
void dccl_cta_share_leave(int ordinal, long joined);
/* The CTAs a launch on GPU `ordinal` may use now, of `resident` (at least 1). */
int dccl_cta_share(int ordinal, int resident);
/* Rank kernels that may run at once on GPU `ordinal`, as counted now (for the log). */
double dccl_cta_share_load(int ordinal);

#endif
