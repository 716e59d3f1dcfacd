/* The proxy thread's loop: work while there is work, then spin, yield, and finally sleep on the descriptors. */
#define _GNU_SOURCE /* pthread_setname_np, ppoll */
#include "proxy/proxy.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/params.h"

/* The longest sleep between looks at the stop flag when nothing wakes the thread. */
#define PROXY_SLEEP_MS 1000

static void sleep_until_woken(struct dccl_proxy *p) {
  atomic_store(&p->sleeping, 1);
  atomic_thread_fence(memory_order_seq_cst); /* ordered before arm()'s re-check of the work (see wake) */
  if (!p->ops->arm(p->arg) && !atomic_load(&p->stop)) {
    struct pollfd fds[2] = {{.fd = p->wake_fd, .events = POLLIN}, {.fd = p->sleep_fd, .events = POLLIN}};
    int bound = atomic_load_explicit(&p->max_sleep_us, memory_order_relaxed);
    int64_t us = bound > 0 ? bound : PROXY_SLEEP_MS * 1000ll;
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    (void)ppoll(fds, p->sleep_fd >= 0 ? 2 : 1, &ts, NULL);
  }
  atomic_store(&p->sleeping, 0);
  uint64_t v;
  while (read(p->wake_fd, &v, sizeof(v)) == (ssize_t)sizeof(v)) {
  }
  if (p->ops->drain) p->ops->drain(p->arg);
}

static void *proxy_main(void *arg) {
  struct dccl_proxy *p = arg;
  (void)pthread_setname_np(pthread_self(), DCCL_PROXY_THREAD_NAME);
  uint64_t spin_param = (uint64_t)dccl_param_int(DCCL_PARAM_SPIN_NS), spin_ns = 0;
  uint64_t yield_ns = (uint64_t)dccl_param_int(DCCL_PARAM_YIELD_NS);
  int64_t idle_since = 0;
  while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
    if (p->ops->progress(p->arg) > 0) {
      idle_since = 0;
      continue;
    }
    int64_t now = dccl_now_ns();
    if (!idle_since) {
      idle_since = now;
      spin_ns = atomic_load_explicit(&p->oversubscribed, memory_order_relaxed) ? 0 : spin_param;
    }
    uint64_t idle = (uint64_t)(now - idle_since);
    if (idle < spin_ns) continue;
    if (idle < yield_ns) {
      sched_yield();
      continue;
    }
    sleep_until_woken(p);
    idle_since = 0;
  }
  return NULL;
}

ncclResult_t dccl_proxy_start(struct dccl_proxy *p, const struct dccl_proxy_ops *ops, void *arg, int sleep_fd,
                              int oversubscribed, int max_sleep_us) {
  memset(p, 0, sizeof(*p));
  p->max_sleep_us = max_sleep_us;
  p->ops = ops;
  p->arg = arg;
  p->sleep_fd = sleep_fd;
  p->oversubscribed = oversubscribed;
  p->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (p->wake_fd < 0) return dccl_error(ncclSystemError, "proxy: eventfd failed: %s", strerror(errno));
  int err = pthread_create(&p->thread, NULL, proxy_main, p);
  if (err) {
    close(p->wake_fd);
    p->wake_fd = -1;
    return dccl_error(ncclSystemError, "proxy: cannot start a thread: %s", strerror(err));
  }
  p->started = 1;
  return ncclSuccess;
}

void dccl_proxy_set_max_sleep_us(struct dccl_proxy *p, int max_sleep_us) {
  atomic_store_explicit(&p->max_sleep_us, max_sleep_us, memory_order_relaxed);
}

void dccl_proxy_set_oversubscribed(struct dccl_proxy *p, int oversubscribed) {
  atomic_store_explicit(&p->oversubscribed, oversubscribed, memory_order_relaxed);
}

void dccl_proxy_wake(struct dccl_proxy *p) {
  atomic_thread_fence(memory_order_seq_cst); /* the caller's published work before the look at `sleeping` */
  if (atomic_load_explicit(&p->sleeping, memory_order_relaxed)) {
    uint64_t one = 1;
    (void)!write(p->wake_fd, &one, sizeof(one));
  }
}

void dccl_proxy_stop(struct dccl_proxy *p) {
  if (!p->started) return;
  atomic_store(&p->stop, 1);
  uint64_t one = 1;
  (void)!write(p->wake_fd, &one, sizeof(one));
  pthread_join(p->thread, NULL);
  close(p->wake_fd);
  p->started = 0;
}
