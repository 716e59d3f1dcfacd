/* A peer killed in the middle of work: 3 or 4 ranks run all-reduces of varying sizes on host buffers in a loop;
 * the parent SIGKILLs one random rank 0-300 ms after they start. Every survivor's call must fail within 5 s of
 * the kill with an error whose text (ncclGetLastError) names the dead rank, ncclCommGetAsyncError must report an
 * error too, ncclCommAbort / ncclCommDestroy must return promptly, and no dccl-* entry may remain in /dev/shm.
 *
 * Usage: fault_peer_killed shm|socket|ib [trials]   (env FAULT_SEED repeats a run, FAULT_TRIALS overrides trials)
 * The mode is set as DCCL_TRANSPORT before the library reads its parameters (ib needs an RDMA device: the
 * soft-RoCE VM of tests/roce).
 *
 * Survivors report through a shared mapping made before fork; times are CLOCK_MONOTONIC, one clock for every
 * process of the host, so the parent compares a survivor's error time with its own kill time. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dccl.h"
#include "fault_harness.h"

#define MAX_RANKS 4
#define MAX_COUNT 65536
#define DETECT_BOUND_S 5.0 /* kill -> error on every survivor */
#define TEARDOWN_BOUND_S 2.0 /* ncclCommAbort / ncclCommDestroy after the error */
#define INIT_BOUND_S 20.0
#define MAX_HUNG_TRIALS 3 /* then stop: each such trial costs the full deadlines */

struct rank_report {
  int ready;       /* the communicator exists; the loop is starting */
  int iters;       /* all-reduces completed */
  int wrong;       /* all-reduces whose result was wrong */
  int failed;      /* set once the error was recorded */
  int rc;          /* what the failing call returned */
  int failing_count;
  double t_err;    /* when the failing call returned */
  int async_query_rc, async_err;
  int teardown_rc; /* ncclCommAbort or ncclCommDestroy */
  double teardown_s;
  int torn_down;
  char init_error[256];
  char text_null[320], text_comm[320];
};

struct trial_shared {
  int nranks;
  int use_destroy; /* tear down with ncclCommDestroy instead of ncclCommAbort */
  ncclUniqueId id;
  struct rank_report r[MAX_RANKS];
};

static const size_t counts[] = {1, 3, 64, 1000, 4096, 16384, MAX_COUNT, 777, 8};

static void store_int(int *p, int v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static int load_int(const int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

static int rank_main(void *arg, int rank) {
  struct trial_shared *sh = arg;
  struct rank_report *me = &sh->r[rank];
  ncclComm_t comm;
  ncclResult_t rc = ncclCommInitRank(&comm, sh->nranks, sh->id, rank);
  if (rc != ncclSuccess) {
    snprintf(me->init_error, sizeof me->init_error, "%s: %s", ncclGetErrorString(rc), ncclGetLastError(NULL));
    return 10;
  }
  float *send = malloc(MAX_COUNT * sizeof(float)), *recv = malloc(MAX_COUNT * sizeof(float));
  if (!send || !recv) return 11;
  store_int(&me->ready, 1);
  double start = fh_now();
  for (int iter = 0;; iter++) {
    size_t count = counts[(size_t)iter % (sizeof counts / sizeof counts[0])];
    fh_fill(send, count, rank, iter);
    rc = ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, NULL);
    double t = fh_now();
    if (rc != ncclSuccess) {
      me->t_err = t;
      me->rc = rc;
      me->failing_count = (int)count;
      fh_copy_text(me->text_null, sizeof me->text_null, ncclGetLastError(NULL));
      fh_copy_text(me->text_comm, sizeof me->text_comm, ncclGetLastError(comm));
      ncclResult_t async = ncclSuccess;
      me->async_query_rc = ncclCommGetAsyncError(comm, &async);
      me->async_err = async;
      store_int(&me->failed, 1);
      break;
    }
    if (fh_check_sum(recv, count, sh->nranks, iter, NULL) != 0) me->wrong++;
    me->iters++;
    if (t - start > 30.0) return 12; /* never killed: the parent has gone wrong */
  }
  double t0 = fh_now();
  rc = sh->use_destroy ? ncclCommDestroy(comm) : ncclCommAbort(comm);
  me->teardown_s = fh_now() - t0;
  me->teardown_rc = rc;
  store_int(&me->torn_down, 1);
  free(send);
  free(recv);
  return 0;
}

static uint64_t rng_state;
static uint64_t rng_next(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

struct stats {
  double max_detect, sum_detect, max_teardown;
  int ndetect;
  /* Per survivor: how many were checked, and how many broke each rule. */
  int survivors, hung, late, unnamed, no_async, slow_teardown, abort_rc, crashed, wrong;
  int leaks, hung_trials;
};

/* One trial; returns the number of failures it recorded. */
static int run_trial(int trial, const char *mode, struct trial_shared *sh, struct stats *st) {
  int failures_before = fh_failures;
  memset(sh, 0, sizeof *sh);
  sh->nranks = 3 + (int)(rng_next() % 2);
  sh->use_destroy = trial % 2;
  int victim = (int)(rng_next() % (uint64_t)sh->nranks);
  double delay = (double)(rng_next() % 301) / 1000.0;
  const char *teardown = sh->use_destroy ? "ncclCommDestroy" : "ncclCommAbort";
  char where[160];
  snprintf(where, sizeof where, "%s trial %d: %d ranks, rank %d killed %.0f ms after start, %s", mode, trial,
           sh->nranks, victim, delay * 1e3, teardown);

  struct fh_shm_snapshot snap;
  fh_shm_snapshot_take(&snap);
  double t_start = fh_now();
  if (fh_unique_id(&sh->id) != ncclSuccess) return 1;
  pid_t pids[MAX_RANKS];
  for (int r = 0; r < sh->nranks; r++) pids[r] = fh_spawn(rank_main, sh, r);

  /* Wait for every rank to have its communicator. */
  int status[MAX_RANKS], killed[MAX_RANKS];
  int all_ready = 0;
  while (!all_ready && fh_now() < t_start + INIT_BOUND_S) {
    all_ready = 1;
    for (int r = 0; r < sh->nranks; r++) {
      if (!load_int(&sh->r[r].ready)) all_ready = 0;
      if (waitpid(pids[r], &status[r], WNOHANG) == pids[r]) {
        char buf[96];
        FH_FAIL("%s: rank %d ended during init with %s: %s", where, r, fh_status_str(status[r], buf, sizeof buf),
                sh->r[r].init_error);
        pids[r] = -1;
        all_ready = -1;
        break;
      }
    }
    if (all_ready < 0) break;
    if (!all_ready) fh_sleep(0.001);
  }
  if (all_ready != 1) {
    if (all_ready == 0) {
      FH_FAIL("%s: communicator creation took more than %.0f s", where, INIT_BOUND_S);
      st->hung_trials++;
    }
    fh_wait_until(pids, sh->nranks, fh_now(), status, killed);
    fh_shm_snapshot_free(&snap);
    return fh_failures - failures_before;
  }
  double t_ready = fh_now();

  fh_sleep(delay);
  double t_kill = fh_now();
  kill(pids[victim], SIGKILL);

  /* Every survivor must report its error by t_kill + DETECT_BOUND_S, then tear down within TEARDOWN_BOUND_S. */
  for (;;) {
    int pending = 0;
    for (int r = 0; r < sh->nranks; r++)
      if (r != victim && !load_int(&sh->r[r].failed)) pending++;
    if (pending == 0 || fh_now() > t_kill + DETECT_BOUND_S) break;
    fh_sleep(0.001);
  }
  fh_wait_until(pids, sh->nranks, fh_now() + TEARDOWN_BOUND_S + 0.5, status, killed);
  double t_end = fh_now();

  char buf[96];
  if (!(WIFSIGNALED(status[victim]) && WTERMSIG(status[victim]) == SIGKILL))
    FH_FAIL("%s: the victim ended with %s before the kill (after %d all-reduces)", where,
            fh_status_str(status[victim], buf, sizeof buf), sh->r[victim].iters);
  int hung = 0;
  for (int r = 0; r < sh->nranks; r++) {
    if (r == victim) continue;
    struct rank_report *rep = &sh->r[r];
    st->survivors++;
    if (rep->wrong) {
      st->wrong++;
      FH_FAIL("%s: rank %d saw %d wrong all-reduce results before the kill", where, r, rep->wrong);
    }
    if (!rep->failed) {
      st->hung++;
      hung = 1;
      FH_FAIL("%s: rank %d got no error within %.1f s of the kill (%d all-reduces done; %s)", where, r,
              DETECT_BOUND_S, rep->iters,
              killed[r] ? "hung, killed by the test" : fh_status_str(status[r], buf, sizeof buf));
      continue;
    }
    double detect = rep->t_err - t_kill;
    st->max_detect = detect > st->max_detect ? detect : st->max_detect;
    st->sum_detect += detect;
    st->ndetect++;
    if (detect < 0 || detect > DETECT_BOUND_S) {
      st->late++;
      FH_FAIL("%s: rank %d failed %.3f s %s the kill: %s (%s)", where, r, detect < 0 ? -detect : detect,
              detect < 0 ? "BEFORE" : "after", ncclGetErrorString((ncclResult_t)rep->rc), rep->text_null);
    }
    FH_EXPECT(rep->rc != ncclSuccess && rep->rc != ncclInProgress, "%s: rank %d failing call returned %d", where, r,
              rep->rc);
    if (!fh_text_names_rank(rep->text_null, victim) || !fh_text_names_rank(rep->text_comm, victim)) {
      st->unnamed++;
      const char *comm_text = rep->text_comm; /* printed only where it differs from the thread's text */
      int differ = strncmp(rep->text_null, comm_text, sizeof rep->text_null) != 0;
      FH_FAIL("%s: rank %d: the error text does not name dead rank %d: ncclGetLastError(NULL) \"%s\"%s%s%s", where,
              r, victim, rep->text_null, differ ? ", ncclGetLastError(comm) \"" : "", differ ? comm_text : "",
              differ ? "\"" : "");
    }
    if (!(rep->async_query_rc == ncclSuccess && rep->async_err != ncclSuccess && rep->async_err != ncclInProgress)) {
      st->no_async++;
      FH_FAIL("%s: rank %d: ncclCommGetAsyncError returned %s with async error %s", where, r,
              ncclGetErrorString((ncclResult_t)rep->async_query_rc), ncclGetErrorString((ncclResult_t)rep->async_err));
    }
    if (!rep->torn_down) {
      st->slow_teardown++;
      hung = 1;
      FH_FAIL("%s: rank %d: %s did not return within %.1f s (%s)", where, r, teardown, TEARDOWN_BOUND_S,
              killed[r] ? "killed by the test" : fh_status_str(status[r], buf, sizeof buf));
      continue;
    }
    if (rep->teardown_s > st->max_teardown) st->max_teardown = rep->teardown_s;
    if (rep->teardown_s > TEARDOWN_BOUND_S) {
      st->slow_teardown++;
      FH_FAIL("%s: rank %d: %s took %.3f s", where, r, teardown, rep->teardown_s);
    }
    if (!sh->use_destroy && rep->teardown_rc != ncclSuccess) {
      st->abort_rc++;
      FH_FAIL("%s: rank %d: ncclCommAbort returned %s", where, r, ncclGetErrorString((ncclResult_t)rep->teardown_rc));
    }
    if (!fh_status_ok(status[r])) {
      st->crashed++;
      FH_FAIL("%s: rank %d ended with %s", where, r, fh_status_str(status[r], buf, sizeof buf));
    }
  }
  st->hung_trials += hung;
  st->leaks += fh_shm_check_leaks(&snap, where);
  fh_shm_snapshot_free(&snap);

  int failed = fh_failures - failures_before;
  if (failed || trial < 2 || trial % 10 == 9) {
    int s = victim == 0 ? 1 : 0;
    fh_note("%s: init %.0f ms, trial %.0f ms, survivor %d: %d all-reduces, error after %.0f ms: %s%s", where,
            (t_ready - t_start) * 1e3, (t_end - t_start) * 1e3, s, sh->r[s].iters, (sh->r[s].t_err - t_kill) * 1e3,
            sh->r[s].text_null, failed ? "  [FAILED]" : "");
  }
  return failed;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "shm";
  if (strcmp(mode, "shm") != 0 && strcmp(mode, "socket") != 0 && strcmp(mode, "ib") != 0) {
    fprintf(stderr, "usage: %s shm|socket|ib [trials]\n", argv[0]);
    return 2;
  }
  /* Before any library call: the library reads its parameters once per process, and children inherit them. */
  setenv("DCCL_TRANSPORT", mode, 1);
  unsetenv("DCCL_TIMEOUT");
  int trials = argc > 2 ? atoi(argv[2]) : 50;
  if (getenv("FAULT_TRIALS")) trials = atoi(getenv("FAULT_TRIALS"));
  uint64_t seed = getenv("FAULT_SEED") ? strtoull(getenv("FAULT_SEED"), NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid();
  rng_state = seed ? seed : 1;
  fh_note("peer killed, %s: %d trials, FAULT_SEED=%llu", mode, trials, (unsigned long long)seed);

  struct trial_shared *sh = fh_shared_alloc(sizeof *sh);
  if (!sh) return 1;
  struct stats st = {0};
  double t0 = fh_now();
  int failed_trials = 0, run = 0;
  for (int t = 0; t < trials; t++) {
    if (run_trial(t, mode, sh, &st) > 0) failed_trials++;
    run = t + 1;
    if (st.hung_trials >= MAX_HUNG_TRIALS) {
      FH_FAIL("stopping after %d trials, %d of which hung", run, st.hung_trials);
      break;
    }
  }
  fh_note("peer killed, %s: %d trials in %.1f s, %d failed; kill->error mean %.0f ms, max %.0f ms; teardown max "
          "%.0f ms; seed %llu",
          mode, run, fh_now() - t0, failed_trials, st.ndetect ? st.sum_detect / st.ndetect * 1e3 : 0.0,
          st.max_detect * 1e3, st.max_teardown * 1e3, (unsigned long long)seed);
  fh_note("peer killed, %s: of %d survivors: %d got no error in %.0f s, %d failed too late/early, %d errors did not "
          "name the dead rank, %d without async error, %d slow teardowns, %d aborts not ncclSuccess, %d crashed, %d "
          "saw wrong results; %d /dev/shm leftovers",
          mode, st.survivors, st.hung, DETECT_BOUND_S, st.late, st.unnamed, st.no_async, st.slow_teardown,
          st.abort_rc, st.crashed, st.wrong, st.leaks);
  return fh_failures ? 1 : 0;
}
