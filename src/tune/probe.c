/* The cost model's measurements, taken without running a collective: tokens passed around ring 0's links (every
 * rank at once, each forwarding one after it received one: one hand-off per step, as in a ring all-reduce), and a
 * memcpy of DCCL_CHUNK_SIZE blocks over a buffer larger than the caches.
 * Both are bounded in time, since creation waits for them: the tokens run up to PROBE_LAPS laps but stop after
 * PROBE_BUDGET_NS of timed steps (on an oversubscribed host a step is a trip through the scheduler, about a
 * millisecond, and 16 laps of 8 ranks took 200 ms), and the copy is measured once per process, on an
 * oversubscribed host by one rank only. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tune/tune.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/params.h"
#include "util/wait.h"

#define PROBE_COPY_BYTES (8u << 20)
#define PROBE_LAPS 16 /* timed at most; a lap is 2N-1 steps, the length of an all-reduce */
#define PROBE_BUDGET_NS 10000000ll /* timed steps stop after this long (at least N of them) */

static double measure_copy_bw(void) {
  uint64_t chunk = (uint64_t)dccl_param_int(DCCL_PARAM_CHUNK_SIZE);
  if (chunk == 0 || chunk > PROBE_COPY_BYTES) chunk = PROBE_COPY_BYTES;
  char *a = malloc(PROBE_COPY_BYTES), *b = malloc(PROBE_COPY_BYTES);
  double best = 1.0;
  if (!a || !b) goto out;
  memset(a, 1, PROBE_COPY_BYTES); /* real pages: untouched ones would all read the one zero page */
  for (int i = 0; i < 3; i++) { /* the first pass, untimed, faults b's pages in */
    uint64_t t0 = (uint64_t)dccl_now_ns();
    for (uint64_t off = 0; off + chunk <= PROBE_COPY_BYTES; off += chunk) memcpy(b + off, a + off, chunk);
    uint64_t dt = (uint64_t)dccl_now_ns() - t0;
    double bw = dt ? (double)(PROBE_COPY_BYTES - PROBE_COPY_BYTES % chunk) / (double)dt : 1.0;
    if (i > 0 && bw > best) best = bw;
  }
out:
  free(a);
  free(b);
  return best;
}

static ncclResult_t progress(struct dccl_conn *c) {
  return c->transport->moves_bytes ? c->transport->progress(c) : ncclSuccess;
}

/* Slow-path checks while no token moves: an abort, or the peer waited for gone. */
static ncclResult_t check_stalled(const struct dccl_coll_comm *c, struct dccl_conn *waited) {
  if (atomic_load(c->abort_flag))
    return dccl_error(ncclRemoteError, "cost model probe aborted: %s",
                      c->error_text[0] ? c->error_text : "the communicator was aborted");
  return waited->transport->check_peer(waited);
}

/* Runs steps (send a token to `next`, then take one from `prev`): at most max_steps, and fewer once the timed
 * steps after the first `warm` exceed the budget (at least `warm` of them are timed). All ranks must run the same number, so the leader (ring position
 * 0) decides when to stop and each token carries the decision: the leader's choice, `stop`, lies nranks steps
 * ahead, and a rank j positions downstream has sent at most j tokens more than the leader when the news reaches it
 * (each rank sends only after it received), so every rank learns it before passing it. *ns is the time of the
 * steps after `warm`, *timed their count. */
static ncclResult_t pass_tokens(struct dccl_coll_comm *c, struct dccl_conn *next, struct dccl_conn *prev,
                                uint64_t max_steps, uint64_t warm, double *ns, uint64_t *timed, double means[2]) {
  double sum_sent = 0, sum_received = 0;
  struct dccl_waiter w;
  dccl_waiter_init(&w, c->oversubscribed);
  int leader = c->rings[0].pos == 0;
  uint64_t nsteps = max_steps, sent = 0, received = 0, t0 = 0, t1 = 0;
  while (received < nsteps || !next->transport->send_flushed(next)) {
    DCCLCHECK(progress(next));
    DCCLCHECK(progress(prev));
    int moved = 0;
    struct dccl_send_slot s;
    struct dccl_recv_slot r;
    if (sent < nsteps && sent == received && dccl_conn_send_slot(next, sizeof(uint64_t), DCCL_PROTO_LL, &s)) {
      uint64_t stop = nsteps < max_steps ? nsteps : 0; /* 0: not decided */
      memcpy(s.payload, &stop, sizeof(stop));
      dccl_conn_send_post(next, &s, sizeof(stop), sent, 0);
      if (sent >= warm) sum_sent += (double)dccl_now_ns();
      sent++;
      moved = 1;
    }
    if (received < sent && dccl_conn_recv_slot(prev, &r)) {
      uint64_t stop;
      memcpy(&stop, r.payload, sizeof(stop));
      dccl_conn_recv_done(prev);
      received++;
      moved = 1;
      if (stop && stop < nsteps) nsteps = stop;
      t1 = (uint64_t)dccl_now_ns();
      if (received > warm) sum_received += (double)t1; /* token received - 1 */
      if (received == warm) t0 = t1;
      if (leader && nsteps == max_steps && received >= 2 * warm && t1 - t0 >= (uint64_t)PROBE_BUDGET_NS &&
          received + (uint64_t)c->nranks < max_steps)
        nsteps = received + (uint64_t)c->nranks;
    }
    if (moved) {
      dccl_waiter_reset(&w);
    } else if (dccl_waiter_idle(&w)) {
      DCCLCHECK(check_stalled(c, received < sent ? prev : next));
    }
  }
  *ns = (double)(t1 - t0);
  *timed = nsteps - warm;
  means[0] = *timed ? sum_sent / (double)*timed : 0;
  means[1] = *timed ? sum_received / (double)*timed : 0;
  return ncclSuccess;
}

/* Ranks on several hosts: the rate of a ring step between hosts. Every rank hands PROBE_BW_SLOTS full slots to
 * its ring 0 neighbour while taking as many from the other, copying each in and out as the executor does, so the
 * slowest link (a network one, or a copy) paces them all, as in a ring all-reduce. One slot first, untimed. The
 * rank's figure is bytes over its time; the slowest rank's is used. */
#define PROBE_BW_SLOTS 8
static ncclResult_t pass_slots(struct dccl_coll_comm *c, struct dccl_conn *next, struct dccl_conn *prev,
                               double *bytes_per_ns) {
  uint64_t chunk = (uint64_t)dccl_param_int(DCCL_PARAM_CHUNK_SIZE), nslots = PROBE_BW_SLOTS + 1;
  char *buf = calloc(1, chunk);
  if (!buf) return dccl_error(ncclSystemError, "cost model probe: out of memory");
  struct dccl_waiter w;
  dccl_waiter_init(&w, c->oversubscribed);
  uint64_t sent = 0, received = 0, t0 = 0;
  ncclResult_t res = ncclSuccess;
  while (res == ncclSuccess && (received < nslots || sent < nslots || !next->transport->send_flushed(next))) {
    res = progress(next);
    if (res == ncclSuccess) res = progress(prev);
    int moved = 0;
    struct dccl_send_slot s;
    struct dccl_recv_slot r;
    if (res == ncclSuccess && sent < nslots && dccl_conn_send_slot(next, chunk, DCCL_PROTO_BULK, &s)) {
      memcpy(s.payload, buf, chunk);
      dccl_conn_send_post(next, &s, chunk, sent++, 0);
      moved = 1;
    }
    if (res == ncclSuccess && received < nslots && dccl_conn_recv_slot(prev, &r)) {
      memcpy(buf, r.payload, r.h.bytes < chunk ? r.h.bytes : chunk);
      dccl_conn_recv_done(prev);
      if (++received == 1) t0 = (uint64_t)dccl_now_ns(); /* the untimed first slot is in */
      moved = 1;
    }
    if (moved)
      dccl_waiter_reset(&w);
    else if (res == ncclSuccess && dccl_waiter_idle(&w))
      res = check_stalled(c, received < nslots ? prev : next);
  }
  uint64_t dt = (uint64_t)dccl_now_ns() - t0;
  *bytes_per_ns = res == ncclSuccess && dt ? (double)(PROBE_BW_SLOTS * chunk) / (double)dt : 0;
  free(buf);
  return res;
}

/* A property of the host: measured once per process (a child inherits the figure). */
static double copy_bw;
static pthread_once_t copy_bw_once = PTHREAD_ONCE_INIT;
static void copy_bw_measure(void) { copy_bw = measure_copy_bw(); }

/* Every rank copies at once, as in a collective, where the ranks of a host share its memory bandwidth. On an
 * oversubscribed host that would measure the scheduler (a rank descheduled mid-copy) and cost every rank's copy
 * in turn: there only the lowest rank of the host measures. */
static int copies_for_host(const struct dccl_coll_comm *c) {
  if (!c->oversubscribed) return 1;
  for (int r = 0; r < c->rank; r++)
    if (c->peers[r].real_host_hash == c->peers[c->rank].real_host_hash) return 0;
  return 1;
}

ncclResult_t dccl_tune_probe(struct dccl_coll_comm *c, double mine[DCCL_TUNE_PROBE_FIELDS]) {
  for (int i = 0; i < DCCL_TUNE_PROBE_FIELDS; i++) mine[i] = 0; /* 0: not measured here */
  if (c->nranks > 1 && dccl_param_int(DCCL_PARAM_TUNE_ALPHA_NS) <= 0) {
    struct dccl_conn *next = c->find_conn(c, c->rings[0].next, 1, 0), *prev = c->find_conn(c, c->rings[0].prev, 0, 0);
    if (!next || !prev) return dccl_error(ncclInternalError, "cost model probe: ring 0 is not connected");
    /* Warm-up: one trip around the ring, so every rank is running before the clock starts. */
    uint64_t lap = 2 * (uint64_t)c->nranks - 1, warm = (uint64_t)c->nranks;
    double ns;
    uint64_t timed;
    DCCLCHECK(pass_tokens(c, next, prev, warm + lap * PROBE_LAPS, warm, &ns, &timed, mine + 2));
    mine[0] = ns / (double)timed;
    if (c->nhosts > 1 && dccl_param_int(DCCL_PARAM_TUNE_BW_MBPS) <= 0) DCCLCHECK(pass_slots(c, next, prev, mine + 4));
  }
  if (dccl_param_int(DCCL_PARAM_TUNE_BW_MBPS) <= 0 && copies_for_host(c)) {
    pthread_once(&copy_bw_once, copy_bw_measure);
    mine[1] = copy_bw;
  }
  return ncclSuccess;
}
