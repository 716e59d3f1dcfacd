/* Liveness: a thread per rank sleeps in poll() on the monitor connections (rank 0: one per other rank; the
 * others: the one to rank 0) plus an eventfd that stops it. Rank 0 turns an EOF without goodbye into a death
 * notice for everyone; the others learn deaths from rank 0 or conclude rank 0 died when it vanishes.
 * The same threads run stall reports (bootstrap.h): a second eventfd carries a waiting thread's request; rank 0
 * collects every rank's status for at most STALL_COLLECT_NS, then judges. A third eventfd wakes it to call the
 * hooks' tick, which may ask to be called again after a while. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "util/clock.h"
#include "util/error.h"

/* Per watched connection: partial message bytes, and whether the far side left on purpose or is gone. */
struct monitor_watch {
  int rank; /* the rank at the far end */
  int fd;
  int departed, gone;
  size_t have;
  struct dccl_monitor_msg msg;
};

static void report_death(struct dccl_bootstrap *b, int dead_rank) {
  if (atomic_load(&b->said_goodbye)) return; /* we are leaving; others leaving too is no failure */
  int expected = 0;
  if (!atomic_compare_exchange_strong(&b->death_reported, &expected, 1)) return;
  DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rank %d: rank %d died", b->rank, dead_rank);
  b->on_death(b->on_death_arg, dead_rank);
}

#define NFIXED 3 /* poll entries before the connections: stop, ask, wake */
#define STALL_COLLECT_NS 1000000000ll /* a rank whose monitor thread has not answered by then is reported silent */

/* Small message on a monitor connection; never blocks (a full buffer means the peer is not listening anyway). */
static void monitor_send_msg(struct dccl_bootstrap *b, int fd, const struct dccl_monitor_msg *m) {
  pthread_mutex_lock(&b->monitor_send_lock);
  ssize_t n;
  do n = send(fd, m, sizeof(*m), MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  pthread_mutex_unlock(&b->monitor_send_lock);
}
static void monitor_send(struct dccl_bootstrap *b, int fd, uint32_t type, int rank) {
  struct dccl_monitor_msg m = {.type = type, .rank = rank};
  monitor_send_msg(b, fd, &m);
}

/* Rank 0's stall report in progress. */
struct stall_round {
  int active, nhave;
  int64_t deadline_ns;
  struct dccl_stall_status *got;
  char *have;
};

static void round_start(struct dccl_bootstrap *b, struct stall_round *r, struct monitor_watch *w, int nw) {
  if (r->active || !b->stall.status) return;
  r->active = 1;
  memset(r->have, 0, (size_t)b->nranks);
  b->stall.status(b->stall.arg, &r->got[0]);
  r->got[0].rank = 0;
  r->have[0] = 1;
  r->nhave = 1;
  r->deadline_ns = dccl_now_ns() + STALL_COLLECT_NS;
  for (int i = 0; i < nw; i++)
    if (!w[i].gone && !w[i].departed) monitor_send(b, w[i].fd, DCCL_MON_STATUS_REQ, 0);
}

/* Every rank answered, or the time is up: judge, and tell everyone about a contradiction. */
static void round_finish(struct dccl_bootstrap *b, struct stall_round *r, struct monitor_watch *w, int nw) {
  for (int k = 0; k < b->nranks; k++)
    if (!r->have[k]) r->got[k] = (struct dccl_stall_status){.rank = k, .in_call = -1, .waiting_on = -1};
  struct dccl_monitor_msg m = {.type = DCCL_MON_VERDICT};
  if (b->stall.judge(b->stall.arg, r->got, b->nranks, m.st)) {
    for (int i = 0; i < nw; i++)
      if (!w[i].gone && !w[i].departed) monitor_send_msg(b, w[i].fd, &m);
    b->stall.verdict(b->stall.arg, m.st);
  }
  r->active = 0;
}

/* Rank 0: tells every other rank still present that `dead` died. */
static void broadcast_death(struct dccl_bootstrap *b, struct monitor_watch *w, int nw, int dead) {
  for (int i = 0; i < nw; i++)
    if (!w[i].gone && !w[i].departed) monitor_send(b, w[i].fd, DCCL_MON_DEATH, dead);
}

/* Reads what arrived on one watched connection and acts on it. */
static void handle_readable(struct dccl_bootstrap *b, struct monitor_watch *w, int nw, int i, struct stall_round *r) {
  struct monitor_watch *x = &w[i];
  for (;;) {
    ssize_t n = recv(x->fd, (char *)&x->msg + x->have, sizeof(x->msg) - x->have, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      x->gone = 1;
      if (x->departed) return;
      report_death(b, x->rank);
      if (b->rank == 0) broadcast_death(b, w, nw, x->rank);
      return;
    }
    x->have += (size_t)n;
    if (x->have < sizeof(x->msg)) continue;
    x->have = 0;
    if (x->msg.type == DCCL_MON_GOODBYE) {
      x->departed = 1;
    } else if (x->msg.type == DCCL_MON_DEATH && b->rank != 0 && x->msg.rank >= 0 && x->msg.rank < b->nranks) {
      report_death(b, x->msg.rank);
    } else if (x->msg.type == DCCL_MON_STALL_ASK && b->rank == 0) {
      round_start(b, r, w, nw);
    } else if (x->msg.type == DCCL_MON_STATUS_REQ && b->rank != 0 && b->stall.status) {
      struct dccl_monitor_msg m = {.type = DCCL_MON_STATUS, .rank = b->rank};
      b->stall.status(b->stall.arg, &m.st[0]);
      m.st[0].rank = b->rank;
      monitor_send_msg(b, x->fd, &m);
    } else if (x->msg.type == DCCL_MON_STATUS && b->rank == 0 && r->active && x->rank > 0 && !r->have[x->rank]) {
      r->got[x->rank] = x->msg.st[0];
      r->got[x->rank].rank = x->rank;
      r->have[x->rank] = 1;
      r->nhave++;
    } else if (x->msg.type == DCCL_MON_VERDICT && b->rank != 0 && b->stall.verdict) {
      b->stall.verdict(b->stall.arg, x->msg.st);
    } else if (x->msg.type == DCCL_MON_VERDICT_UP && b->rank == 0 && b->stall.verdict) {
      x->msg.type = DCCL_MON_VERDICT;
      for (int k = 0; k < nw; k++)
        if (!w[k].gone && !w[k].departed) monitor_send_msg(b, w[k].fd, &x->msg);
      b->stall.verdict(b->stall.arg, x->msg.st);
    } else if (x->msg.type != DCCL_MON_STATUS) { /* a late answer to a finished round is dropped */
      DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rank %d: unexpected monitor message %u from rank %d", b->rank, x->msg.type,
                x->rank);
    }
  }
}

static void *monitor_main(void *arg) {
  struct dccl_bootstrap *b = arg;
  int nw = 0;
  struct monitor_watch *w = calloc((size_t)b->nmonitor, sizeof(*w));
  struct pollfd *pfds = calloc((size_t)b->nmonitor + NFIXED, sizeof(*pfds));
  struct stall_round r = {.got = calloc((size_t)b->nranks, sizeof(*r.got)), .have = calloc((size_t)b->nranks, 1)};
  if (!w || !pfds || !r.got || !r.have) {
    DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rank %d: out of memory; liveness monitor not running", b->rank);
    free(w);
    free(pfds);
    free(r.got);
    free(r.have);
    return NULL;
  }
  for (int i = 0; i < b->nmonitor; i++) {
    if (b->monitor_fds[i] < 0) continue;
    w[nw].rank = b->rank == 0 ? i : 0;
    w[nw].fd = b->monitor_fds[i];
    nw++;
  }
  int tick_ms = b->stall.tick ? b->stall.tick(b->stall.arg) : -1;
  for (;;) {
    pfds[0] = (struct pollfd){.fd = b->stop_fd, .events = POLLIN};
    pfds[1] = (struct pollfd){.fd = b->ask_fd, .events = POLLIN};
    pfds[2] = (struct pollfd){.fd = b->wake_fd, .events = POLLIN};
    for (int i = 0; i < nw; i++)
      pfds[i + NFIXED] = (struct pollfd){.fd = w[i].gone ? -1 : w[i].fd, .events = POLLIN};
    /* No timeout unless a report is being collected or the tick asked for one: the thread costs nothing until a
     * peer speaks, vanishes, a wait asks for a report, work is launched, or we are stopped. */
    int timeout_ms = r.active ? (int)((r.deadline_ns - dccl_now_ns()) / 1000000 + 1) : -1;
    if (r.active && timeout_ms < 0) timeout_ms = 0;
    if (tick_ms >= 0 && (timeout_ms < 0 || tick_ms < timeout_ms)) timeout_ms = tick_ms;
    int n = poll(pfds, (nfds_t)nw + NFIXED, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rank %d: monitor poll failed: %s", b->rank, strerror(errno));
      break;
    }
    if (pfds[0].revents) break;
    if (pfds[1].revents) {
      uint64_t asks;
      if (read(b->ask_fd, &asks, sizeof(asks)) < 0 && errno != EAGAIN) break;
      if (b->rank == 0)
        round_start(b, &r, w, nw);
      else if (nw > 0 && !w[0].gone)
        monitor_send(b, w[0].fd, DCCL_MON_STALL_ASK, b->rank);
    }
    if (pfds[2].revents) {
      uint64_t wakes;
      if (read(b->wake_fd, &wakes, sizeof(wakes)) < 0 && errno != EAGAIN) break;
    }
    if (b->stall.tick) tick_ms = b->stall.tick(b->stall.arg);
    for (int i = 0; i < nw; i++)
      if (!w[i].gone && pfds[i + NFIXED].revents) handle_readable(b, w, nw, i, &r);
    if (r.active && (r.nhave == b->nranks || dccl_now_ns() >= r.deadline_ns)) round_finish(b, &r, w, nw);
  }
  free(w);
  free(pfds);
  free(r.got);
  free(r.have);
  return NULL;
}

ncclResult_t dccl_bootstrap_monitor_start(struct dccl_bootstrap *b, void (*on_death)(void *arg, int dead_rank),
                                          void *arg) {
  if (!b || !on_death) return dccl_error(ncclInvalidArgument, "bootstrap monitor: NULL argument");
  if (b->creator_pid != getpid())
    return dccl_error(ncclInvalidUsage, "bootstrap monitor: bootstrap was created before fork()");
  if (b->monitor_running) return dccl_error(ncclInvalidUsage, "bootstrap monitor: already running");
  b->on_death = on_death;
  b->on_death_arg = arg;
  b->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (b->stop_fd < 0) return dccl_error(ncclSystemError, "eventfd failed: %s", strerror(errno));
  b->ask_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (b->ask_fd < 0) return dccl_error(ncclSystemError, "eventfd failed: %s", strerror(errno));
  b->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (b->wake_fd < 0) return dccl_error(ncclSystemError, "eventfd failed: %s", strerror(errno));
  int err = pthread_create(&b->monitor_thread, NULL, monitor_main, b);
  if (err != 0) {
    close(b->stop_fd);
    b->stop_fd = -1;
    return dccl_error(ncclSystemError, "could not start the monitor thread: %s", strerror(err));
  }
  b->monitor_running = 1;
  return ncclSuccess;
}

void dccl_bootstrap_set_stall_hooks(struct dccl_bootstrap *b, const struct dccl_stall_hooks *hooks) {
  b->stall = *hooks;
}

/* Bumps one of the monitor thread's eventfds, from any thread of the process that runs it. */
static void signal_monitor(struct dccl_bootstrap *b, int fd) {
  if (!b->monitor_running || b->creator_pid != getpid() || fd < 0) return;
  uint64_t one = 1;
  ssize_t n;
  do n = write(fd, &one, sizeof(one));
  while (n < 0 && errno == EINTR);
}

void dccl_bootstrap_ask_stall_report(struct dccl_bootstrap *b) {
  if (b) signal_monitor(b, b->ask_fd);
}

void dccl_bootstrap_wake_monitor(struct dccl_bootstrap *b) {
  if (b) signal_monitor(b, b->wake_fd);
}

void dccl_bootstrap_send_verdict(struct dccl_bootstrap *b, const struct dccl_stall_status pair[2]) {
  if (!b || !b->monitor_running || b->creator_pid != getpid()) return;
  struct dccl_monitor_msg m = {.type = b->rank == 0 ? DCCL_MON_VERDICT : DCCL_MON_VERDICT_UP, .rank = b->rank};
  memcpy(m.st, pair, sizeof(m.st));
  for (int i = 0; i < b->nmonitor; i++)
    if (b->monitor_fds[i] >= 0) monitor_send_msg(b, b->monitor_fds[i], &m);
}

void dccl_bootstrap_say_goodbye(struct dccl_bootstrap *b) {
  /* A forked child must not speak for its parent's rank. */
  if (!b || b->creator_pid != getpid()) return;
  atomic_store(&b->said_goodbye, 1);
  for (int i = 0; i < b->nmonitor; i++)
    if (b->monitor_fds[i] >= 0) monitor_send(b, b->monitor_fds[i], DCCL_MON_GOODBYE, b->rank);
}

void dccl_bootstrap_stop_monitor(struct dccl_bootstrap *b) {
  /* In a forked child the thread does not exist, and the eventfd is shared with the parent: leave both alone. */
  if (!b->monitor_running || b->creator_pid != getpid()) return;
  uint64_t one = 1;
  ssize_t n;
  do n = write(b->stop_fd, &one, sizeof(one));
  while (n < 0 && errno == EINTR);
  pthread_join(b->monitor_thread, NULL);
  b->monitor_running = 0;
}
