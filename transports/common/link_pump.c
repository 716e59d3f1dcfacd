/* The link pump (transports/link_pump.h): one proxy thread per owner, progressing every link added to it. */
#include "transports/link_pump.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "proxy/proxy.h"
#include "util/clock.h"
#include "util/error.h"

struct dccl_link_pump {
  struct dccl_proxy proxy;
  struct dccl_link_pump_hooks hooks;
  int poll_us, oversubscribed;
  _Atomic int replays;  /* work may start unannounced: sleeps are bounded by poll_us */
  pthread_mutex_t lock; /* guards links and n: add() may run while the thread progresses */
  struct dccl_conn **links;
  int n, cap;
  int failed; /* a link broke and was reported: the pump moves nothing more */
};

/* The counter this side's transport advances as bytes move: a send side's head, a receive side's tail. */
static uint64_t moved_counter(const struct dccl_conn *c) {
  return dccl_ld_acquire_u64(c->is_send ? dccl_conn_head(c) : dccl_conn_tail(c));
}

/* One pass over the links; returns how many moved, or -1 when one broke (its error is the thread's last). */
static int pass(struct dccl_link_pump *p, ncclResult_t *res) {
  int moved = 0;
  pthread_mutex_lock(&p->lock);
  for (int i = 0; i < p->n && *res == ncclSuccess; i++) {
    struct dccl_conn *c = p->links[i];
    uint64_t before = moved_counter(c);
    *res = c->transport->progress(c);
    moved += moved_counter(c) != before;
  }
  pthread_mutex_unlock(&p->lock);
  return *res == ncclSuccess ? moved : -1;
}

static int pump_progress(void *arg) {
  struct dccl_link_pump *p = arg;
  if (p->failed) return 0;
  if (p->hooks.gave_up && p->hooks.gave_up(p->hooks.arg)) {
    p->failed = 1;
    return 0;
  }
  ncclResult_t res = ncclSuccess;
  int moved = pass(p, &res);
  if (moved >= 0) return moved;
  p->failed = 1;
  p->hooks.failed(p->hooks.arg, res); /* outside the lock: it aborts every link of the owner */
  return 0;
}

/* 1 when a send link holds slots that have not all left (its socket was full): a peer's kernel may wait for them,
 * and nothing will wake the pump when the socket drains. */
static int sends_pending(struct dccl_link_pump *p) {
  int pending = 0;
  pthread_mutex_lock(&p->lock);
  for (int i = 0; i < p->n && !pending; i++)
    pending = p->links[i]->is_send && !p->links[i]->transport->send_flushed(p->links[i]);
  pthread_mutex_unlock(&p->lock);
  return pending;
}

/* Before sleeping: stay awake while the owner's kernels run (they may fill a slot at any moment); sleep at most
 * poll_us while kernels may start unannounced (graphs) or sends wait for room; else until a launch wakes it. */
static int pump_arm(void *arg) {
  struct dccl_link_pump *p = arg;
  if (p->failed) return 0;
  if (p->hooks.busy && p->hooks.busy(p->hooks.arg)) return 1;
  int bounded = atomic_load(&p->replays) || sends_pending(p);
  dccl_proxy_set_max_sleep_us(&p->proxy, bounded ? p->poll_us : 0);
  return 0;
}

static const struct dccl_proxy_ops pump_ops = {.progress = pump_progress, .arm = pump_arm};

ncclResult_t dccl_link_pump_create(struct dccl_link_pump **out, const struct dccl_link_pump_hooks *hooks, int poll_us,
                                   int oversubscribed) {
  struct dccl_link_pump *p = calloc(1, sizeof(*p));
  if (!p) return dccl_error(ncclSystemError, "out of memory for a link pump");
  p->hooks = *hooks;
  p->poll_us = poll_us > 0 ? poll_us : 1;
  p->oversubscribed = oversubscribed;
  pthread_mutex_init(&p->lock, NULL);
  *out = p;
  return ncclSuccess;
}

ncclResult_t dccl_link_pump_add(struct dccl_link_pump *p, struct dccl_conn *c) {
  pthread_mutex_lock(&p->lock);
  if (p->n == p->cap) {
    int ncap = p->cap ? 2 * p->cap : 16;
    struct dccl_conn **links = realloc(p->links, (size_t)ncap * sizeof(*links));
    if (!links) {
      pthread_mutex_unlock(&p->lock);
      return dccl_error(ncclSystemError, "out of memory adding a link to the pump");
    }
    p->links = links;
    p->cap = ncap;
  }
  p->links[p->n++] = c;
  ncclResult_t res = ncclSuccess; /* the first link starts the thread, under the lock: adds may race */
  if (!p->proxy.started) res = dccl_proxy_start(&p->proxy, &pump_ops, p, -1, p->oversubscribed, 0);
  pthread_mutex_unlock(&p->lock);
  if (res == ncclSuccess) dccl_proxy_wake(&p->proxy);
  return res;
}

void dccl_link_pump_kick(struct dccl_link_pump *p) {
  if (p && p->proxy.started) dccl_proxy_wake(&p->proxy);
}

void dccl_link_pump_expect_replays(struct dccl_link_pump *p) {
  if (atomic_exchange(&p->replays, 1)) return;
  dccl_link_pump_kick(p); /* a sleep begun before has no bound: end it, the next one takes the bound */
}

static int all_flushed(struct dccl_link_pump *p) {
  for (int i = 0; i < p->n; i++)
    if (p->links[i]->is_send && !p->links[i]->transport->send_flushed(p->links[i])) return 0;
  return 1;
}

void dccl_link_pump_free(struct dccl_link_pump *p, double flush_s, _Atomic int *abort_flag) {
  if (!p) return;
  dccl_proxy_stop(&p->proxy);
  int64_t deadline = dccl_now_ns() + (int64_t)(flush_s * 1e9);
  ncclResult_t res = ncclSuccess;
  while (!p->failed && !atomic_load(abort_flag) && !all_flushed(p) && dccl_now_ns() < deadline) {
    if (pass(p, &res) < 0) break; /* the peer is gone: nothing more can leave */
    if (res == ncclSuccess) sched_yield();
  }
  pthread_mutex_destroy(&p->lock);
  free(p->links);
  free(p);
}
