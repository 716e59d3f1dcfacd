/* Mismatched calls, told to every rank at once, and stall reports.
 *
 * A rank whose slot check finds another rank's call different from its own sends the pair through the bootstrap
 * monitor (rank 0 passes it on), so every rank fails with the same named error within milliseconds instead of
 * learning it link by link.
 *
 * Stall reports: when a wait makes no progress for DCCL_STALL_REPORT_MS, every rank is asked what it is doing
 * (through the bootstrap's monitor connections, not the data links, which may be the stuck part). Rank 0 logs
 * one report, a line per rank; where two ranks are in the same collective (same sequence number) with different
 * kinds or arguments, which no slot can show when none flows (a broadcast whose ranks name different roots all
 * wait to receive), every rank's waiting operations fail with ncclInvalidUsage naming both calls. A rank that is
 * merely slow fails nothing: the report is logged once per stall and the waits go on.
 *
 * Device operations have no host thread waiting in them: the monitor thread's tick notes the oldest kernel launch
 * that has not finished (woken by a launch, then every DEVICE_TICK_MS while kernels run), so a kernel that makes no
 * progress is in the report like a wait. A verdict about a call that ran in kernels fails the communicator (its
 * kernels stop on the abort word; device links are not drained). */
#include <stdio.h>
#include <string.h>

#include "collectives/device/dev_exec.h"
#include "collectives/op.h"
#include "core/comm.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "util/params.h"

#define STALL_FRESH_NS 200000000ll /* a note older than this: the rank is not waiting now */
#define DEVICE_TICK_MS 100          /* kernels running: the monitor notes them this often (fresher than the above) */

static void note(struct dccl_comm *comm, const struct dccl_slot_header *call, int peer, uint64_t idle_ns,
                 int on_device) {
  int64_t report_ms = dccl_param_int(DCCL_PARAM_STALL_REPORT_MS);
  pthread_mutex_lock(&comm->stall_lock);
  comm->stall_now = (struct dccl_stall_status){.rank = comm->rank, .in_call = 1, .waiting_on = peer,
                                               .kind = call->kind, .what = call->what, .root = call->root,
                                               .seq = call->seq, .count = call->count,
                                               .stalled_ms = idle_ns / 1000000, .on_device = on_device};
  comm->stall_seen_ns = dccl_now_ns();
  int ask = report_ms > 0 && idle_ns >= (uint64_t)report_ms * 1000000ull && comm->stall_asked_seq != call->seq + 1;
  if (ask) comm->stall_asked_seq = call->seq + 1;
  pthread_mutex_unlock(&comm->stall_lock);
  if (ask) dccl_bootstrap_ask_stall_report(comm->bootstrap);
}

void dccl_stall_note(struct dccl_comm *comm, const struct dccl_slot_header *call, int peer, uint64_t idle_ns) {
  note(comm, call, peer, idle_ns, 0);
}

void dccl_stall_note_meeting(struct dccl_comm *comm, const struct dccl_slot_header *call, int peer, uint64_t idle_ns) {
  note(comm, call, peer, idle_ns, 2);
}

/* The monitor thread: notes the oldest unfinished kernel launch while there is one. `stall_ticking` says a tick
 * is due, so a launch need not wake the thread; it is cleared before the check, so a launch the check misses
 * sees it cleared and wakes it. */
static int tick(void *arg) {
  struct dccl_comm *comm = arg;
  pthread_mutex_lock(&comm->stall_lock);
  int created = comm->stall_created;
  pthread_mutex_unlock(&comm->stall_lock);
  if (!created || dccl_param_int(DCCL_PARAM_STALL_REPORT_MS) <= 0) return -1;
  atomic_store(&comm->stall_ticking, 0);
  struct dccl_slot_header call;
  int64_t idle_ns;
  if (!dccl_dev_comm_stalled(&comm->coll, &call, &idle_ns)) return -1;
  atomic_store(&comm->stall_ticking, 1);
  note(comm, &call, -1, (uint64_t)idle_ns, 1);
  return DEVICE_TICK_MS;
}

void dccl_stall_launched(struct dccl_comm *comm) {
  if (!atomic_load(&comm->stall_ticking) && dccl_param_int(DCCL_PARAM_STALL_REPORT_MS) > 0)
    dccl_bootstrap_wake_monitor(comm->bootstrap);
}

static void status(void *arg, struct dccl_stall_status *out) {
  struct dccl_comm *comm = arg;
  pthread_mutex_lock(&comm->stall_lock);
  *out = comm->stall_now;
  if (dccl_now_ns() - comm->stall_seen_ns > STALL_FRESH_NS) out->in_call = 0;
  out->next_seq = comm->coll_seq;
  pthread_mutex_unlock(&comm->stall_lock);
}

static struct dccl_slot_header call_of(const struct dccl_stall_status *s) {
  return (struct dccl_slot_header){.seq = s->seq, .kind = s->kind, .count = s->count, .what = s->what,
                                   .root = s->root};
}

static void describe(const struct dccl_stall_status *s, char *out, size_t len) {
  if (s->in_call < 0) {
    snprintf(out, len, "rank %d: no answer", s->rank);
    return;
  }
  if (!s->in_call) {
    snprintf(out, len, "rank %d: not waiting in an operation (its next collective is #%llu)", s->rank,
             (unsigned long long)s->next_seq);
    return;
  }
  struct dccl_slot_header h = call_of(s);
  char call[96];
  dccl_describe_call(&h, call, sizeof(call));
  if (s->on_device == 2) {
    snprintf(out, len, "rank %d: in %s #%llu with %s, waiting %llu ms for rank %d in the meeting before its kernels",
             s->rank, dccl_op_name((int)s->kind), (unsigned long long)s->seq, call, (unsigned long long)s->stalled_ms,
             s->waiting_on);
    return;
  }
  if (s->on_device) {
    snprintf(out, len, "rank %d: in %s #%llu with %s, in kernels that have made no progress for %llu ms", s->rank,
             dccl_op_name((int)s->kind), (unsigned long long)s->seq, call, (unsigned long long)s->stalled_ms);
    return;
  }
  snprintf(out, len, "rank %d: in %s #%llu with %s, waiting %llu ms for rank %d", s->rank,
           dccl_op_name((int)s->kind),
           (unsigned long long)s->seq, call, (unsigned long long)s->stalled_ms, s->waiting_on);
}

static int is_collective(const struct dccl_stall_status *s) {
  return s->in_call == 1 && s->kind != DCCL_OP_SEND && s->kind != DCCL_OP_RECV;
}

/* Rank 0: logs the report (once per distinct picture) and finds two ranks in the same collective whose calls
 * differ. */
static int judge(void *arg, const struct dccl_stall_status *all, int n, struct dccl_stall_status pair[2]) {
  struct dccl_comm *comm = arg;
  uint64_t sig = 1469598103934665603ull; /* FNV-1a over what each rank is in */
  for (int r = 0; r < n; r++) {
    uint64_t parts[3] = {(uint64_t)(int64_t)all[r].in_call, all[r].seq, all[r].kind};
    for (int k = 0; k < 3; k++) sig = (sig ^ parts[k]) * 1099511628211ull;
  }
  if (sig != comm->stall_report_sig) {
    comm->stall_report_sig = sig;
    DCCL_WARN(DCCL_COLL, "stall report: no progress for DCCL_STALL_REPORT_MS (%lld ms); what each rank is doing:",
              (long long)dccl_param_int(DCCL_PARAM_STALL_REPORT_MS));
    for (int r = 0; r < n; r++) {
      char line[256];
      describe(&all[r], line, sizeof(line));
      DCCL_WARN(DCCL_COLL, "  %s", line);
    }
  }
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++) {
      const struct dccl_stall_status *x = &all[a], *y = &all[b];
      if (!is_collective(x) || !is_collective(y) || x->seq != y->seq) continue;
      /* The same call, one rank waiting in the meeting, another's kernels running it unmet: they disagree on
       * whether its buffers are registered (or in windows). */
      int unmet = (x->on_device == 2 && y->on_device == 1) || (x->on_device == 1 && y->on_device == 2);
      if (x->kind != y->kind || x->count != y->count || x->what != y->what || x->root != y->root || unmet) {
        pair[0] = *x;
        pair[1] = *y;
        pair[0].seen_by = pair[1].seen_by = -1;
        return 1;
      }
    }
  return 0;
}

/* The error a contradiction gives every rank. */
static void verdict_text(const struct dccl_stall_status p[2], char *text, size_t len) {
  struct dccl_slot_header a = call_of(&p[0]), b = call_of(&p[1]);
  char ca[96], cb[96], how[48];
  dccl_describe_call(&a, ca, sizeof(ca));
  dccl_describe_call(&b, cb, sizeof(cb));
  if (p[0].seen_by < 0)
    snprintf(how, sizeof(how), "found by the stall report");
  else
    snprintf(how, sizeof(how), "seen by rank %d", p[0].seen_by);
  int p2p = (p[0].kind == DCCL_OP_SEND && p[1].kind == DCCL_OP_RECV) ||
            (p[0].kind == DCCL_OP_RECV && p[1].kind == DCCL_OP_SEND);
  const struct dccl_stall_status *s = p[0].kind == DCCL_OP_SEND ? &p[0] : &p[1], *r = s == &p[0] ? &p[1] : &p[0];
  if (p2p)
    snprintf(text, len,
             "mismatched calls (%s): rank %d called ncclSend #%llu to rank %d with %s, rank %d ncclRecv from rank %d "
             "with %s (a send and its receive must move the same bytes)",
             how, s->rank, (unsigned long long)s->seq, r->rank, s == &p[0] ? ca : cb, r->rank, s->rank,
             s == &p[0] ? cb : ca);
  else if (p[0].kind != p[1].kind || p[0].seq != p[1].seq)
    snprintf(text, len,
             "mismatched operations (%s): rank %d is in %s #%llu while rank %d is in %s #%llu (the ranks must call the "
             "same collectives in the same order)",
             how, p[0].rank, dccl_op_name((int)p[0].kind), (unsigned long long)p[0].seq, p[1].rank,
             dccl_op_name((int)p[1].kind), (unsigned long long)p[1].seq);
  else if (!strcmp(ca, cb) && p[0].on_device + p[1].on_device == 3)
    snprintf(text, len,
             "mismatched buffers (%s): in %s #%llu with %s rank %d waits in the ranks' meeting while rank %d's kernels "
             "run without it: where one rank passes buffers registered with ncclCommRegister (or in windows), every "
             "rank must",
             how, dccl_op_name((int)p[0].kind), (unsigned long long)p[0].seq, ca,
             p[0].on_device == 2 ? p[0].rank : p[1].rank, p[0].on_device == 2 ? p[1].rank : p[0].rank);
  else
    snprintf(text, len,
             "mismatched calls (%s): rank %d called %s #%llu with %s, rank %d with %s (every rank must pass the same "
             "count, datatype, reduction and root)",
             how, p[0].rank, dccl_op_name((int)p[0].kind), (unsigned long long)p[0].seq, ca, p[1].rank, cb);
}

/* Two calls of one collective: every rank can fail it and keep the communicator (core/mismatch_drain.c). */
static int same_collective(const struct dccl_stall_status p[2]) {
  return is_collective(&p[0]) && is_collective(&p[1]) && p[0].seq == p[1].seq;
}

/* Every rank: its waits fail with the contradiction (and, for one collective, the communicator is drained and
 * kept). A rank still in creation's last barrier (the others left it first and ran the mismatched call) finishes
 * creating, then fails. */
static void apply_verdict(struct dccl_comm *comm, const struct dccl_stall_status pair[2]) {
  char text[400];
  verdict_text(pair, text, sizeof(text));
  if (pair[0].on_device || pair[1].on_device) {
    char why[560];
    snprintf(why, sizeof(why), "%s (the communicator cannot be kept: the call ran in kernels, which stop now; make "
             "a new communicator)", text);
    if (atomic_load(&comm->async_error) == ncclSuccess) DCCL_WARN(DCCL_COLL, "%s", why);
    dccl_comm_set_failed(comm, ncclInvalidUsage, why);
    return;
  }
  dccl_drain_request(comm, same_collective(pair), pair[0].seq, text);
}

static void verdict(void *arg, const struct dccl_stall_status pair[2]) {
  struct dccl_comm *comm = arg;
  pthread_mutex_lock(&comm->stall_lock);
  int created = comm->stall_created;
  if (!created && !comm->stall_has_pending) {
    comm->stall_pending[0] = pair[0];
    comm->stall_pending[1] = pair[1];
    comm->stall_has_pending = 1;
  }
  pthread_mutex_unlock(&comm->stall_lock);
  if (created) apply_verdict(comm, pair);
}

void dccl_stall_created(struct dccl_comm *comm) {
  pthread_mutex_lock(&comm->stall_lock);
  comm->stall_created = 1;
  struct dccl_stall_status pair[2] = {comm->stall_pending[0], comm->stall_pending[1]};
  int pending = comm->stall_has_pending;
  pthread_mutex_unlock(&comm->stall_lock);
  if (pending) apply_verdict(comm, pair);
}

static struct dccl_stall_status status_of(const struct dccl_slot_header *h, int rank, int seen_by) {
  return (struct dccl_stall_status){.rank = rank, .in_call = 1, .waiting_on = -1, .kind = h->kind, .what = h->what,
                                    .root = h->root, .seq = h->seq, .count = h->count, .seen_by = seen_by};
}

ncclResult_t dccl_stall_mismatch(struct dccl_comm *comm, const struct dccl_slot_header *theirs, int peer,
                                 const struct dccl_slot_header *mine) {
  struct dccl_stall_status pair[2] = {status_of(theirs, peer, comm->rank), status_of(mine, comm->rank, comm->rank)};
  dccl_bootstrap_send_verdict(comm->bootstrap, pair);
  char text[400];
  verdict_text(pair, text, sizeof(text));
  dccl_drain_request(comm, same_collective(pair), pair[0].seq, text); /* here at once, not after the round trip */
  return dccl_error(ncclInvalidUsage, "%s", text);
}

void dccl_stall_hooks_of(struct dccl_comm *comm, struct dccl_stall_hooks *hooks) {
  *hooks = (struct dccl_stall_hooks){.status = status, .judge = judge, .verdict = verdict, .tick = tick, .arg = comm};
}
