/* A proxy thread: progresses a transport's links for the threads that issue operations (and, with device
 * buffers, for GPU kernels, which cannot call a NIC's API). It spins and yields while work moves, then sleeps
 * until a notification descriptor (e.g. a completion channel) is readable or dccl_proxy_wake() is called, so an
 * idle communicator costs no CPU. */
#ifndef DCCL_PROXY_H_
#define DCCL_PROXY_H_

#include <pthread.h>
#include <stdatomic.h>

#include "dccl.h"

struct dccl_proxy_ops {
  int (*progress)(void *arg); /* one round of work; returns how many things moved (0: idle) */
  int (*arm)(void *arg);      /* before sleeping: request notifications; returns 1 if work appeared meanwhile */
  void (*drain)(void *arg);   /* after waking: consume the notifications */
};

struct dccl_proxy {
  pthread_t thread;
  int started;
  _Atomic int stop;
  _Atomic int sleeping;
  int wake_fd;  /* eventfd */
  int sleep_fd; /* the transport's notification descriptor, or -1 */
  _Atomic int oversubscribed; /* no spinning: the cores are needed by the ranks */
  _Atomic int max_sleep_us;   /* > 0: an idle thread looks again after this long even if nothing woke it */
  const struct dccl_proxy_ops *ops;
  void *arg;
};

/* max_sleep_us > 0 bounds each sleep, for work that arrives without a wake (a kernel writing host memory). */
ncclResult_t dccl_proxy_start(struct dccl_proxy *p, const struct dccl_proxy_ops *ops, void *arg, int sleep_fd,
                              int oversubscribed, int max_sleep_us);
/* The thread is named DCCL_PROXY_THREAD_NAME (/proc/self/task/TID/comm), so tools and tests can tell it apart. */
#define DCCL_PROXY_THREAD_NAME "dccl-proxy"
/* Bounds each later sleep (0: only a wake, or a second, ends it). Any thread. */
void dccl_proxy_set_max_sleep_us(struct dccl_proxy *p, int max_sleep_us);
/* Whether the proxy may spin while idle; read when it next falls idle. Any thread. */
void dccl_proxy_set_oversubscribed(struct dccl_proxy *p, int oversubscribed);
/* Makes a sleeping proxy look at its work again; costs a load when it is awake. Any thread. */
void dccl_proxy_wake(struct dccl_proxy *p);
/* Stops and joins the thread (no-op if never started). */
void dccl_proxy_stop(struct dccl_proxy *p);

#endif
