/* What a stall report judges (src/core/stall_verdict.c), handed pictures of four ranks. Checked: ranks in the same
 * collective with the same call contradict nothing, whether they wait on the host, in kernels or all in the
 * meeting; different counts, roots or kinds at one sequence number are a contradiction whose text names both ranks
 * and both calls; one rank waiting in the meeting while another's kernels run the same call unmet is one too
 * ("mismatched buffers", naming which rank waits in the meeting), in either order; ranks at different sequence
 * numbers, ranks not in a call and send/recv pairs are left to the slot checks; each rank's line says where it
 * waits. */
#include <stdio.h>
#include <string.h>

#include "collectives/op.h"
#include "core/stall_verdict.h"
#include "unit_check.h"

#define N 4

static struct dccl_stall_status all[N];

/* Every rank in all-reduce #7 of 1000 floats, waiting on the host for the next rank. */
static void same_call(void) {
  for (int r = 0; r < N; r++)
    all[r] = (struct dccl_stall_status){.rank = r, .in_call = 1, .waiting_on = (r + 1) % N, .kind = DCCL_OP_ALLREDUCE,
                                        .what = 7, .root = -1, .seq = 7, .count = 1000, .stalled_ms = 1200};
}

/* The verdict's text for the picture, or "" where there is none. */
static const char *verdict(struct dccl_stall_status pair[2]) {
  static char text[400];
  text[0] = 0;
  if (dccl_stall_contradiction(all, N, pair)) dccl_stall_verdict_text(pair, text, sizeof(text));
  return text;
}

int main(void) {
  struct dccl_stall_status pair[2];
  same_call();
  check(!dccl_stall_contradiction(all, N, pair), "the same call on every rank, host waits: no contradiction");
  for (int r = 0; r < N; r++) all[r].on_device = 1;
  check(!dccl_stall_contradiction(all, N, pair), "the same call, all in kernels: no contradiction");
  for (int r = 0; r < N; r++) all[r].on_device = 2;
  check(!dccl_stall_contradiction(all, N, pair), "the same call, all waiting in the meeting: no contradiction");

  same_call();
  all[2].count = 1003;
  const char *text = verdict(pair);
  check(strstr(text, "mismatched calls") && strstr(text, "rank 0") && strstr(text, "rank 2") &&
            strstr(text, "1000") && strstr(text, "1003") && dccl_stall_same_collective(pair),
        "different counts: \"%s\"", text);
  same_call();
  all[1].kind = DCCL_OP_BROADCAST;
  text = verdict(pair);
  check(strstr(text, "mismatched operations") && strstr(text, "ncclBroadcast"), "different kinds: \"%s\"", text);

  /* Rank 3 waits in the meeting, rank 1's kernels run the same call: the rest are in kernels too. */
  same_call();
  for (int r = 0; r < N; r++) all[r].on_device = 1;
  all[3].on_device = 2;
  text = verdict(pair);
  check(strstr(text, "mismatched buffers") && strstr(text, "rank 3 waits in the ranks' meeting") &&
            strstr(text, "rank 0's kernels") && strstr(text, "ncclCommRegister"),
        "one rank in the meeting, the others' kernels unmet: \"%s\"", text);
  all[3].on_device = 1;
  all[0].on_device = 2; /* the other order: the meeting's rank first */
  text = verdict(pair);
  check(strstr(text, "rank 0 waits in the ranks' meeting") && strstr(text, "rank 1's kernels"),
        "the meeting's rank first: \"%s\"", text);
  all[0].on_device = 0; /* a host wait beside kernels: no meeting, nothing said */
  check(!dccl_stall_contradiction(all, N, pair), "a host wait beside kernels of the same call: no contradiction");

  same_call();
  all[2].seq = 8;
  all[2].count = 5;
  check(!dccl_stall_contradiction(all, N, pair), "different sequence numbers: left to the slot checks");
  same_call();
  all[1].in_call = 0;
  all[1].count = 5;
  check(!dccl_stall_contradiction(all, N, pair), "a rank not in a call: no contradiction");
  same_call();
  all[0].kind = DCCL_OP_SEND;
  all[1].kind = DCCL_OP_RECV;
  all[0].count = 5;
  check(!dccl_stall_contradiction(all, N, pair), "a send and a receive: left to the slot checks");

  char line[256];
  same_call();
  all[1].on_device = 2;
  dccl_stall_describe(&all[1], line, sizeof(line));
  check(strstr(line, "rank 1: in ncclAllReduce #7") && strstr(line, "in the meeting"), "the meeting's line: \"%s\"",
        line);
  all[1].on_device = 1;
  dccl_stall_describe(&all[1], line, sizeof(line));
  check(strstr(line, "in kernels") != NULL, "the kernels' line: \"%s\"", line);
  all[1].in_call = -1;
  dccl_stall_describe(&all[1], line, sizeof(line));
  check(strstr(line, "no answer") != NULL, "a rank that did not answer: \"%s\"", line);

  printf("test_stall_verdict: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
