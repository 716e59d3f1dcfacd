/* Element loops split over threads (parallel.h). */
#define _GNU_SOURCE /* sched_getaffinity */
#include "parallel.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 16
#define MIN_PER_THREAD ((size_t)1 << 18) /* elements: below this a thread costs more than it saves */

static int threads = 1;

void perf_parallel_init(int ranks_on_node) {
  const char *env = getenv("PERF_THREADS");
  long n = sysconf(_SC_NPROCESSORS_ONLN) / (ranks_on_node > 0 ? ranks_on_node : 1);
  /* A rank bound to fewer cores (mpirun binds 1-2 ranks to a core each by default) gains nothing from more threads. */
  cpu_set_t mine;
  if (sched_getaffinity(0, sizeof(mine), &mine) == 0 && CPU_COUNT(&mine) < n) n = CPU_COUNT(&mine);
  if (env && *env) n = atol(env);
  threads = n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

struct range {
  perf_range_fn fn;
  void *ctx;
  size_t lo, hi, result;
};

static void *run_range(void *arg) {
  struct range *r = arg;
  r->result = r->fn(r->ctx, r->lo, r->hi);
  return NULL;
}

size_t perf_parallel_sum(size_t n, perf_range_fn fn, void *ctx) {
  size_t want = n / MIN_PER_THREAD;
  int t = want < (size_t)threads ? (int)want : threads;
  if (t <= 1) return fn(ctx, 0, n);
  struct range ranges[MAX_THREADS];
  pthread_t ids[MAX_THREADS];
  int started = 0;
  for (int i = 0; i < t; i++) {
    ranges[i] = (struct range){fn, ctx, n * (size_t)i / (size_t)t, n * (size_t)(i + 1) / (size_t)t, 0};
    /* A thread that cannot start leaves its range to this one (below). */
    if (i > 0 && pthread_create(&ids[i], NULL, run_range, &ranges[i]) == 0) started |= 1 << i;
  }
  size_t sum = 0;
  for (int i = 0; i < t; i++) {
    if (started & (1 << i)) pthread_join(ids[i], NULL);
    else run_range(&ranges[i]);
    sum += ranges[i].result;
  }
  return sum;
}
