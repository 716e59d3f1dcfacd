/* Deadlines for blocking waits: CLOCK_MONOTONIC ns, 0 meaning none, checked with an abort flag. */
#ifndef DCCL_UTIL_DEADLINE_H_
#define DCCL_UTIL_DEADLINE_H_

#include <stdatomic.h>
#include <stdint.h>

#include "dccl.h"

/* Every blocking wait wakes at least this often to look at the abort flag. */
#define DCCL_POLL_SLICE_MS 50

int64_t dccl_deadline_after_s(int64_t seconds);
enum { DCCL_WAIT_OK = 0, DCCL_WAIT_ABORTED = 1, DCCL_WAIT_TIMED_OUT = 2 };
int dccl_wait_state(_Atomic int *abort_flag, int64_t deadline_ns);
/* ncclRemoteError with a reason if the abort flag is set or the deadline passed; `what` names the wait. */
ncclResult_t dccl_wait_check(_Atomic int *abort_flag, int64_t deadline_ns, const char *what);
/* Milliseconds to pass to poll(): at most DCCL_POLL_SLICE_MS and never past the deadline. */
int dccl_poll_slice_ms(int64_t deadline_ns);

#endif
