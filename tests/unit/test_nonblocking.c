/* Nonblocking communicators (ncclConfig_t.blocking = 0), as NCCL documents them: creation, split, shrink,
 * finalize and collectives return ncclInProgress at once and finish in the background; ncclCommGetAsyncError
 * reports ncclInProgress until then. Ranks are forked processes (the id is made before the fork); each case has
 * a watchdog, so a hang fails it. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dccl.h"
#include "unit_check.h"

#define COUNT 100000

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static ncclConfig_t nonblocking(void) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  return cfg;
}

/* Polls until the communicator is no longer in progress; returns what it settled on. */
static ncclResult_t settle(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 30000 && state == ncclInProgress; i++) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
    if (state == ncclInProgress) usleep(1000);
  }
  return state;
}

/* Runs body(rank, nranks, id) in nranks forked processes; passes when every one exits 0. */
static void run_ranks(const char *name, int nranks, int (*body)(int, int, ncclUniqueId)) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    check(0, "%s: ncclGetUniqueId: %s", name, ncclGetLastError(NULL));
    return;
  }
  fflush(NULL);
  pid_t pids[8];
  for (int r = 0; r < nranks; r++)
    if ((pids[r] = fork()) == 0) {
      alarm(60);
      _exit(body(r, nranks, id));
    }
  int ok = 1;
  for (int r = 0; r < nranks; r++) {
    int status = 0;
    pid_t got = waitpid(pids[r], &status, 0);
    if (got != pids[r] || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      printf("  %s: rank %d failed (status %#x)\n", name, r, status);
      ok = 0;
    }
  }
  check(ok, "%s", name);
  printf("%s %s\n", ok ? "PASS" : "FAIL", name);
}

#define EXPECT(cond, ...)                               \
  do {                                                  \
    if (!(cond)) {                                      \
      printf("  rank %d: ", rank);                      \
      printf(__VA_ARGS__);                              \
      printf(" (%s)\n", ncclGetLastError(NULL));        \
      return 1;                                         \
    }                                                   \
  } while (0)

/* Checks an all-reduce of (rank + 1) over nranks ranks. */
static int sum_ok(const float *out, int nranks) {
  float want = (float)(nranks * (nranks + 1) / 2);
  for (int i = 0; i < COUNT; i++)
    if (out[i] != want) return 0;
  return 1;
}

/* One rank is 2 s late, to creation and to its all-reduce: the others' calls return at once. */
static int late_rank(int rank, int nranks, ncclUniqueId id) {
  int late = rank == nranks - 1;
  if (late) sleep(2);
  ncclConfig_t cfg = nonblocking();
  ncclComm_t comm;
  double t0 = now_ms();
  ncclResult_t r = ncclCommInitRankConfig(&comm, nranks, id, rank, &cfg);
  double took = now_ms() - t0;
  EXPECT(r == ncclInProgress || (late && r == ncclSuccess), "init returned %d", (int)r);
  EXPECT(took < 500, "init took %.0f ms", took);
  ncclResult_t state;
  EXPECT(ncclCommGetAsyncError(comm, &state) == ncclSuccess, "ncclCommGetAsyncError failed");
  EXPECT(late || state == ncclInProgress, "an on-time rank's creation reported %d before the late rank joined",
         (int)state);
  float *in = malloc(COUNT * sizeof(float)), *out = calloc(COUNT, sizeof(float));
  for (int i = 0; i < COUNT; i++) in[i] = (float)(rank + 1);
  EXPECT(ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL) == ncclInvalidUsage || late,
         "a collective on a communicator still being created was not refused");
  EXPECT(settle(comm) == ncclSuccess, "creation did not succeed");
  if (late) sleep(2);
  t0 = now_ms();
  r = ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL);
  took = now_ms() - t0;
  EXPECT(r == ncclInProgress || r == ncclSuccess, "all-reduce returned %d", (int)r);
  EXPECT(took < 500, "all-reduce took %.0f ms", took);
  EXPECT(ncclCommGetAsyncError(comm, &state) == ncclSuccess && (late || state == ncclInProgress),
         "an on-time rank's all-reduce reported %d before the late rank called", (int)state);
  EXPECT(settle(comm) == ncclSuccess, "the all-reduce did not succeed");
  EXPECT(sum_ok(out, nranks), "wrong all-reduce result");
  r = ncclCommFinalize(comm);
  EXPECT(r == ncclSuccess || r == ncclInProgress, "finalize returned %d", (int)r);
  EXPECT(settle(comm) == ncclSuccess && ncclCommDestroy(comm) == ncclSuccess, "finalize/destroy");
  free(in);
  free(out);
  return 0;
}

/* Two communicators used in opposite orders on the two ranks: with blocking calls this deadlocks; nonblocking
 * calls return and the progress threads finish both. */
static int opposite_orders(int rank, int nranks, ncclUniqueId id) {
  (void)nranks;
  ncclConfig_t cfg = nonblocking();
  ncclComm_t parent, comm[2];
  ncclCommInitRankConfig(&parent, 2, id, rank, &cfg);
  EXPECT(settle(parent) == ncclSuccess, "creation");
  /* The second communicator comes from a split that inherits the nonblocking config. */
  ncclResult_t r = ncclCommSplit(parent, 0, rank, &comm[1], NULL);
  EXPECT(r == ncclInProgress, "nonblocking split returned %d", (int)r);
  EXPECT(settle(comm[1]) == ncclSuccess && settle(parent) == ncclSuccess, "split");
  comm[0] = parent;
  float *in = malloc(COUNT * sizeof(float)), *out[2] = {calloc(COUNT, sizeof(float)), calloc(COUNT, sizeof(float))};
  for (int i = 0; i < COUNT; i++) in[i] = (float)(rank + 1);
  for (int round = 0; round < 20; round++) {
    for (int k = 0; k < 2; k++) {
      int c = rank == 0 ? k : 1 - k;
      r = ncclAllReduce(in, out[c], COUNT, ncclFloat32, ncclSum, comm[c], NULL);
      EXPECT(r == ncclInProgress || r == ncclSuccess, "all-reduce on communicator %d returned %d", c, (int)r);
    }
    for (int c = 0; c < 2; c++) {
      EXPECT(settle(comm[c]) == ncclSuccess, "round %d: communicator %d did not finish", round, c);
      EXPECT(sum_ok(out[c], 2), "round %d: wrong result on communicator %d", round, c);
    }
  }
  EXPECT(ncclCommDestroy(comm[1]) == ncclSuccess && ncclCommDestroy(parent) == ncclSuccess, "destroy");
  free(in);
  free(out[0]);
  free(out[1]);
  return 0;
}

static int done_pipe[2]; /* the shrink case's survivors tell the rank that dies when they are ready */

/* The last rank never calls ncclCommShrink: `dies` has it exit without a word (the others see it die); else it
 * stays idle until they are done. The others shrink it away, blocking and nonblocking, and use the result. */
static int shrink_body(int rank, int nranks, ncclUniqueId id, int dies, int nonblock) {
  ncclConfig_t cfg = nonblock ? nonblocking() : (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  ncclComm_t comm, small;
  ncclResult_t r = ncclCommInitRankConfig(&comm, nranks, id, rank, &cfg);
  EXPECT(r == ncclSuccess || r == ncclInProgress, "init returned %d", (int)r);
  EXPECT(settle(comm) == ncclSuccess, "creation");
  /* An all-reduce over every rank, and the dying rank waits until every other has seen it complete (over a pipe
   * made before the fork): a death any earlier would fail their creation or all-reduce, not test the shrink. */
  float one = 1, all = 0;
  ncclAllReduce(&one, &all, 1, ncclFloat32, ncclSum, comm, NULL);
  EXPECT(settle(comm) == ncclSuccess && all == (float)nranks, "an all-reduce over every rank");
  int out = nranks - 1;
  if (dies && rank != out) EXPECT(write(done_pipe[1], "x", 1) == 1, "telling the dying rank");
  if (rank == out) {
    char c;
    for (int i = 0; dies && i < nranks - 1; i++) EXPECT(read(done_pipe[0], &c, 1) == 1, "waiting for the others");
    if (dies) _exit(0); /* no destroy: a death */
    sleep(3);
    ncclCommDestroy(comm);
    return 0;
  }
  if (dies) {
    ncclResult_t state = ncclSuccess;
    for (int i = 0; i < 5000 && state == ncclSuccess; i++) {
      ncclCommGetAsyncError(comm, &state);
      usleep(1000);
    }
    EXPECT(state == ncclRemoteError, "the death was not seen (%d)", (int)state);
  }
  r = ncclCommShrink(comm, &out, 1, &small, NULL, NCCL_SHRINK_DEFAULT);
  EXPECT(r == (nonblock ? ncclInProgress : ncclSuccess), "shrink returned %d", (int)r);
  EXPECT(settle(small) == ncclSuccess, "the shrunk communicator");
  int n = 0, me = -1;
  ncclCommCount(small, &n);
  ncclCommUserRank(small, &me);
  EXPECT(n == nranks - 1 && me == rank, "shrunk to %d ranks, rank %d", n, me);
  float *in = malloc(COUNT * sizeof(float)), *res = calloc(COUNT, sizeof(float));
  for (int i = 0; i < COUNT; i++) in[i] = (float)(rank + 1);
  r = ncclAllReduce(in, res, COUNT, ncclFloat32, ncclSum, small, NULL);
  EXPECT(settle(small) == ncclSuccess && sum_ok(res, nranks - 1), "all-reduce on the shrunk communicator (%d)",
         (int)r);
  ncclCommDestroy(small);
  if (dies) ncclCommAbort(comm); else ncclCommDestroy(comm);
  free(in);
  free(res);
  return 0;
}
static int shrink_idle_blocking(int rank, int nranks, ncclUniqueId id) { return shrink_body(rank, nranks, id, 0, 0); }
static int shrink_idle_nonblocking(int rank, int nranks, ncclUniqueId id) { return shrink_body(rank, nranks, id, 0, 1); }
static int shrink_dead(int rank, int nranks, ncclUniqueId id) { return shrink_body(rank, nranks, id, 1, 1); }

/* Every rank but the last posts an all-reduce the last never joins (it hangs), then every rank revokes: the posted
 * operation stops, ncclCommGetAsyncError settles on ncclSuccess, calls are refused, and a split of the revoked
 * communicator (the last rank joins nothing) works. */
static int revoke_then_split(int rank, int nranks, ncclUniqueId id) {
  ncclConfig_t cfg = nonblocking();
  ncclComm_t comm, sub = NULL;
  ncclCommInitRankConfig(&comm, nranks, id, rank, &cfg);
  EXPECT(settle(comm) == ncclSuccess, "creation");
  int silent = rank == nranks - 1;
  float *in = malloc(COUNT * sizeof(float)), *out = calloc(COUNT, sizeof(float));
  for (int i = 0; i < COUNT; i++) in[i] = (float)(rank + 1);
  ncclResult_t state = ncclSuccess;
  if (!silent) {
    EXPECT(ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL) == ncclInProgress, "posting");
    usleep(300000);
    EXPECT(ncclCommGetAsyncError(comm, &state) == ncclSuccess && state == ncclInProgress,
           "the all-reduce without the last rank reported %d", (int)state);
  }
  EXPECT(ncclCommRevoke(comm, 1) == ncclInvalidArgument, "revoke with flags 1 was not refused");
  double t0 = now_ms();
  EXPECT(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclSuccess, "revoke");
  EXPECT(settle(comm) == ncclSuccess, "the revoked communicator did not settle on ncclSuccess");
  EXPECT(now_ms() - t0 < 2000, "settling took %.0f ms", now_ms() - t0);
  EXPECT(ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL) == ncclInvalidUsage &&
             strstr(ncclGetLastError(comm), "revoked"),
         "a call on a revoked communicator was not refused");
  EXPECT(ncclCommFinalize(comm) == ncclInvalidUsage, "finalize after revoke was not refused");
  ncclResult_t r = ncclCommSplit(comm, silent ? NCCL_SPLIT_NOCOLOR : 0, rank, &sub, NULL);
  EXPECT(r == ncclInProgress, "split of the revoked communicator returned %d", (int)r);
  EXPECT(settle(comm) == ncclSuccess, "the split did not finish");
  if (!silent) {
    int n = 0;
    EXPECT(sub && settle(sub) == ncclSuccess && ncclCommCount(sub, &n) == ncclSuccess && n == nranks - 1,
           "the split communicator (%d ranks)", n);
    memset(out, 0, COUNT * sizeof(float));
    ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, sub, NULL);
    EXPECT(settle(sub) == ncclSuccess && sum_ok(out, nranks - 1), "all-reduce on the split communicator");
    ncclCommDestroy(sub);
  } else {
    EXPECT(sub == NULL, "NCCL_SPLIT_NOCOLOR gave a communicator");
  }
  EXPECT(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  free(in);
  free(out);
  return 0;
}

/* The last rank is alive but never calls: the others' all-reduce hangs on it, and ncclCommShrink with
 * NCCL_SHRINK_ABORT ends that all-reduce first, then leaves the last rank out. */
static int shrink_abort(int rank, int nranks, ncclUniqueId id) {
  ncclConfig_t cfg = nonblocking();
  ncclComm_t comm, small = NULL;
  ncclCommInitRankConfig(&comm, nranks, id, rank, &cfg);
  EXPECT(settle(comm) == ncclSuccess, "creation");
  int out_rank = nranks - 1;
  if (rank == out_rank) {
    sleep(3); /* silent, then gone */
    ncclCommDestroy(comm);
    return 0;
  }
  float *in = malloc(COUNT * sizeof(float)), *out = calloc(COUNT, sizeof(float));
  for (int i = 0; i < COUNT; i++) in[i] = (float)(rank + 1);
  EXPECT(ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL) == ncclInProgress, "posting");
  usleep(300000);
  ncclResult_t state = ncclSuccess;
  EXPECT(ncclCommGetAsyncError(comm, &state) == ncclSuccess && state == ncclInProgress,
         "the all-reduce without the last rank reported %d", (int)state);
  EXPECT(ncclCommShrink(comm, &out_rank, 1, &small, NULL, 2) == ncclInvalidArgument, "flags 2 were not refused");
  ncclResult_t r = ncclCommShrink(comm, &out_rank, 1, &small, NULL, NCCL_SHRINK_ABORT);
  EXPECT(r == ncclInProgress, "shrink returned %d", (int)r);
  EXPECT(settle(small) == ncclSuccess, "the shrunk communicator");
  EXPECT(settle(comm) == ncclSuccess, "the parent's stopped all-reduce did not end");
  memset(out, 0, COUNT * sizeof(float));
  ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, small, NULL);
  EXPECT(settle(small) == ncclSuccess && sum_ok(out, nranks - 1), "all-reduce on the shrunk communicator");
  EXPECT(ncclCommDestroy(small) == ncclSuccess && ncclCommDestroy(comm) == ncclSuccess, "destroy");
  free(in);
  free(out);
  return 0;
}

/* A watchdog, as PyTorch's: it stops a communicator whose blocking all-reduce hangs, either by ncclCommAbort (which
 * frees it) or by ncclCommRevoke and polling ncclCommGetAsyncError until the revocation has completed (then it may
 * destroy it). Neither may end while the hung call is still inside DCCL (the communicator would be freed under
 * it): when abort returns, or the watchdog first reads ncclSuccess, the call has returned (its thread sets
 * `returned` right after). */
struct watchdog {
  ncclComm_t comm;
  int aborts; /* ncclCommAbort, else ncclCommRevoke */
  _Atomic int returned;
  int early; /* the watchdog was done while the call was still inside */
  double stopped_ms;
};

static void *watch(void *arg) {
  struct watchdog *w = arg;
  usleep(300000);
  w->stopped_ms = now_ms();
  if (w->aborts) {
    ncclCommAbort(w->comm);
  } else {
    ncclCommRevoke(w->comm, NCCL_REVOKE_DEFAULT);
    ncclResult_t state = ncclInProgress;
    while (ncclCommGetAsyncError(w->comm, &state) == ncclSuccess && state == ncclInProgress) continue;
  }
  double seen = now_ms(); /* the call's last steps out of DCCL take well under 50 us (the bug's window: 0.7 ms) */
  while (!atomic_load(&w->returned) && now_ms() - seen < 0.05) continue;
  w->early = !atomic_load(&w->returned);
  return NULL;
}

/* A blocking communicator: rank 0's all-reduce waits for rank 1, which never calls; rank 0's watchdog thread
 * stops it, and the all-reduce must return at once with an error saying why (a revoked communicator then
 * settles). */
static int watchdog_body(int rank, int nranks, ncclUniqueId id, int aborts) {
  ncclComm_t comm;
  EXPECT(ncclCommInitRank(&comm, nranks, id, rank) == ncclSuccess, "creation");
  if (rank == 1) {
    sleep(3); /* silent, then gone */
    ncclCommDestroy(comm);
    return 0;
  }
  float in = 1, out = 0;
  struct watchdog w = {.comm = comm, .aborts = aborts};
  pthread_t thread;
  EXPECT(pthread_create(&thread, NULL, watch, &w) == 0, "starting the watchdog");
  ncclResult_t r = ncclAllReduce(&in, &out, 1, ncclFloat32, ncclSum, comm, NULL);
  atomic_store(&w.returned, 1);
  double took = now_ms() - w.stopped_ms;
  char why[512];
  snprintf(why, sizeof(why), "%s", ncclGetLastError(NULL));
  pthread_join(thread, NULL);
  EXPECT(r != ncclSuccess, "the all-reduce returned ncclSuccess");
  /* Its links carry this rank's own stop: that is no peer giving up. */
  EXPECT(strstr(why, aborts ? "aborted" : "revoked") && !strstr(why, "gave up"), "the all-reduce's error: %s", why);
  EXPECT(!w.early, "%s while the all-reduce was still running",
         aborts ? "ncclCommAbort returned" : "ncclCommGetAsyncError reported the revocation complete");
  EXPECT(took < 250, "the all-reduce returned %.0f ms after the %s", took, aborts ? "abort" : "revocation");
  printf("  rank 0: the hung all-reduce returned %.1f ms after the %s\n", took, aborts ? "abort" : "revocation");
  if (aborts) return 0;
  EXPECT(settle(comm) == ncclSuccess, "the revoked communicator did not settle on ncclSuccess");
  EXPECT(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  return 0;
}
static int revoke_blocking(int rank, int nranks, ncclUniqueId id) { return watchdog_body(rank, nranks, id, 0); }
static int abort_blocking(int rank, int nranks, ncclUniqueId id) { return watchdog_body(rank, nranks, id, 1); }

/* The only rank that calls: creation waits for a peer that never comes, and ncclCommAbort stops it. */
static int abort_pending(int rank, int nranks, ncclUniqueId id) {
  (void)nranks;
  ncclConfig_t cfg = nonblocking();
  ncclComm_t comm;
  ncclResult_t r = ncclCommInitRankConfig(&comm, 2, id, rank, &cfg);
  EXPECT(r == ncclInProgress, "init returned %d", (int)r);
  usleep(200000);
  ncclResult_t state;
  EXPECT(ncclCommGetAsyncError(comm, &state) == ncclSuccess && state == ncclInProgress, "state %d", (int)state);
  double t0 = now_ms();
  EXPECT(ncclCommAbort(comm) == ncclSuccess, "abort");
  EXPECT(now_ms() - t0 < 2000, "abort took %.0f ms", now_ms() - t0);
  return 0;
}

/* ncclCommAbort inside a group drops the group's calls on that communicator (they would outlive it); the group's
 * calls on another communicator still run at ncclGroupEnd. Two communicators of one rank each. */
static int abort_in_group(int rank, int nranks, ncclUniqueId id) {
  ncclComm_t a, b;
  ncclUniqueId other;
  EXPECT(ncclGetUniqueId(&other) == ncclSuccess, "a second id");
  EXPECT(ncclCommInitRank(&a, nranks, id, rank) == ncclSuccess && ncclCommInitRank(&b, nranks, other, rank) ==
             ncclSuccess, "creation");
  float in = 3, out_a = 0, out_b = 0;
  ncclGroupStart();
  EXPECT(ncclAllReduce(&in, &out_a, 1, ncclFloat32, ncclSum, a, NULL) == ncclSuccess, "all-reduce on a, grouped");
  EXPECT(ncclAllReduce(&in, &out_b, 1, ncclFloat32, ncclSum, b, NULL) == ncclSuccess, "all-reduce on b, grouped");
  EXPECT(ncclCommAbort(a) == ncclSuccess, "abort of a inside the group");
  EXPECT(ncclGroupEnd() == ncclSuccess, "the group's end");
  EXPECT(out_b == 3 && out_a == 0, "after the group: b's all-reduce gave %g, a's (dropped) %g", out_b, out_a);
  EXPECT(ncclCommDestroy(b) == ncclSuccess, "destroy");
  return 0;
}

/* One thread creates three communicators of one job in a group, then runs an all-reduce on each in a group. */
static int group_of_inits(int rank, int nranks, ncclUniqueId id) {
  (void)nranks;
  enum { N = 3 };
  ncclConfig_t cfg = nonblocking();
  ncclComm_t comms[N];
  ncclGroupStart();
  for (int r = 0; r < N; r++) ncclCommInitRankConfig(&comms[r], N, id, r, &cfg);
  ncclResult_t res = ncclGroupEnd();
  EXPECT(res == ncclInProgress, "ncclGroupEnd of nonblocking creations returned %d", (int)res);
  for (int r = 0; r < N; r++) EXPECT(settle(comms[r]) == ncclSuccess, "creation of rank %d", r);
  float *in[N], *out[N];
  ncclGroupStart();
  for (int r = 0; r < N; r++) {
    in[r] = malloc(COUNT * sizeof(float));
    out[r] = calloc(COUNT, sizeof(float));
    for (int i = 0; i < COUNT; i++) in[r][i] = (float)(r + 1);
    ncclAllReduce(in[r], out[r], COUNT, ncclFloat32, ncclSum, comms[r], NULL);
  }
  res = ncclGroupEnd();
  EXPECT(res == ncclInProgress || res == ncclSuccess, "ncclGroupEnd of all-reduces returned %d", (int)res);
  for (int r = 0; r < N; r++) {
    EXPECT(settle(comms[r]) == ncclSuccess && sum_ok(out[r], N), "all-reduce of rank %d", r);
    ncclCommDestroy(comms[r]);
    free(in[r]);
    free(out[r]);
  }
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  run_ranks("late rank: creation and all-reduce return at once", 3, late_rank);
  run_ranks("two communicators in opposite orders", 2, opposite_orders);
  run_ranks("shrink without the excluded rank (idle), blocking", 3, shrink_idle_blocking);
  run_ranks("shrink without the excluded rank (idle), nonblocking", 3, shrink_idle_nonblocking);
  if (pipe(done_pipe) != 0) return 1;
  run_ranks("shrink without the excluded rank (dead)", 3, shrink_dead);
  run_ranks("revoke stops a hung all-reduce, then a split", 3, revoke_then_split);
  run_ranks("shrink with NCCL_SHRINK_ABORT ends a hung all-reduce", 3, shrink_abort);
  run_ranks("a watchdog thread revokes a hung blocking all-reduce", 2, revoke_blocking);
  run_ranks("a watchdog thread aborts a hung blocking all-reduce", 2, abort_blocking);
  run_ranks("abort stops a pending creation", 1, abort_pending);
  run_ranks("abort inside a group drops the group's calls on it", 1, abort_in_group);
  run_ranks("nonblocking creations in one group", 1, group_of_inits);
  printf("test_nonblocking: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
