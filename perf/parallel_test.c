/* perf_parallel_sum (parallel.h): every element of [0, n) visited exactly once, whatever n and the thread count,
 * and the ranges' results summed. */
#include <stdio.h>
#include <stdlib.h>

#include "parallel.h"

static unsigned char *seen;

static size_t mark(void *ctx, size_t lo, size_t hi) {
  (void)ctx;
  for (size_t i = lo; i < hi; i++) seen[i]++;
  return hi - lo;
}

int main(void) {
  const size_t sizes[] = {0, 1, 1000, ((size_t)1 << 18) - 1, (size_t)1 << 19, ((size_t)5 << 18) + 7, (size_t)3 << 20};
  const char *threads[] = {"1", "2", "3", "16"};
  int failed = 0;
  for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
    setenv("PERF_THREADS", threads[t], 1);
    perf_parallel_init(1);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
      size_t n = sizes[k];
      seen = calloc(n + 1, 1);
      size_t sum = perf_parallel_sum(n, mark, NULL), once = 0;
      for (size_t i = 0; i < n; i++) once += seen[i] == 1;
      if (sum != n || once != n) {
        printf("FAIL: %s threads, n %zu: sum %zu, %zu elements seen once\n", threads[t], n, sum, once);
        failed++;
      }
      free(seen);
    }
  }
  printf("parallel_test: %s\n", failed ? "failed" : "passed");
  return failed != 0;
}
