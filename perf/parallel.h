/* The checks' element loops on several threads (check.c): filling and checking a 1 GiB buffer element by element
 * takes tens of seconds on one core, most of a device call's time at that size, while the machine's other cores
 * idle. */
#ifndef PERF_PARALLEL_H_
#define PERF_PARALLEL_H_

#include <stddef.h>

/* Threads per loop: the online CPUs shared by the ranks of this node, or fewer where the rank is bound to fewer (at
 * least 1, at most 16); PERF_THREADS overrides. */
void perf_parallel_init(int ranks_on_node);

/* fn over [0, n) in contiguous ranges, one a thread (inline where n is small); returns the sum of its results. */
typedef size_t (*perf_range_fn)(void *ctx, size_t lo, size_t hi);
size_t perf_parallel_sum(size_t n, perf_range_fn fn, void *ctx);

#endif
