/* Mismatched calls that leave the communicator usable.
 *
 * When ranks call the same collective (same sequence number) with different arguments, every rank fails that
 * collective with the verdict naming both calls, and the communicator is kept: the ranks meet over the bootstrap
 * (not the data links): each checks in with rank 0, which answers once all have come with whether every rank can
 * keep; each sender tells each receiver how many slots it has put into their collective link, each receiver takes
 * and drops slots until it has taken that many, and a barrier ends it. The links are then empty and their
 * counters agree at both ends, as after any collective, so the next call runs as usual.
 *
 * That needs every rank to fail the same collective. A rank that had already returned from it, or fails inside a
 * group or on a nonblocking communicator's progress thread, says it cannot keep, and then every rank fails the
 * communicator, saying why. Verdicts about different collectives (a rank a call ahead) or about send/recv fail it
 * at once. Only collective lanes are drained: send/recv lanes and device links are left alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/op.h"
#include "core/comm.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "util/params.h"
#include "util/wait.h"

void dccl_drain_request(struct dccl_comm *comm, int same_collective, uint64_t seq, const char *text) {
  char why[480];
  pthread_mutex_lock(&comm->stall_lock);
  if (same_collective && seq < comm->drained_before) { /* a late copy of a verdict already settled */
    pthread_mutex_unlock(&comm->stall_lock);
    return;
  }
  int pending = atomic_load(&comm->drain_pending);
  int conflict = pending && comm->drain_seq != seq;
  if (same_collective && !pending) {
    comm->drain_seq = seq;
    snprintf(comm->drain_text, sizeof(comm->drain_text), "%s", text);
    atomic_store(&comm->drain_pending, 1);
  }
  pthread_mutex_unlock(&comm->stall_lock);
  if (same_collective && !conflict) return; /* each rank's failing call logs the error */
  snprintf(why, sizeof(why), "%s (the communicator cannot be kept: %s)", text,
           conflict ? "the ranks disagree about which collective failed"
                    : "only a mismatch inside one collective can be drained; make a new communicator");
  if (atomic_load(&comm->async_error) == ncclSuccess) DCCL_WARN(DCCL_COLL, "%s", why);
  dccl_comm_set_failed(comm, ncclInvalidUsage, why);
}

static int is_collective(int kind) { return kind != DCCL_OP_SEND && kind != DCCL_OP_RECV; }

static uint64_t drain_seq(struct dccl_comm *comm, char *text, size_t len) {
  pthread_mutex_lock(&comm->stall_lock);
  uint64_t seq = comm->drain_seq;
  if (text) snprintf(text, len, "%s", comm->drain_text);
  pthread_mutex_unlock(&comm->stall_lock);
  return seq;
}

ncclResult_t dccl_drain_error(struct dccl_comm *comm, int kind, uint64_t seq) {
  if (!atomic_load(&comm->drain_pending) || !is_collective(kind)) return ncclSuccess;
  char text[400];
  if (seq < drain_seq(comm, text, sizeof(text))) return ncclSuccess;
  return dccl_error(ncclInvalidUsage, "%s", text);
}

/* What each rank tells the others when it comes to the meeting. */
struct drain_hello {
  int32_t keep, pad;
  uint64_t seq; /* the collective this rank fails */
};

static int drained_lane(const struct dccl_conn_entry *e) { return e->lane < DCCL_LANE_P2P && e->conn.transport; }

static ncclResult_t progress(struct dccl_conn *c) {
  return c->transport->moves_bytes ? c->transport->progress(c) : ncclSuccess;
}

/* Takes and drops slots until each receive link has taken what its sender put in (targets[i] for the i-th drained
 * receive link in the list), and each send link has handed its slots on. Stops on an abort (a rank died, the
 * communicator failed) or a broken link. */
static ncclResult_t drain_links(struct dccl_comm *comm, const uint64_t *targets) {
  struct dccl_waiter w;
  dccl_waiter_init(&w, comm->oversubscribed);
  for (;;) {
    int busy = 0, moved = 0, i = 0;
    for (struct dccl_conn_entry *e = atomic_load(&comm->conns); e; e = e->next) {
      if (!drained_lane(e)) continue;
      struct dccl_conn *c = &e->conn;
      DCCLCHECK(progress(c));
      if (c->is_send) {
        if (!c->transport->send_flushed(c)) busy = 1;
        continue;
      }
      uint64_t target = targets[i++];
      struct dccl_recv_slot slot;
      while (c->own_counter < target && dccl_conn_recv_slot(c, &slot)) {
        dccl_conn_recv_done(c);
        moved = 1;
      }
      if (c->own_counter < target) busy = 1;
    }
    if (!busy) return ncclSuccess;
    if (moved) {
      dccl_waiter_reset(&w);
    } else if (dccl_waiter_idle(&w)) {
      if (atomic_load(&comm->abort_flag)) return dccl_error(ncclRemoteError, "%s", comm->error_text);
      for (struct dccl_conn_entry *e = atomic_load(&comm->conns); e; e = e->next)
        if (drained_lane(e)) DCCLCHECK(e->conn.transport->check_peer(&e->conn));
    }
  }
}

#define DRAIN_TAG 0x44000000u      /* bootstrap messages of the meeting (connect.c's are 0x43...) */
#define DRAIN_TAIL_TAG(lane) (DRAIN_TAG | 0x100u | (uint32_t)(lane))
#define NOTE_EVERY_NS 100000000ll  /* a stall note stays fresh for 200 ms (stall_report.c) */

/* Receives `peer`'s meeting message, noting between waits what this rank waits for (`call`: the collective it
 * failed; NULL: no note), so that a stall report after DCCL_STALL_REPORT_MS names a rank that does not come: one
 * that returned from the collective joins only at its next call. DCCL_TIMEOUT ends the wait. */
static ncclResult_t wait_for(struct dccl_comm *comm, int peer, void *data, size_t size,
                             const struct dccl_slot_header *call) {
  int64_t start = dccl_now_ns(), timeout_s = dccl_param_int(DCCL_PARAM_TIMEOUT);
  for (;;) {
    int timed_out;
    DCCLCHECK(dccl_bootstrap_recv_by(comm->bootstrap, peer, DRAIN_TAG, data, size, dccl_now_ns() + NOTE_EVERY_NS,
                                     &timed_out));
    if (!timed_out) return ncclSuccess;
    int64_t waited = dccl_now_ns() - start;
    if (timeout_s > 0 && waited > timeout_s * 1000000000ll)
      return dccl_error(ncclSystemError, "timed out: rank %d did not come to drain for %lld s (DCCL_TIMEOUT)", peer,
                        (long long)timeout_s);
    if (call) dccl_stall_note(comm, call, peer, (uint64_t)waited);
  }
}

/* The meeting's first step, the only one that may wait long: every rank sends its hello to rank 0, which answers
 * each with all of them once all have come. */
static ncclResult_t check_in(struct dccl_comm *comm, struct drain_hello *hello, const struct dccl_slot_header *call) {
  size_t all = (size_t)comm->nranks * sizeof(*hello);
  if (comm->rank != 0) {
    DCCLCHECK(dccl_bootstrap_send(comm->bootstrap, 0, DRAIN_TAG, &hello[comm->rank], sizeof(*hello)));
    return wait_for(comm, 0, hello, all, call);
  }
  for (int r = 1; r < comm->nranks; r++) DCCLCHECK(wait_for(comm, r, &hello[r], sizeof(*hello), call));
  for (int r = 1; r < comm->nranks; r++) DCCLCHECK(dccl_bootstrap_send(comm->bootstrap, r, DRAIN_TAG, hello, all));
  return ncclSuccess;
}

/* Each sender tells each receiver, link by link, how many slots it put in; the receivers' targets, in list order. */
static ncclResult_t exchange_tails(struct dccl_comm *comm, uint64_t *targets) {
  for (struct dccl_conn_entry *e = atomic_load(&comm->conns); e; e = e->next)
    if (drained_lane(e) && e->is_send)
      DCCLCHECK(dccl_bootstrap_send(comm->bootstrap, e->peer, DRAIN_TAIL_TAG(e->lane), &e->conn.own_counter,
                                    sizeof(uint64_t)));
  int i = 0;
  for (struct dccl_conn_entry *e = atomic_load(&comm->conns); e; e = e->next)
    if (drained_lane(e) && !e->is_send)
      DCCLCHECK(dccl_bootstrap_recv(comm->bootstrap, e->peer, DRAIN_TAIL_TAG(e->lane), &targets[i++],
                                    sizeof(uint64_t)));
  return ncclSuccess;
}

/* Every rank: says whether it can keep, and if all can, drains. Returns 1 when kept; else *why says why not. */
static int meet_and_drain(struct dccl_comm *comm, int keep, uint64_t seq, uint64_t failed,
                          const struct dccl_slot_header *call, char *why, size_t len) {
  int n = comm->nranks, nrecv = 0, kept = 0;
  for (struct dccl_conn_entry *e = atomic_load(&comm->conns); e; e = e->next) nrecv += drained_lane(e) && !e->is_send;
  /* Everything this rank needs is allocated before it says it can keep. */
  struct drain_hello *hello = calloc((size_t)n, sizeof(*hello));
  uint64_t *targets = calloc((size_t)(nrecv ? nrecv : 1), sizeof(*targets));
  if (!hello) {
    free(targets);
    snprintf(why, len, "out of memory");
    return 0; /* the others learn nothing, as from a rank that never comes: DCCL_TIMEOUT ends their wait */
  }
  hello[comm->rank] = (struct drain_hello){.keep = keep && targets, .seq = seq};
  if (check_in(comm, hello, call) != ncclSuccess) {
    snprintf(why, len, "the ranks could not meet to drain: %s", dccl_last_error());
    goto out;
  }
  for (int r = 0; r < n; r++) {
    if (!hello[r].keep) {
      snprintf(why, len,
               "rank %d could not take part (it failed inside a group, on a nonblocking communicator or with another "
               "error, or was splitting the communicator)",
               r);
      goto out;
    }
    if (hello[r].seq != failed) {
      snprintf(why, len, "rank %d had already returned from that call", r);
      goto out;
    }
  }
  if (exchange_tails(comm, targets) != ncclSuccess) {
    snprintf(why, len, "the ranks could not exchange their link counters: %s", dccl_last_error());
    goto out;
  }
  if (drain_links(comm, targets) != ncclSuccess || dccl_bootstrap_barrier(comm->bootstrap) != ncclSuccess) {
    snprintf(why, len, "draining the links failed: %s", dccl_last_error());
    goto out;
  }
  kept = 1;
out:
  free(hello);
  free(targets);
  return kept;
}

/* This rank's part: `keep` when it fails collective `seq` (the failed one) by itself, with nothing else in flight;
 * `call` (or NULL) what it was called with, for stall notes while it waits for the others. */
static ncclResult_t settle(struct dccl_comm *comm, int keep, uint64_t seq, const struct dccl_slot_header *call) {
  char text[400], why[300];
  uint64_t failed = drain_seq(comm, text, sizeof(text));
  /* Not silent while it waits: a rank that returned from the collective joins only at its next call. */
  DCCL_WARN(DCCL_COLL, "collective #%llu failed on mismatched calls; meeting the other ranks to drain its links",
            (unsigned long long)failed);
  if (meet_and_drain(comm, keep, seq, failed, call, why, sizeof(why))) {
    pthread_mutex_lock(&comm->stall_lock);
    if (comm->drain_seq == failed) {
      atomic_store(&comm->drain_pending, 0);
      comm->drained_before = failed + 1;
    }
    pthread_mutex_unlock(&comm->stall_lock);
    DCCL_INFO(DCCL_COLL, "collective #%llu failed on every rank; its links were drained, the communicator is kept",
              (unsigned long long)failed);
    return dccl_error(ncclInvalidUsage,
                      "%s; every rank's call failed, the links were drained and the communicator stays usable", text);
  }
  char full[760];
  snprintf(full, sizeof(full), "%s (the communicator cannot be kept: %s)", text, why);
  dccl_comm_set_failed(comm, ncclInvalidUsage, full);
  return dccl_error(ncclInvalidUsage, "%s", full);
}

ncclResult_t dccl_drain_at_entry(struct dccl_comm *comm, int kind) {
  if (!is_collective(kind) || dccl_drain_error(comm, kind, comm->coll_seq) == ncclSuccess) return ncclSuccess;
  uint64_t seq = comm->coll_seq++; /* this call is the failed collective (or past it): it is used up */
  int alone = !comm->nonblocking && !comm->coll.queue.head;
  return settle(comm, alone, seq, NULL);
}

ncclResult_t dccl_op_failed(struct dccl_comm *comm, const struct dccl_op *op, ncclResult_t res) {
  if (atomic_load(&comm->drain_pending)) { /* the other ranks wait to meet: join them, even only to say no */
    int keep = res == ncclInvalidUsage && op && is_collective(op->kind) && !op->on_device && !comm->nonblocking;
    struct dccl_slot_header call;
    if (op) {
      call = op->call;
      call.kind = (uint32_t)op->kind; /* as the waits note it */
    }
    return settle(comm, keep, keep ? op->seq : comm->coll_seq, op && op->call_ready ? &call : NULL);
  }
  char text[512];
  snprintf(text, sizeof(text), "%s", dccl_last_error());
  dccl_comm_set_failed(comm, res, text);
  return res;
}
