#include "util/wait.h"

#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "util/params.h"

#define DCCL_SLEEP_MIN_NS 2000ull
#define DCCL_SLEEP_MAX_NS 1000000ull
#define DCCL_CHECK_EVERY_NS 2000000ull

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

/* The clock is read only once a wait really starts: the fast path, where every step finds its peer ready, never
 * asks for the time. */
void dccl_waiter_reset(struct dccl_waiter *w) {
  w->idle_since_ns = 0;
  w->sleep_ns = DCCL_SLEEP_MIN_NS;
  w->rounds = 0;
  w->spinning = 0;
}

/* Every call starts a waiter: the two parameters are read once (they do not change) and kept here. */
static _Atomic int64_t spin_param = -1, yield_param = -1;

void dccl_waiter_init(struct dccl_waiter *w, int oversubscribed) {
  int64_t spin = atomic_load_explicit(&spin_param, memory_order_relaxed);
  int64_t yield = atomic_load_explicit(&yield_param, memory_order_relaxed);
  if (spin < 0 || yield < 0) {
    spin = dccl_param_int(DCCL_PARAM_SPIN_NS);
    yield = dccl_param_int(DCCL_PARAM_YIELD_NS);
    atomic_store_explicit(&spin_param, spin < 0 ? 0 : spin, memory_order_relaxed);
    atomic_store_explicit(&yield_param, yield < 0 ? 0 : yield, memory_order_relaxed);
  }
  w->spin_ns = oversubscribed ? 0 : (uint64_t)spin;
  w->yield_ns = (uint64_t)yield;
  dccl_waiter_reset(w);
}

int dccl_waiter_idle(struct dccl_waiter *w) {
  /* Reading the clock costs more than polling the peer once: while spinning, read it every 8th round only, so
   * an arriving slot is noticed sooner. */
  if (w->spinning && (++w->rounds & 7u) != 0) {
    cpu_relax();
    return 0;
  }
  uint64_t now = (uint64_t)dccl_now_ns();
  if (w->idle_since_ns == 0) w->idle_since_ns = w->last_check_ns = now;
  uint64_t idle = now - w->idle_since_ns;
  w->spinning = idle < w->spin_ns;
  if (idle < w->spin_ns) {
    cpu_relax(); /* one pause: dozens of cycles on some cores, so more would delay noticing the peer */
  } else if (idle < w->yield_ns) {
    sched_yield();
  } else {
    struct timespec ts = {0, (long)w->sleep_ns};
    nanosleep(&ts, NULL);
    if (w->sleep_ns < DCCL_SLEEP_MAX_NS) w->sleep_ns *= 2;
  }
  if (now - w->last_check_ns >= DCCL_CHECK_EVERY_NS) {
    w->last_check_ns = now;
    return 1;
  }
  return 0;
}
