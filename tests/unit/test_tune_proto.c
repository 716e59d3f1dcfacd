/* The cost model's protocol choice (src/tune/tune.c): LL only where its slot moves fewer 128-byte pairs than bulk's,
 * which on the host layout it never does; anything larger than an LL slot is bulk. */
#include <stdlib.h>

#include "tune/tune.h"
#include "unit_check.h"

static int proto(double alpha_ns, double bw, size_t bytes) {
  struct dccl_coll_comm c = {.nranks = 2, .alpha_ns = alpha_ns, .bw_bytes_per_ns = bw};
  return dccl_tune_proto(&c, DCCL_OP_ALLREDUCE, bytes);
}

int main(void) {
  unsetenv("DCCL_PROTO"); /* the model, not a forced choice */
  /* This VM: a step about 0.5 us, memcpy about 5 GB/s. A bulk slot's head and first payload bytes share a
   * 128-byte pair, so LL never moves fewer pairs and costs its copies: bulk everywhere. */
  size_t sizes[] = {0, 4, 8, 16, 64, 512, 4096, 4097, 1 << 20};
  for (int i = 0; i < 9; i++)
    check(proto(500, 5, sizes[i]) == DCCL_PROTO_BULK, "%zu B: bulk (LL moves as many 128-byte pairs or more)",
          sizes[i]);
  /* Were a crossing dear and copies nearly free, a tie in pairs would still go to bulk, and LL past one pair
   * loses. */
  check(proto(1e6, 1e6, 8) == DCCL_PROTO_BULK, "8 B, dear crossings: bulk (a tie in pairs)");
  check(proto(1e6, 1e6, 100) == DCCL_PROTO_BULK, "100 B, dear crossings: bulk (LL moves two pairs)");
  printf("test_tune_proto: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
