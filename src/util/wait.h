/* How every wait in DCCL behaves: spin briefly, then yield the core, then sleep with a growing interval, so
 * eight ranks on two cores make progress and a stalled job burns little CPU. */
#ifndef DCCL_WAIT_H_
#define DCCL_WAIT_H_

#include <stdint.h>

#include "util/clock.h"

struct dccl_waiter {
  uint64_t idle_since_ns; /* when this wait began (0: not begun) */
  uint64_t sleep_ns;
  uint64_t last_check_ns;
  uint64_t spin_ns, yield_ns; /* DCCL_SPIN_NS, DCCL_YIELD_NS, read once per wait */
  unsigned rounds;            /* idle rounds while spinning; the clock is read on every 8th */
  int spinning;
};

/* oversubscribed: more ranks than cores share this host, so spinning only delays the rank being waited for. */
void dccl_waiter_init(struct dccl_waiter *w, int oversubscribed);
/* After progress: the next wait starts with spinning again. */
void dccl_waiter_reset(struct dccl_waiter *w);
/* One idle round; returns 1 when it is time for the slow checks (peer liveness, abort flags, deadline). */
int dccl_waiter_idle(struct dccl_waiter *w);

#endif
