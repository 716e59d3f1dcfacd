/* Stall reports: calls that wait on each other with no data flowing are named, a slow rank is only reported.
 *
 * fault_stall shm|socket (DCCL_STALL_REPORT_MS=500):
 *   root  2, 3 and 4 ranks: ncclBroadcast where rank 0 names root 1 and the others root 0, so every rank waits to
 *         receive and no slot ever flows. Every rank's call fails within 3 s with ncclInvalidUsage and a message
 *         from the stall report naming both roots and saying the communicator stays usable; a correct all-reduce
 *         runs on it next, and a new communicator works afterwards.
 *   slow  2 ranks, DCCL_STALL_REPORT_MS=1000: rank 1 joins an all-reduce 3 s late. Rank 0 logs a report that says
 *         rank 1 is not in an operation, nothing fails, and the result is right.
 *   late  2 ranks, DCCL_STALL_REPORT_MS=1000: rank 0, the root of a broadcast of 2048 floats where rank 1 expects
 *         1024, is done before anyone sees it, sleeps 3 s, then calls an all-reduce. Rank 1's broadcast fails
 *         and waits for rank 0 to meet and drain: the report (logged by rank 0's monitor thread while its caller
 *         sleeps) shows rank 0 not in an operation and rank 1 waiting for it; when rank 0 calls, both calls fail
 *         saying the communicator cannot be kept because rank 0 had returned from the broadcast.
 *   late, DCCL_TIMEOUT=1: the same; rank 1 gives up waiting after 1 s ("rank 0 did not come to drain"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dccl.h"
#include "fault_harness.h"

#define MAX_RANKS 4
#define COUNT 1024

struct rank_report {
  int rc, after_rc, kept_rc;
  size_t wrong, after_wrong, kept_wrong;
  double call_s;
  char text[400];
};

struct shared {
  ncclUniqueId id, id2;
  int nranks, slow; /* 0: root mismatch, 1: slow rank, 2: late to the drain, 3: the same with DCCL_TIMEOUT=1 */
  char log_dir[64];
  struct rank_report r[MAX_RANKS];
};

static int rank_main(void *arg, int rank) {
  struct shared *sh = arg;
  struct rank_report *me = &sh->r[rank];
  char log[128];
  snprintf(log, sizeof log, "%s/rank%d.log", sh->log_dir, rank);
  if (!freopen(log, "w", stderr)) return 12; /* the library's warnings, for the parent to read */
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, sh->nranks, sh->id, rank) != ncclSuccess) {
    snprintf(me->text, sizeof me->text, "init: %s", ncclGetLastError(NULL));
    return 10;
  }
  float *send = malloc(2 * COUNT * sizeof(float)), *recv = calloc(2 * COUNT, sizeof(float)); /* late: 2 COUNT */
  if (!send || !recv) return 11;
  fh_fill(send, COUNT, rank, 1);
  double t0 = fh_now();
  if (sh->slow >= 2) {
    me->rc = ncclBroadcast(send, recv, rank == 0 ? 2 * COUNT : COUNT, ncclFloat, 0, comm, NULL);
    if (rank == 0 && me->rc == ncclSuccess) {
      fh_sleep(3.0);
      me->rc = ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, NULL);
    }
  } else if (sh->slow) {
    if (rank == 1) fh_sleep(3.0);
    t0 = fh_now();
    me->rc = ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, NULL);
    if (me->rc == ncclSuccess) me->wrong = fh_check_sum(recv, COUNT, sh->nranks, 1, NULL);
  } else {
    me->rc = ncclBroadcast(send, recv, COUNT, ncclFloat, rank == 0 ? 1 : 0, comm, NULL);
  }
  me->call_s = fh_now() - t0;
  fh_copy_text(me->text, sizeof me->text, ncclGetLastError(comm));
  me->kept_rc = -1;
  if (sh->slow == 0) { /* the failed broadcast left the communicator usable */
    fh_fill(send, COUNT, rank, 3);
    me->kept_rc = ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, NULL);
    if (me->kept_rc == ncclSuccess) me->kept_wrong = fh_check_sum(recv, COUNT, sh->nranks, 3, NULL);
  }
  if (me->rc == ncclSuccess || me->kept_rc == ncclSuccess) ncclCommDestroy(comm); else ncclCommAbort(comm);
  ncclComm_t fresh;
  me->after_rc = ncclCommInitRank(&fresh, sh->nranks, sh->id2, rank);
  if (me->after_rc == ncclSuccess) {
    fh_fill(send, COUNT, rank, 2);
    me->after_rc = ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, fresh, NULL);
    if (me->after_rc == ncclSuccess) me->after_wrong = fh_check_sum(recv, COUNT, sh->nranks, 2, NULL);
    ncclCommDestroy(fresh);
  }
  free(send);
  free(recv);
  return 0;
}

static int file_has(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[1024];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

static void run_case(struct shared *sh, int nranks, int slow) {
  const char *name = slow == 3   ? "late to the drain, DCCL_TIMEOUT=1"
                     : slow == 2 ? "late to the drain"
                     : slow      ? "slow rank"
                                 : "root mismatch";
  if (slow == 3) setenv("DCCL_TIMEOUT", "1", 1);
  memset(sh->r, 0, sizeof sh->r);
  sh->nranks = nranks;
  sh->slow = slow;
  setenv("DCCL_STALL_REPORT_MS", slow == 3 ? "300" : slow ? "1000" : "500", 1);
  if (fh_unique_id(&sh->id) != ncclSuccess || fh_unique_id(&sh->id2) != ncclSuccess) {
    FH_FAIL("ncclGetUniqueId failed");
    return;
  }
  int status[MAX_RANKS], killed[MAX_RANKS];
  fh_run_ranks(rank_main, sh, nranks, 30.0, status, killed);
  for (int r = 0; r < nranks; r++) {
    const struct rank_report *me = &sh->r[r];
    char buf[96];
    if (killed[r] || !fh_status_ok(status[r])) {
      FH_FAIL("%s, %d ranks: rank %d %s (%s): %s", name, nranks, r, killed[r] ? "hung" : "ended badly",
              fh_status_str(status[r], buf, sizeof buf), me->text);
      continue;
    }
    FH_EXPECT(me->after_rc == ncclSuccess && me->after_wrong == 0, "%s, %d ranks: rank %d's new communicator failed",
              name, nranks, r);
    if (slow == 3) {
      FH_EXPECT(me->rc != ncclSuccess, "%s: rank %d's call succeeded", name, r);
      FH_EXPECT(r == 0 || (fh_text_has(me->text, "did not come to drain") && me->call_s < 2.5),
                "%s: rank %d after %.2f s: %s", name, r, me->call_s, me->text);
      continue;
    }
    if (slow == 2) {
      FH_EXPECT(me->rc == ncclInvalidUsage && fh_text_has(me->text, "cannot be kept") &&
                    fh_text_has(me->text, "rank 0 had already returned"),
                "late to the drain: rank %d: rc %d: %s", r, me->rc, me->text);
      FH_EXPECT(r == 0 || me->call_s > 2.5, "late to the drain: rank %d failed after %.2f s, before rank 0 came", r,
                me->call_s);
      continue;
    }
    if (slow) {
      FH_EXPECT(me->rc == ncclSuccess && me->wrong == 0, "slow rank: rank %d failed (%s) or is wrong (%zu)", r,
                me->text, me->wrong);
      continue;
    }
    FH_EXPECT(me->rc == ncclInvalidUsage && fh_text_has(me->text, "stall report") && strstr(me->text, "root 1") &&
                  strstr(me->text, "root 0") && strstr(me->text, "stays usable"),
              "root mismatch, %d ranks: rank %d: rc %d: %s", nranks, r, me->rc, me->text);
    FH_EXPECT(me->kept_rc == ncclSuccess && me->kept_wrong == 0,
              "root mismatch, %d ranks: rank %d: the all-reduce on the kept communicator: rc %d, %zu wrong", nranks, r,
              me->kept_rc, me->kept_wrong);
    FH_EXPECT(me->call_s < 3.0, "root mismatch, %d ranks: rank %d took %.2f s to fail", nranks, r, me->call_s);
    if (r == 0) fh_note("root mismatch, %d ranks: rank 0 after %.2f s: %s", nranks, me->call_s, me->text);
  }
  char log[128];
  snprintf(log, sizeof log, "%s/rank0.log", sh->log_dir);
  FH_EXPECT(file_has(log, "stall report"), "%s, %d ranks: rank 0 logged no stall report", name, nranks);
  if (slow == 1)
    FH_EXPECT(file_has(log, "rank 1: not waiting in an operation"), "slow rank: the report does not show rank 1 idle");
  if (slow == 2)
    FH_EXPECT(file_has(log, "rank 0: not waiting in an operation") && file_has(log, "waiting") &&
                  file_has(log, "for rank 0"),
              "late to the drain: the report does not show rank 0 idle and rank 1 waiting for it");
  for (int r = 0; r < nranks; r++) {
    snprintf(log, sizeof log, "%s/rank%d.log", sh->log_dir, r);
    unlink(log);
  }
}

int main(int argc, char **argv) {
  const char *mode = fh_transport_arg(argc, argv);
  if (!mode) return 2;
  unsetenv("DCCL_TIMEOUT");
  struct shared *sh = fh_shared_alloc(sizeof *sh);
  if (!sh) return 1;
  snprintf(sh->log_dir, sizeof sh->log_dir, "/tmp/dccl-stall-XXXXXX");
  if (!mkdtemp(sh->log_dir)) return 1;
  struct fh_shm_snapshot snap;
  fh_shm_snapshot_take(&snap);
  for (int nranks = 2; nranks <= MAX_RANKS; nranks++) run_case(sh, nranks, 0);
  run_case(sh, 2, 1);
  run_case(sh, 2, 2);
  run_case(sh, 2, 3);
  unsetenv("DCCL_TIMEOUT");
  rmdir(sh->log_dir);
  fh_shm_check_leaks(&snap, "stall");
  fh_note("stall reports, %s: %s", mode, fh_failures ? "FAILED" : "passed");
  return fh_failures ? 1 : 0;
}
