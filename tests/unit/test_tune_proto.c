/* The cost model's protocol choice (src/tune/tune.c): LL where its slot crosses fewer cache lines than bulk's,
 * bulk from there on and for anything larger than an LL slot. */
#include <stdlib.h>

#include "tune/tune.h"
#include "unit_check.h"

static int proto(double alpha_ns, double bw, size_t bytes) {
  struct dccl_coll_comm c = {.nranks = 2, .alpha_ns = alpha_ns, .bw_bytes_per_ns = bw};
  return dccl_tune_proto(&c, DCCL_OP_ALLREDUCE, bytes);
}

int main(void) {
  unsetenv("DCCL_PROTO"); /* the model, not a forced choice */
  /* This VM: a step about 0.5 us, memcpy about 5 GB/s. */
  check(proto(500, 5, 8) == DCCL_PROTO_LL, "8 B: LL (one line, against bulk's two)");
  check(proto(500, 5, 4) == DCCL_PROTO_LL, "4 B: LL");
  size_t bulk_sizes[] = {16, 64, 512, 4096, 4097, 1 << 20};
  for (int i = 0; i < 6; i++)
    check(proto(500, 5, bulk_sizes[i]) == DCCL_PROTO_BULK, "%zu B: bulk (LL crosses as many lines or more)",
          bulk_sizes[i]);
  /* Where a line crossing is nearly free and copies are slow, the extra copies decide. */
  check(proto(0.001, 0.001, 8) == DCCL_PROTO_BULK, "8 B with free crossings and slow copies: bulk");
  printf("test_tune_proto: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
