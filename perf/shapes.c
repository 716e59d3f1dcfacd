/* Buffer counts and bus-bandwidth factors that several collectives share. */
#include "common.h"

void perf_counts_whole_row(size_t bytes, const struct perf_call *call, struct perf_counts *out) {
  size_t count = bytes / call->type->size;
  *out = (struct perf_counts){count, count, count, 0, 0, count * call->type->size};
}

double perf_busbw_whole_row(int nranks) {
  (void)nranks;
  return 1.0;
}

double perf_busbw_all_but_own(int nranks) {
  return (double)(nranks - 1) / nranks;
}
