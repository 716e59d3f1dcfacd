/* The ring of kernel launches a stall report reads (collectives/device/launch_notes.h): the oldest launch whose
 * CTAs have not all finished is named, with the time since the later of its launch and the last progress (any
 * change in the finished count); the 32-bit counts wrap; a ring that overflows forgets the oldest launches. */
#include <stdio.h>

#include "unit_check.h"

#ifdef DCCL_HAVE_DEVICE_CODE
#include "collectives/device/launch_notes.h"

#define MS 1000000ll

static struct dccl_slot_header call(uint64_t seq) { return (struct dccl_slot_header){.seq = seq, .kind = 1}; }

static void basics(void) {
  struct dccl_launch_notes n;
  dccl_launch_notes_init(&n);
  struct dccl_slot_header got;
  int64_t idle = -1;
  check(!dccl_launch_notes_stalled(&n, 0, 10 * MS, &got, &idle), "no launch: nothing stalls");
  /* Launch #0 of 4 CTAs at 100 ms (ticket 4), #1 of 2 CTAs at 110 ms (ticket 6). */
  struct dccl_slot_header c0 = call(0), c1 = call(1);
  dccl_launch_notes_add(&n, 4, 100 * MS, &c0);
  dccl_launch_notes_add(&n, 6, 110 * MS, &c1);
  int found = dccl_launch_notes_stalled(&n, 0, 200 * MS, &got, &idle);
  check(found && got.seq == 0 && idle == 100 * MS, "nothing done: #0 is named, idle since its launch (seq %llu, "
        "idle %lld ms)", (unsigned long long)got.seq, (long long)(idle / MS));
  found = dccl_launch_notes_stalled(&n, 3, 250 * MS, &got, &idle);
  check(found && got.seq == 0 && idle == 0, "a CTA finished: progress now (idle %lld ms)", (long long)(idle / MS));
  found = dccl_launch_notes_stalled(&n, 3, 400 * MS, &got, &idle);
  check(found && got.seq == 0 && idle == 150 * MS, "no change since: idle 150 ms (got %lld)",
        (long long)(idle / MS));
  found = dccl_launch_notes_stalled(&n, 4, 500 * MS, &got, &idle);
  check(found && got.seq == 1, "#0 done: #1 is named (seq %llu)", (unsigned long long)got.seq);
  check(!dccl_launch_notes_stalled(&n, 6, 600 * MS, &got, &idle), "both done: nothing stalls");
  /* The monitor reads its clock, then a launch is noted before it takes the lock: the launch is newer than now. */
  struct dccl_slot_header c2 = call(2);
  dccl_launch_notes_add(&n, 8, 700 * MS, &c2);
  found = dccl_launch_notes_stalled(&n, 6, 650 * MS, &got, &idle);
  check(found && got.seq == 2 && idle == 0, "a launch after the clock was read: idle 0, not negative (%lld ns)",
        (long long)idle);
  dccl_launch_notes_destroy(&n);
}

static void wrap_and_overflow(void) {
  struct dccl_launch_notes n;
  dccl_launch_notes_init(&n);
  struct dccl_slot_header got;
  int64_t idle;
  uint32_t ticket = 0xfffffffeu; /* the counts wrap through zero */
  for (uint64_t i = 0; i < DCCL_LAUNCH_NOTES + 8; i++) {
    ticket += 1;
    struct dccl_slot_header c = call(i);
    dccl_launch_notes_add(&n, ticket, (int64_t)(i + 1) * MS, &c);
  }
  /* 8 launches were forgotten: the oldest remembered is #8, ticket 0xfffffffe + 9 = 7 (wrapped). */
  int found = dccl_launch_notes_stalled(&n, 0xfffffffeu, 100 * MS, &got, &idle);
  check(found && got.seq == 8, "overflow: the oldest remembered launch is named (seq %llu, want 8)",
        (unsigned long long)got.seq);
  found = dccl_launch_notes_stalled(&n, 10, 100 * MS, &got, &idle); /* #11 has ticket 10, #12 ticket 11 */
  check(found && got.seq == 12, "past the wrap: done 10 finishes tickets up to 10 (seq %llu, want 12)",
        (unsigned long long)got.seq);
  check(!dccl_launch_notes_stalled(&n, ticket, 100 * MS, &got, &idle), "all done after the wrap");
  dccl_launch_notes_destroy(&n);
}
#endif

int main(void) {
#ifdef DCCL_HAVE_DEVICE_CODE
  basics();
  wrap_and_overflow();
  printf("test_launch_notes: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed != 0;
#else
  (void)check;
  printf("test_launch_notes: no device code in this build\n");
  return 77;
#endif
}
