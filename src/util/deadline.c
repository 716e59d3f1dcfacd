/* Deadlines (CLOCK_MONOTONIC ns) and the abort flag, as every blocking socket wait checks them. */
#include "util/deadline.h"

#include "util/clock.h"
#include "util/error.h"

int64_t dccl_deadline_after_s(int64_t seconds) {
  return seconds > 0 ? dccl_now_ns() + seconds * 1000000000ll : 0;
}

int dccl_wait_state(_Atomic int *abort_flag, int64_t deadline_ns) {
  if (abort_flag && atomic_load_explicit(abort_flag, memory_order_acquire)) return DCCL_WAIT_ABORTED;
  if (deadline_ns && dccl_now_ns() >= deadline_ns) return DCCL_WAIT_TIMED_OUT;
  return DCCL_WAIT_OK;
}

ncclResult_t dccl_wait_check(_Atomic int *abort_flag, int64_t deadline_ns, const char *what) {
  switch (dccl_wait_state(abort_flag, deadline_ns)) {
    case DCCL_WAIT_ABORTED:
      return dccl_error(ncclRemoteError, "socket: aborted while %s", what);
    case DCCL_WAIT_TIMED_OUT:
      return dccl_error(ncclRemoteError, "socket: timed out while %s", what);
    default:
      return ncclSuccess;
  }
}

int dccl_poll_slice_ms(int64_t deadline_ns) {
  if (!deadline_ns) return DCCL_POLL_SLICE_MS;
  int64_t left_ms = (deadline_ns - dccl_now_ns()) / 1000000 + 1;
  if (left_ms < 0) return 0;
  return left_ms < DCCL_POLL_SLICE_MS ? (int)left_ms : DCCL_POLL_SLICE_MS;
}
