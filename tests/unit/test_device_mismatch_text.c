/* What ncclGetLastError says when a kernel recorded a mismatch (collectives/executor.c,
 * dccl_describe_device_mismatch): other operations on the link, other calls (count, type, reduction, root), other
 * bytes of one call's step, and the same step in the other protocol (ranks given different DCCL_PROTO). */
#include <string.h>

#include "collectives/op.h"
#include "unit_check.h"

static struct dccl_slot_header all_reduce(uint64_t count) {
  struct dccl_slot_header h = {.bytes = count * 4, .seq = 7, .kind = DCCL_OP_ALLREDUCE, .count = count,
                               .what = ((uint32_t)ncclFloat32 + 1) | (uint32_t)(ncclSum + 1) << 8, .root = -1};
  return h;
}

static void expect(const struct dccl_slot_header *want, const struct dccl_slot_header *got, const char *const *parts,
                   const char *what) {
  char text[512];
  dccl_describe_device_mismatch(want, got, 1, 0, text, sizeof(text));
  for (int i = 0; parts[i]; i++) check(strstr(text, parts[i]) != NULL, "%s: \"%s\" lacks \"%s\"", what, text, parts[i]);
}

int main(void) {
  struct dccl_slot_header want = all_reduce(200), got = all_reduce(300);
  expect(&want, &got,
         (const char *const[]){"mismatched calls", "rank 1 called ncclAllReduce with 300 x float32 sum",
                               "rank 0 with 200 x float32 sum", NULL},
         "other counts");
  got = all_reduce(200);
  got.kind = DCCL_OP_BROADCAST;
  got.root = 0;
  expect(&want, &got,
         (const char *const[]){"mismatched operations", "rank 1", "it sent ncclBroadcast", "expects ncclAllReduce",
                               NULL},
         "other operations");
  got = all_reduce(200);
  got.seq = 8;
  expect(&want, &got, (const char *const[]){"mismatched operations", "operation 8", "operation 7", NULL},
         "other sequence numbers");
  got = all_reduce(200);
  got.bytes = 400;
  expect(&want, &got, (const char *const[]){"rank 1 sent 400 bytes where rank 0 expects 800", NULL}, "other bytes");
  got = all_reduce(200);
  expect(&want, &got,
         (const char *const[]){"ranks 1 and 0 sent the same step in different protocols", "DCCL_PROTO", NULL},
         "the same step in the other protocol");
  printf("test_device_mismatch_text: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
