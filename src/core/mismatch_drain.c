/* Mismatched calls that leave the communicator usable.
 *
 * When ranks call the same collective (same sequence number) with different arguments, every rank fails that
 * collective with the verdict naming both calls, and the communicator is kept: the ranks meet over the bootstrap
 * (not the data links), each tells how many slots it has put into every collective link, each receiver takes and
 * drops slots until it has taken all its sender put in, and a barrier ends it. The links are then empty and their
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

/* What each rank tells the others first, and then one row per collective link it sends on. */
struct drain_hello {
  int32_t keep, nsend;
  uint64_t seq; /* the collective this rank fails */
};
struct drain_row {
  int32_t peer, lane;
  uint64_t tail; /* slots put into the link */
};

static int drained_lane(const struct dccl_conn_entry *e) { return e->lane < DCCL_LANE_P2P && e->conn.transport; }

static ncclResult_t progress(struct dccl_conn *c) {
  return c->transport->moves_bytes ? c->transport->progress(c) : ncclSuccess;
}

/* Takes and drops slots until each receive link has taken what its sender put in, and each send link has handed
 * its slots on. Stops on an abort (a rank died, the communicator failed) or a broken link. */
static ncclResult_t drain_links(struct dccl_comm *comm, const struct drain_row *rows, int stride) {
  struct dccl_waiter w;
  dccl_waiter_init(&w, comm->oversubscribed);
  for (;;) {
    int busy = 0, moved = 0;
    for (struct dccl_conn_entry *e = atomic_load(&comm->conns); e; e = e->next) {
      if (!drained_lane(e)) continue;
      struct dccl_conn *c = &e->conn;
      DCCLCHECK(progress(c));
      if (c->is_send) {
        if (!c->transport->send_flushed(c)) busy = 1;
        continue;
      }
      uint64_t target = c->own_counter; /* the sender's row for this link */
      for (int i = 0; i < stride; i++) {
        const struct drain_row *r = &rows[(size_t)c->peer * (size_t)stride + (size_t)i];
        if (r->peer == comm->rank && r->lane == c->lane) target = r->tail;
      }
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

#define DRAIN_TAG 0x44000000u         /* bootstrap messages of the meeting (connect.c's are 0x43...) */
#define NOTE_EVERY_NS 100000000ll     /* a stall note stays fresh for 200 ms (stall_report.c) */

/* Waits for `peer`'s check-in, noting between waits what this rank waits for (`call`: the collective it failed;
 * NULL: no note), so that a stall report after DCCL_STALL_REPORT_MS names a rank that does not come: one that
 * returned from the collective joins only at its next call. */
static ncclResult_t wait_for(struct dccl_comm *comm, int peer, const struct dccl_slot_header *call) {
  int64_t start = dccl_now_ns(), timeout_s = dccl_param_int(DCCL_PARAM_TIMEOUT);
  for (;;) {
    uint8_t byte;
    int timed_out;
    DCCLCHECK(dccl_bootstrap_recv_by(comm->bootstrap, peer, DRAIN_TAG, &byte, 1, dccl_now_ns() + NOTE_EVERY_NS,
                                     &timed_out));
    if (!timed_out) return ncclSuccess;
    int64_t waited = dccl_now_ns() - start;
    if (timeout_s > 0 && waited > timeout_s * 1000000000ll)
      return dccl_error(ncclSystemError, "timed out: rank %d did not come to drain for %lld s (DCCL_TIMEOUT)", peer,
                        (long long)timeout_s);
    if (call) dccl_stall_note(comm, call, peer, (uint64_t)waited);
  }
}

/* The meeting's first step, the only one that may wait long: every rank checks in with rank 0, which answers once
 * all have. After it every rank is in the meeting, so its exchanges run at once. */
static ncclResult_t check_in(struct dccl_comm *comm, const struct dccl_slot_header *call) {
  uint8_t byte = 1;
  if (comm->rank != 0) {
    DCCLCHECK(dccl_bootstrap_send(comm->bootstrap, 0, DRAIN_TAG, &byte, 1));
    return wait_for(comm, 0, call);
  }
  for (int r = 1; r < comm->nranks; r++) DCCLCHECK(wait_for(comm, r, call));
  for (int r = 1; r < comm->nranks; r++) DCCLCHECK(dccl_bootstrap_send(comm->bootstrap, r, DRAIN_TAG, &byte, 1));
  return ncclSuccess;
}

/* Every rank: says whether it can keep, and if all can, drains. Returns 1 when kept; else *why says why not. */
static int meet_and_drain(struct dccl_comm *comm, int keep, uint64_t seq, uint64_t failed,
                          const struct dccl_slot_header *call, char *why, size_t len) {
  int n = comm->nranks, nsend = 0;
  for (struct dccl_conn_entry *e = atomic_load(&comm->conns); e; e = e->next) nsend += drained_lane(e) && e->is_send;
  struct drain_hello *hello = calloc((size_t)n, sizeof(*hello));
  struct drain_row *rows = NULL;
  int kept = 0;
  if (!hello) {
    snprintf(why, len, "out of memory");
    return 0;
  }
  hello[comm->rank] = (struct drain_hello){keep, nsend, seq};
  if (check_in(comm, call) != ncclSuccess || dccl_bootstrap_allgather(comm->bootstrap, hello, sizeof(*hello)) != ncclSuccess) {
    snprintf(why, len, "the ranks could not meet to drain: %s", dccl_last_error());
    goto out;
  }
  int stride = 0;
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
    if (hello[r].nsend > stride) stride = hello[r].nsend;
  }
  rows = calloc((size_t)n * (size_t)(stride ? stride : 1), sizeof(*rows));
  if (!rows) {
    snprintf(why, len, "out of memory"); /* the others fail at the next meeting, which this rank never joins */
    goto out;
  }
  for (size_t k = 0; k < (size_t)n * (size_t)stride; k++) rows[k].peer = -1; /* a rank's unused rows match no link */
  int i = 0;
  for (struct dccl_conn_entry *e = atomic_load(&comm->conns); e; e = e->next)
    if (drained_lane(e) && e->is_send)
      rows[(size_t)comm->rank * (size_t)stride + (size_t)i++] = (struct drain_row){e->peer, e->lane, e->conn.own_counter};
  if (stride && dccl_bootstrap_allgather(comm->bootstrap, rows, (size_t)stride * sizeof(*rows)) != ncclSuccess) {
    snprintf(why, len, "the ranks could not exchange their link counters: %s", dccl_last_error());
    goto out;
  }
  if (drain_links(comm, rows, stride) != ncclSuccess || dccl_bootstrap_barrier(comm->bootstrap) != ncclSuccess) {
    snprintf(why, len, "draining the links failed: %s", dccl_last_error());
    goto out;
  }
  kept = 1;
out:
  free(hello);
  free(rows);
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
