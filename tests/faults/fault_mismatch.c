/* Ranks that call the same collective with different arguments are told so, by name, instead of getting a wrong
 * result or a hang.
 *
 * fault_mismatch shm|socket: with 2, 3, 4 and 8 ranks, rank 0 calls differently from the others, one case at a time:
 *   count      ncclAllReduce of 2048 floats where the others pass 1024 (and 64 Ki against 32 Ki on a ring, and
 *              on trees under DCCL_ALGO=tree)
 *   type       int32 where the others pass float32 (same size)
 *   reduction  max where the others pass sum
 *   p2p bytes  a ring of sends, rank 0 sending 8 KiB where its receiver expects 4 KiB
 *   extra call rank 0 makes an all-reduce the others do not (or, seen from them, they skipped it) before the
 *              broadcast they all make: "rank 1 is in ncclBroadcast #0 while rank 0 is in ncclAllReduce #0"
 * Every rank's collective must fail within 1 s with ncclInvalidUsage and a message naming both calls ("rank 0 called
 * ncclAllReduce #0 with 2048 x float32 sum, rank 1 with 1024 x float32 sum"), readable through ncclGetLastError:
 * the rank that sees the mismatch tells every rank through the bootstrap monitor. The collective cases (the extra
 * call too: every rank's collective #0 fails) keep the communicator: the message says it stays usable,
 * ncclCommGetAsyncError reports ncclSuccess, and a correct all-reduce runs on it next. Of the sends, the mismatched
 * receive (rank 1's) fails so; a send is done once its bytes are in the link, so the others may succeed; that case
 * fails the communicator (ncclCommGetAsyncError says so, and the message says it cannot be kept). So does case
 *   returned   ncclBroadcast from root 0 of 2048 floats where the others expect 1024: the root is done before
 *              anyone sees it; its next call (an all-reduce) fails, and every rank says rank 0 had already
 *              returned from the broadcast, so the communicator cannot be kept. Then every rank
 * makes a new communicator and gets a correct all-reduce from it. With DCCL_CHECK=0 (case "unchecked") the type
 * mismatch is not caught: the call succeeds.
 * A root mismatch where no data flows (each rank waits for the other) is left to the stall report (not built). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dccl.h"
#include "fault_harness.h"

#define MAX_RANKS 8
#define MAX_COUNT 65536

enum what { COUNT_SMALL, COUNT_RING, COUNT_TREE, TYPE, REDUCTION, P2P_BYTES, EXTRA_CALL, RETURNED, UNCHECKED, NCASES };
static const char *const names[NCASES] = {"count",     "count (ring)", "count (tree)", "type",     "reduction",
                                          "p2p bytes", "extra call",   "returned",     "unchecked"};

struct rank_report {
  int rc, async_rc, async_err, after_rc, kept_rc;
  size_t after_wrong, kept_wrong;
  double call_s;
  char text[400], async_text[400];
};

struct shared {
  ncclUniqueId id, id2;
  int nranks, what;
  struct rank_report r[MAX_RANKS];
};

/* The call of `rank` in case `what`: rank 0 is the odd one out. */
static ncclResult_t call(const struct shared *sh, int rank, ncclComm_t comm, float *send, float *recv) {
  int odd = rank == 0, n = sh->nranks;
  switch (sh->what) {
    case COUNT_SMALL: return ncclAllReduce(send, recv, odd ? 2048 : 1024, ncclFloat, ncclSum, comm, NULL);
    case COUNT_RING:
    case COUNT_TREE: return ncclAllReduce(send, recv, odd ? 65536 : 32768, ncclFloat, ncclSum, comm, NULL);
    case EXTRA_CALL: {
      ncclResult_t rc = odd ? ncclAllReduce(send, recv, 1024, ncclFloat, ncclSum, comm, NULL) : ncclSuccess;
      return rc == ncclSuccess ? ncclBroadcast(send, recv, 1024, ncclFloat, 0, comm, NULL) : rc;
    }
    case RETURNED: { /* the root sends and is done before anyone sees the count; its next call finds out */
      ncclResult_t rc = ncclBroadcast(send, recv, odd ? 2048 : 1024, ncclFloat, 0, comm, NULL);
      return rc == ncclSuccess && odd ? ncclAllReduce(send, recv, 1024, ncclFloat, ncclSum, comm, NULL) : rc;
    }
    case TYPE:
    case UNCHECKED: return ncclAllReduce(send, recv, 1024, odd ? ncclInt32 : ncclFloat, ncclSum, comm, NULL);
    case REDUCTION: return ncclAllReduce(send, recv, 1024, ncclFloat, odd ? ncclMax : ncclSum, comm, NULL);
    default: /* a ring of sends: rank 0 sends twice what rank 1 expects */
      ncclGroupStart();
      ncclSend(send, odd ? 2048 : 1024, ncclFloat, (rank + 1) % n, comm, NULL);
      ncclRecv(recv, 1024, ncclFloat, (rank + n - 1) % n, comm, NULL);
      return ncclGroupEnd();
  }
}

static int rank_main(void *arg, int rank) {
  struct shared *sh = arg;
  struct rank_report *me = &sh->r[rank];
  ncclComm_t comm;
  ncclResult_t rc = ncclCommInitRank(&comm, sh->nranks, sh->id, rank);
  if (rc != ncclSuccess) {
    snprintf(me->text, sizeof me->text, "init: %s", ncclGetLastError(NULL));
    return 10;
  }
  float *send = calloc(MAX_COUNT, sizeof(float)), *recv = calloc(MAX_COUNT, sizeof(float));
  if (!send || !recv) return 11;
  double t0 = fh_now();
  me->rc = call(sh, rank, comm, send, recv);
  me->call_s = fh_now() - t0;
  fh_copy_text(me->text, sizeof me->text, ncclGetLastError(comm));
  ncclResult_t async = ncclSuccess;
  me->async_rc = ncclCommGetAsyncError(comm, &async);
  me->async_err = async;
  fh_copy_text(me->async_text, sizeof me->async_text, ncclGetLastError(comm));
  me->kept_rc = -1;
  if (me->async_rc == ncclSuccess && async == ncclSuccess) { /* kept: the next collective on it is right */
    fh_fill(send, 4096, rank, 5);
    me->kept_rc = ncclAllReduce(send, recv, 4096, ncclFloat, ncclSum, comm, NULL);
    if (me->kept_rc == ncclSuccess) me->kept_wrong = fh_check_sum(recv, 4096, sh->nranks, 5, NULL);
  }
  if (me->rc == ncclSuccess || me->kept_rc == ncclSuccess) ncclCommDestroy(comm); else ncclCommAbort(comm);
  /* A new communicator works. */
  ncclComm_t fresh;
  me->after_rc = ncclCommInitRank(&fresh, sh->nranks, sh->id2, rank);
  if (me->after_rc == ncclSuccess) {
    fh_fill(send, 4096, rank, 3);
    me->after_rc = ncclAllReduce(send, recv, 4096, ncclFloat, ncclSum, fresh, NULL);
    if (me->after_rc == ncclSuccess) me->after_wrong = fh_check_sum(recv, 4096, sh->nranks, 3, NULL);
    ncclCommDestroy(fresh);
  }
  free(send);
  free(recv);
  return 0;
}

/* What rank 0's and the others' calls look like in the message. */
static void expected_calls(int what, const char **odd, const char **even) {
  static const char *const odds[] = {"2048 x float32 sum", "65536 x float32 sum", "65536 x float32 sum",
                                     "1024 x int32 sum",   "1024 x float32 max",  "8192 bytes",
                                     "ncclAllReduce #0",   "2048 x float32, root 0"};
  static const char *const evens[] = {"1024 x float32 sum", "32768 x float32 sum", "32768 x float32 sum",
                                      "1024 x float32 sum", "1024 x float32 sum",  "4096 bytes",
                                      "ncclBroadcast #0",   "1024 x float32, root 0"};
  *odd = odds[what];
  *even = evens[what];
}

static void run_case(struct shared *sh, int nranks, int what) {
  memset(sh->r, 0, sizeof sh->r);
  sh->nranks = nranks;
  sh->what = what;
  if (fh_unique_id(&sh->id) != ncclSuccess || fh_unique_id(&sh->id2) != ncclSuccess) {
    FH_FAIL("ncclGetUniqueId failed");
    return;
  }
  int status[MAX_RANKS], killed[MAX_RANKS];
  fh_run_ranks(rank_main, sh, nranks, 30.0, status, killed);
  int named = 0;
  for (int r = 0; r < nranks; r++) {
    const struct rank_report *me = &sh->r[r];
    char buf[96];
    if (killed[r] || !fh_status_ok(status[r])) {
      FH_FAIL("%s, %d ranks: rank %d %s (%s): %s", names[what], nranks, r, killed[r] ? "hung" : "ended badly",
              fh_status_str(status[r], buf, sizeof buf), me->text);
      continue;
    }
    FH_EXPECT(me->after_rc == ncclSuccess && me->after_wrong == 0,
              "%s, %d ranks: rank %d's new communicator: rc %d, %zu wrong", names[what], nranks, r, me->after_rc,
              me->after_wrong);
    if (what == UNCHECKED) {
      FH_EXPECT(me->rc == ncclSuccess, "unchecked, %d ranks: rank %d failed with the check off: %s", nranks, r,
                me->text);
      FH_EXPECT(me->kept_rc == ncclSuccess && me->kept_wrong == 0, "unchecked, %d ranks: rank %d's next call: rc %d",
                nranks, r, me->kept_rc);
      continue;
    }
    if (what == P2P_BYTES && r != 1 && me->rc == ncclSuccess) continue;
    FH_EXPECT(me->rc != ncclSuccess, "%s, %d ranks: rank %d's mismatched call succeeded", names[what], nranks, r);
    FH_EXPECT(me->call_s < 1.0, "%s, %d ranks: rank %d's call took %.2f s to fail", names[what], nranks, r,
              me->call_s);
    int keeps = what != P2P_BYTES && what != RETURNED;
    if (what == RETURNED)
      FH_EXPECT(fh_text_has(me->text, "rank 0 had already returned from that call"),
                "returned, %d ranks: rank %d does not say rank 0 had returned: %s", nranks, r, me->text);
    if (keeps) {
      FH_EXPECT(me->async_rc == ncclSuccess && me->async_err == ncclSuccess && fh_text_has(me->text, "stays usable"),
                "%s, %d ranks: rank %d: the communicator was not kept (ncclCommGetAsyncError %d): %s", names[what],
                nranks, r, me->async_err, me->text);
      FH_EXPECT(me->kept_rc == ncclSuccess && me->kept_wrong == 0,
                "%s, %d ranks: rank %d: the all-reduce after the mismatch on the kept communicator: rc %d, %zu wrong",
                names[what], nranks, r, me->kept_rc, me->kept_wrong);
    } else {
      FH_EXPECT(me->async_rc == ncclSuccess && me->async_err != ncclSuccess && fh_text_has(me->text, "cannot be kept"),
                "%s, %d ranks: rank %d: ncclCommGetAsyncError says %d after the failure: %s", names[what], nranks, r,
                me->async_err, me->text);
    }
    const char *odd, *even;
    expected_calls(what, &odd, &even);
    if (me->rc == ncclInvalidUsage && fh_text_has(me->text, "mismatched") && strstr(me->text, odd) &&
        strstr(me->text, even) && fh_text_names_rank(me->text, 0) && (keeps || strstr(me->async_text, odd))) {
      named++;
      if (r == nranks - 1) fh_note("%s, %d ranks: rank %d: %s", names[what], nranks, r, me->text);
    } else {
      FH_EXPECT(what == P2P_BYTES && r != 1, "%s, %d ranks: rank %d did not name both calls: %s", names[what], nranks,
                r, me->text);
    }
  }
  FH_EXPECT(what == UNCHECKED || named > 0, "%s, %d ranks: no rank named both calls", names[what], nranks);
}

int main(int argc, char **argv) {
  const char *mode = fh_transport_arg(argc, argv);
  if (!mode) return 2;
  unsetenv("DCCL_TIMEOUT");
  struct shared *sh = fh_shared_alloc(sizeof *sh);
  if (!sh) return 1;
  struct fh_shm_snapshot snap;
  fh_shm_snapshot_take(&snap);
  static const int rank_counts[] = {2, 3, 4, 8};
  for (unsigned k = 0; k < sizeof(rank_counts) / sizeof(rank_counts[0]); k++)
    for (int what = 0; what < NCASES; what++) {
      const char *only = getenv("FAULT_CASE"); /* "nranks:case", to rerun one */
      char this_case[16];
      snprintf(this_case, sizeof this_case, "%d:%d", rank_counts[k], what);
      if (only && strcmp(only, this_case) != 0) continue;
      if (what == UNCHECKED) setenv("DCCL_CHECK", "0", 1);
      if (what == COUNT_TREE) setenv("DCCL_ALGO", "tree", 1);
      run_case(sh, rank_counts[k], what);
      unsetenv("DCCL_CHECK");
      unsetenv("DCCL_ALGO");
    }
  fh_shm_check_leaks(&snap, mode);
  fh_note("mismatched calls, %s: %s", mode, fh_failures ? "FAILED" : "passed");
  return fh_failures ? 1 : 0;
}
