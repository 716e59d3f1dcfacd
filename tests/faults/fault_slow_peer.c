/* A slow peer is not a dead peer.
 *
 * fault_slow_peer default: 2 ranks; rank 1 sleeps 60 s before joining an all-reduce. Under the defaults
 *   (no DCCL_TIMEOUT) rank 0 simply waits: no error, and both results are correct.
 * fault_slow_peer timeout: DCCL_TIMEOUT=2 and rank 1 5 s late: rank 0's all-reduce fails after about 2 s (we
 *   accept 1.5-4.5 s) with an error that mentions the timeout; rank 1's late call then fails too (its peer gave up)
 *   instead of hanging, and both communicators tear down promptly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "dccl.h"
#include "fault_harness.h"

#define NRANKS 2
#define COUNT 4096

struct rank_report {
  int rc;
  double call_s; /* how long the all-reduce took */
  double cpu_s;  /* CPU time this process spent during it */
  size_t wrong;
  int second_rc; /* a second all-reduce right after (default mode) */
  int async_query_rc, async_err;
  int teardown_rc;
  double teardown_s;
  int done;
  char text[320];
};

struct slow_shared {
  ncclUniqueId id;
  double late_s; /* how late rank 1 joins */
  int timeout_mode;
  struct rank_report r[NRANKS];
};

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
         (double)ru.ru_stime.tv_usec * 1e-6;
}

static int rank_main(void *arg, int rank) {
  struct slow_shared *sh = arg;
  struct rank_report *me = &sh->r[rank];
  ncclComm_t comm;
  ncclResult_t rc = ncclCommInitRank(&comm, NRANKS, sh->id, rank);
  if (rc != ncclSuccess) {
    snprintf(me->text, sizeof me->text, "init: %s: %s", ncclGetErrorString(rc), ncclGetLastError(NULL));
    return 10;
  }
  float *send = malloc(COUNT * sizeof(float)), *recv = calloc(COUNT, sizeof(float));
  if (!send || !recv) return 11;
  fh_fill(send, COUNT, rank, 1);
  if (rank == 1) fh_sleep(sh->late_s);
  double cpu0 = cpu_seconds(), t0 = fh_now();
  rc = ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, NULL);
  me->call_s = fh_now() - t0;
  me->cpu_s = cpu_seconds() - cpu0;
  me->rc = rc;
  if (rc == ncclSuccess) {
    me->wrong = fh_check_sum(recv, COUNT, NRANKS, 1, NULL);
    if (!sh->timeout_mode) {
      fh_fill(send, COUNT, rank, 2);
      me->second_rc = ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, NULL);
      if (me->second_rc == ncclSuccess) me->wrong += fh_check_sum(recv, COUNT, NRANKS, 2, NULL);
    }
  } else {
    fh_copy_text(me->text, sizeof me->text, ncclGetLastError(NULL));
  }
  ncclResult_t async = ncclSuccess;
  me->async_query_rc = ncclCommGetAsyncError(comm, &async);
  me->async_err = async;
  t0 = fh_now();
  me->teardown_rc = rc == ncclSuccess ? ncclCommDestroy(comm) : ncclCommAbort(comm);
  me->teardown_s = fh_now() - t0;
  me->done = 1;
  free(send);
  free(recv);
  return 0;
}

static void check_default(struct slow_shared *sh) {
  for (int r = 0; r < NRANKS; r++) {
    struct rank_report *rep = &sh->r[r];
    if (!rep->done) continue; /* already reported as hung or crashed */
    FH_EXPECT(rep->rc == ncclSuccess, "rank %d: all-reduce with a peer %.0f s late returned %s after %.1f s: %s", r,
              sh->late_s, ncclGetErrorString((ncclResult_t)rep->rc), rep->call_s, rep->text);
    FH_EXPECT(rep->second_rc == ncclSuccess, "rank %d: the next all-reduce returned %s", r,
              ncclGetErrorString((ncclResult_t)rep->second_rc));
    FH_EXPECT(rep->wrong == 0, "rank %d: %zu wrong elements", r, rep->wrong);
    FH_EXPECT(rep->async_query_rc == ncclSuccess && rep->async_err == ncclSuccess,
              "rank %d: ncclCommGetAsyncError returned %s, async error %s", r,
              ncclGetErrorString((ncclResult_t)rep->async_query_rc), ncclGetErrorString((ncclResult_t)rep->async_err));
    FH_EXPECT(rep->teardown_rc == ncclSuccess, "rank %d: ncclCommDestroy returned %s", r,
              ncclGetErrorString((ncclResult_t)rep->teardown_rc));
  }
  /* Rank 0 really waited for its peer rather than finishing alone. */
  if (!sh->r[0].done) return;
  FH_EXPECT(sh->r[0].call_s >= sh->late_s - 5.0, "rank 0's all-reduce returned after %.1f s, before its peer joined",
            sh->r[0].call_s);
  fh_note("default: rank 0 waited %.1f s for its peer using %.3f s of CPU (%.2f%% of a core); rank 1's call took "
          "%.3f s",
          sh->r[0].call_s, sh->r[0].cpu_s, 100.0 * sh->r[0].cpu_s / (sh->r[0].call_s > 0 ? sh->r[0].call_s : 1),
          sh->r[1].call_s);
}

static void check_timeout(struct slow_shared *sh) {
  struct rank_report *waiter = &sh->r[0], *late = &sh->r[1];
  if (waiter->done) {
    FH_EXPECT(waiter->rc != ncclSuccess && waiter->rc != ncclInProgress,
              "rank 0: all-reduce with DCCL_TIMEOUT=2 and a peer 5 s late returned %s after %.2f s",
              ncclGetErrorString((ncclResult_t)waiter->rc), waiter->call_s);
    if (waiter->rc != ncclSuccess) {
      FH_EXPECT(waiter->call_s >= 1.5 && waiter->call_s <= 4.5, "rank 0 failed after %.2f s, want about 2 s",
                waiter->call_s);
      FH_EXPECT(fh_text_has(waiter->text, "timeout") || fh_text_has(waiter->text, "timed out") ||
                    fh_text_has(waiter->text, "time out"),
                "rank 0's error does not mention the timeout: \"%s\"", waiter->text);
    }
    fh_note("timeout: rank 0 failed after %.2f s (%s): \"%s\"; async error %s", waiter->call_s,
            ncclGetErrorString((ncclResult_t)waiter->rc), waiter->text,
            ncclGetErrorString((ncclResult_t)waiter->async_err));
  }
  if (late->done) {
    /* The late rank's call cannot succeed (its peer gave up); it must fail rather than hang. */
    FH_EXPECT(late->rc != ncclSuccess, "rank 1's late all-reduce succeeded although rank 0 gave up");
    FH_EXPECT(late->call_s <= 4.5, "rank 1's late all-reduce took %.2f s to fail", late->call_s);
    fh_note("timeout: late rank 1 failed after %.2f s (%s): \"%s\"", late->call_s,
            ncclGetErrorString((ncclResult_t)late->rc), late->text);
  }
  for (int r = 0; r < NRANKS; r++)
    if (sh->r[r].done)
      FH_EXPECT(sh->r[r].teardown_s <= 2.0 && sh->r[r].teardown_rc == ncclSuccess,
                "rank %d: ncclCommAbort returned %s after %.3f s", r,
                ncclGetErrorString((ncclResult_t)sh->r[r].teardown_rc), sh->r[r].teardown_s);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "timeout";
  struct slow_shared *sh = fh_shared_alloc(sizeof *sh);
  if (!sh) return 1;
  if (strcmp(mode, "default") == 0) {
    unsetenv("DCCL_TIMEOUT");
    unsetenv("NCCL_TIMEOUT");
    sh->late_s = 60.0;
  } else if (strcmp(mode, "timeout") == 0) {
    setenv("DCCL_TIMEOUT", "2", 1); /* before the library reads its parameters; the ranks inherit it */
    sh->late_s = 5.0;
    sh->timeout_mode = 1;
  } else {
    fprintf(stderr, "usage: %s default|timeout\n", argv[0]);
    return 2;
  }
  struct fh_shm_snapshot snap;
  fh_shm_snapshot_take(&snap);
  if (fh_unique_id(&sh->id) != ncclSuccess) return 1;
  double t0 = fh_now();
  pid_t pids[NRANKS];
  for (int r = 0; r < NRANKS; r++) pids[r] = fh_spawn(rank_main, sh, r);
  int status[NRANKS], killed[NRANKS];
  fh_wait_until(pids, NRANKS, t0 + sh->late_s + 30.0, status, killed);
  for (int r = 0; r < NRANKS; r++) {
    char buf[96];
    if (killed[r] || !fh_status_ok(status[r]))
      FH_FAIL("rank %d %s (%s) after %.1f s: %s", r, killed[r] ? "hung: killed by the test" : "ended badly",
              fh_status_str(status[r], buf, sizeof buf), fh_now() - t0, sh->r[r].text);
  }
  if (sh->timeout_mode)
    check_timeout(sh);
  else
    check_default(sh);
  fh_shm_check_leaks(&snap, mode);
  fh_note("slow peer, %s: %.1f s, %s", mode, fh_now() - t0, fh_failures ? "FAILED" : "passed");
  return fh_failures ? 1 : 0;
}
