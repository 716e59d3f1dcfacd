/* The cost model's measurements, taken without running a collective: tokens passed around ring 0's links (every
 * rank at once, each forwarding one after it received one: one hand-off per step, as in a ring all-reduce), and a
 * memcpy of DCCL_CHUNK_SIZE blocks over a buffer larger than the caches. */
#include <stdlib.h>
#include <string.h>

#include "tune/tune.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/params.h"
#include "util/wait.h"

#define PROBE_COPY_BYTES (8u << 20)
#define PROBE_LAPS 16 /* timed, after one lap of warm-up; a lap is 2N-1 steps, the length of an all-reduce */

static double measure_copy_bw(void) {
  uint64_t chunk = (uint64_t)dccl_param_int(DCCL_PARAM_CHUNK_SIZE);
  if (chunk == 0 || chunk > PROBE_COPY_BYTES) chunk = PROBE_COPY_BYTES;
  char *a = malloc(PROBE_COPY_BYTES), *b = malloc(PROBE_COPY_BYTES);
  double best = 1.0;
  if (!a || !b) goto out;
  memset(a, 1, PROBE_COPY_BYTES);
  memset(b, 2, PROBE_COPY_BYTES);
  for (int i = 0; i < 3; i++) {
    uint64_t t0 = (uint64_t)dccl_now_ns();
    for (uint64_t off = 0; off + chunk <= PROBE_COPY_BYTES; off += chunk) memcpy(b + off, a + off, chunk);
    uint64_t dt = (uint64_t)dccl_now_ns() - t0;
    double bw = dt ? (double)(PROBE_COPY_BYTES - PROBE_COPY_BYTES % chunk) / (double)dt : 1.0;
    if (bw > best) best = bw;
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

/* Runs nsteps steps (send a token to `next`, then take one from `prev`); *ns is the time of the steps after the
 * first `warm`. */
static ncclResult_t pass_tokens(struct dccl_coll_comm *c, struct dccl_conn *next, struct dccl_conn *prev,
                                uint64_t nsteps, uint64_t warm, double *ns) {
  struct dccl_waiter w;
  dccl_waiter_init(&w, c->oversubscribed);
  uint64_t sent = 0, received = 0, t0 = 0, t1 = 0;
  while (received < nsteps || !next->transport->send_flushed(next)) {
    DCCLCHECK(progress(next));
    DCCLCHECK(progress(prev));
    int moved = 0;
    struct dccl_send_slot s;
    struct dccl_recv_slot r;
    if (sent < nsteps && sent == received && dccl_conn_send_slot(next, sizeof(sent), DCCL_PROTO_LL, &s)) {
      memcpy(s.payload, &sent, sizeof(sent));
      dccl_conn_send_post(next, &s, sizeof(sent), sent, 0);
      sent++;
      moved = 1;
    }
    if (received < sent && dccl_conn_recv_slot(prev, &r)) {
      dccl_conn_recv_done(prev);
      received++;
      moved = 1;
      if (received == warm) t0 = (uint64_t)dccl_now_ns();
      if (received == nsteps) t1 = (uint64_t)dccl_now_ns();
    }
    if (moved) {
      dccl_waiter_reset(&w);
    } else if (dccl_waiter_idle(&w)) {
      DCCLCHECK(check_stalled(c, received < sent ? prev : next));
    }
  }
  *ns = (double)(t1 - t0);
  return ncclSuccess;
}

ncclResult_t dccl_tune_probe(struct dccl_coll_comm *c, double mine[2]) {
  mine[0] = 0;
  if (c->nranks > 1) {
    struct dccl_conn *next = c->find_conn(c, c->rings[0].next, 1, 0), *prev = c->find_conn(c, c->rings[0].prev, 0, 0);
    if (!next || !prev) return dccl_error(ncclInternalError, "cost model probe: ring 0 is not connected");
    uint64_t lap = 2 * (uint64_t)c->nranks - 1;
    double ns;
    DCCLCHECK(pass_tokens(c, next, prev, lap * (PROBE_LAPS + 1), lap, &ns));
    mine[0] = ns / (double)(lap * PROBE_LAPS);
  }
  mine[1] = measure_copy_bw();
  return ncclSuccess;
}
