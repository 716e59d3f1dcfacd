/* Progress when oversubscribed: 8 ranks on a 2-core machine run 200 small all-reduces and 5 of 1 MiB, every result
 * checked, within a generous bound (60 s after the communicator exists). Waits that spin without yielding make
 * this crawl or stall; waits that sleep too eagerly make it slow.
 *
 * Usage: fault_oversubscribed [shm|socket] (default shm) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dccl.h"
#include "fault_harness.h"

#define NRANKS 8
#define NSMALL 200
#define NBIG 5
#define BIG_COUNT (1u << 18) /* 1 MiB of floats */
#define RUN_BOUND_S 60.0
#define INIT_BOUND_S 60.0

struct rank_report {
  int progress; /* operations completed */
  int wrong;
  double init_s, small_s, big_s;
  char error[320];
};

struct over_shared {
  ncclUniqueId id;
  struct rank_report r[NRANKS];
};

static int rank_main(void *arg, int rank) {
  struct over_shared *sh = arg;
  struct rank_report *me = &sh->r[rank];
  double t0 = fh_now();
  ncclComm_t comm;
  ncclResult_t rc = ncclCommInitRank(&comm, NRANKS, sh->id, rank);
  if (rc != ncclSuccess) {
    snprintf(me->error, sizeof me->error, "init: %s: %s", ncclGetErrorString(rc), ncclGetLastError(NULL));
    return 1;
  }
  double t1 = fh_now();
  me->init_s = t1 - t0;
  float *send = malloc(BIG_COUNT * sizeof(float)), *recv = malloc(BIG_COUNT * sizeof(float));
  if (!send || !recv) return 1;
  for (int i = 0; i < NSMALL + NBIG; i++) {
    size_t count = i < NSMALL ? (size_t)(1 + (i * 37) % 2048) : BIG_COUNT;
    if (i == NSMALL) me->small_s = fh_now() - t1;
    fh_fill(send, count, rank, i);
    rc = ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, NULL);
    if (rc != ncclSuccess) {
      snprintf(me->error, sizeof me->error, "all-reduce #%d (%zu floats): %s: %s", i, count, ncclGetErrorString(rc),
               ncclGetLastError(NULL));
      return 1;
    }
    size_t first = 0, bad = fh_check_sum(recv, count, NRANKS, i, &first);
    if (bad) {
      if (!me->wrong)
        snprintf(me->error, sizeof me->error, "all-reduce #%d (%zu floats): %zu wrong, first [%zu] = %g", i, count,
                 bad, first, (double)recv[first]);
      me->wrong++;
    }
    me->progress = i + 1;
  }
  me->big_s = fh_now() - t1 - me->small_s;
  rc = ncclCommDestroy(comm);
  if (rc != ncclSuccess) {
    snprintf(me->error, sizeof me->error, "destroy: %s: %s", ncclGetErrorString(rc), ncclGetLastError(NULL));
    return 1;
  }
  free(send);
  free(recv);
  return me->wrong ? 1 : 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "shm";
  if (strcmp(mode, "shm") != 0 && strcmp(mode, "socket") != 0) {
    fprintf(stderr, "usage: %s [shm|socket]\n", argv[0]);
    return 2;
  }
  setenv("DCCL_TRANSPORT", mode, 1); /* before the library reads its parameters */
  struct fh_shm_snapshot snap;
  fh_shm_snapshot_take(&snap);
  struct over_shared *sh = fh_shared_alloc(sizeof *sh);
  if (!sh || fh_unique_id(&sh->id) != ncclSuccess) return 1;
  double t0 = fh_now();
  pid_t pids[NRANKS];
  for (int r = 0; r < NRANKS; r++) pids[r] = fh_spawn(rank_main, sh, r);
  int status[NRANKS], killed[NRANKS];
  fh_wait_until(pids, NRANKS, t0 + INIT_BOUND_S + RUN_BOUND_S, status, killed);
  double max_init = 0, max_small = 0, max_big = 0;
  for (int r = 0; r < NRANKS; r++) {
    struct rank_report *rep = &sh->r[r];
    char buf[96];
    if (killed[r])
      FH_FAIL("rank %d hung: %d of %d all-reduces done after %.0f s", r, rep->progress, NSMALL + NBIG,
              INIT_BOUND_S + RUN_BOUND_S);
    else if (!fh_status_ok(status[r]))
      FH_FAIL("rank %d ended with %s after %d all-reduces: %s", r, fh_status_str(status[r], buf, sizeof buf),
              rep->progress, rep->error);
    if (rep->init_s > max_init) max_init = rep->init_s;
    if (rep->small_s > max_small) max_small = rep->small_s;
    if (rep->big_s > max_big) max_big = rep->big_s;
  }
  FH_EXPECT(max_small + max_big <= RUN_BOUND_S, "the all-reduces took %.1f s (bound %.0f s)", max_small + max_big,
            RUN_BOUND_S);
  fh_shm_check_leaks(&snap, "after the oversubscribed test");
  fh_note("oversubscribed, %s, %d ranks: init %.2f s, %d small all-reduces %.2f s (%.2f ms each), %d x 1 MiB %.2f s; "
          "total %.1f s, %s",
          mode, NRANKS, max_init, NSMALL, max_small, max_small / NSMALL * 1e3, NBIG, max_big, fh_now() - t0,
          fh_failures ? "FAILED" : "passed");
  return fh_failures ? 1 : 0;
}
