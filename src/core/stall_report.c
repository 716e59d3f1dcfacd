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
 * progress is in the report like a wait, and that rank also logs what its links in host memory show (the staged
 * transport's counters and next slots, core/stall_links.h). A verdict about a call that ran in kernels fails the
 * communicator (its kernels stop on the abort word; device links are not drained). */
#include <stdio.h>
#include <string.h>

#include "collectives/device/dev_exec.h"
#include "collectives/op.h"
#include "core/comm.h"
#include "core/stall_links.h"
#include "core/stall_verdict.h"
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
  if (ask && on_device == 1) dccl_stall_log_links(comm); /* kernels: what their links in host memory show */
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
      dccl_stall_describe(&all[r], line, sizeof(line));
      DCCL_WARN(DCCL_COLL, "  %s", line);
    }
  }
  return dccl_stall_contradiction(all, n, pair);
}

/* Every rank: its waits fail with the contradiction (and, for one collective, the communicator is drained and
 * kept). A rank still in creation's last barrier (the others left it first and ran the mismatched call) finishes
 * creating, then fails. */
static void apply_verdict(struct dccl_comm *comm, const struct dccl_stall_status pair[2]) {
  char text[400];
  dccl_stall_verdict_text(pair, text, sizeof(text));
  if (pair[0].on_device || pair[1].on_device) {
    char why[560];
    snprintf(why, sizeof(why), "%s (the communicator cannot be kept: the call ran in kernels, which stop now; make "
             "a new communicator)", text);
    if (atomic_load(&comm->async_error) == ncclSuccess) DCCL_WARN(DCCL_COLL, "%s", why);
    dccl_comm_set_failed(comm, ncclInvalidUsage, why);
    return;
  }
  dccl_drain_request(comm, dccl_stall_same_collective(pair), pair[0].seq, text);
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
  dccl_stall_verdict_text(pair, text, sizeof(text));
  dccl_drain_request(comm, dccl_stall_same_collective(pair), pair[0].seq, text); /* here at once, not after the round trip */
  return dccl_error(ncclInvalidUsage, "%s", text);
}

void dccl_stall_hooks_of(struct dccl_comm *comm, struct dccl_stall_hooks *hooks) {
  *hooks = (struct dccl_stall_hooks){.status = status, .judge = judge, .verdict = verdict, .tick = tick, .arg = comm};
}
