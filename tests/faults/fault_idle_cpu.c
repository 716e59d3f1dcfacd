/* An idle communicator costs no CPU. Communicators of 2 ranks each, one per transport named on the command line
 * (default: shm and socket; `ib` in the soft-RoCE VM, where the proxy thread must fall asleep too), run at the
 * same time: each rank creates its communicator, does one all-reduce, then sleeps 10 s holding it. Over
 * that sleep each process's CPU time (getrusage RUSAGE_SELF: every thread, the library's included) must stay
 * under 1% of one core (100 ms). A last all-reduce then shows the communicator survived the idle time.
 *
 * The top process makes no library call: it forks one launcher per transport, which sets DCCL_TRANSPORT before
 * its first library call (parameters are read once per process), makes the unique id and forks the ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "dccl.h"
#include "fault_harness.h"

#define MAX_GROUPS 3
#define NRANKS 2
#define COUNT 65536
#define IDLE_S 10.0
#define CPU_BOUND_S (0.01 * IDLE_S)

static const char *transports[MAX_GROUPS] = {"shm", "socket"};
static int ngroups = 2;

struct rank_report {
  int done;
  double idle_wall_s, idle_cpu_s;
  double idle_user_s, idle_sys_s;
  char error[320];
};

struct idle_shared {
  ncclUniqueId id[MAX_GROUPS];
  int launcher_ok[MAX_GROUPS];
  double launcher_cpu_s[MAX_GROUPS]; /* the id holder's CPU over the same time: reported, not judged */
  struct rank_report r[MAX_GROUPS][NRANKS];
};

static struct idle_shared *shared;

static void cpu_times(double *user, double *sys) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  *user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
  *sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static int run_allreduce(ncclComm_t comm, int rank, int iter, char *error, size_t len) {
  float *send = malloc(COUNT * sizeof(float)), *recv = calloc(COUNT, sizeof(float));
  if (!send || !recv) return 0;
  fh_fill(send, COUNT, rank, iter);
  ncclResult_t rc = ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, NULL);
  int ok = rc == ncclSuccess && fh_check_sum(recv, COUNT, NRANKS, iter, NULL) == 0;
  if (rc != ncclSuccess)
    snprintf(error, len, "all-reduce #%d: %s: %s", iter, ncclGetErrorString(rc), ncclGetLastError(NULL));
  else if (!ok)
    snprintf(error, len, "all-reduce #%d: wrong result", iter);
  free(send);
  free(recv);
  return ok;
}

static int rank_main(void *arg, int index) {
  int group = index / NRANKS, rank = index % NRANKS;
  struct rank_report *me = &shared->r[group][rank];
  (void)arg;
  ncclComm_t comm;
  ncclResult_t rc = ncclCommInitRank(&comm, NRANKS, shared->id[group], rank);
  if (rc != ncclSuccess) {
    snprintf(me->error, sizeof me->error, "init: %s: %s", ncclGetErrorString(rc), ncclGetLastError(NULL));
    return 1;
  }
  if (!run_allreduce(comm, rank, 1, me->error, sizeof me->error)) return 1;
  double u0, s0, u1, s1;
  cpu_times(&u0, &s0);
  double t0 = fh_now();
  fh_sleep(IDLE_S);
  cpu_times(&u1, &s1);
  me->idle_wall_s = fh_now() - t0;
  me->idle_user_s = u1 - u0;
  me->idle_sys_s = s1 - s0;
  me->idle_cpu_s = me->idle_user_s + me->idle_sys_s;
  if (!run_allreduce(comm, rank, 2, me->error, sizeof me->error)) return 1;
  rc = ncclCommDestroy(comm);
  if (rc != ncclSuccess) {
    snprintf(me->error, sizeof me->error, "destroy: %s: %s", ncclGetErrorString(rc), ncclGetLastError(NULL));
    return 1;
  }
  me->done = 1;
  return 0;
}

static int launcher_main(void *arg, int group) {
  (void)arg;
  setenv("DCCL_TRANSPORT", transports[group], 1);
  if (fh_unique_id(&shared->id[group]) != ncclSuccess) return 1;
  double u0, s0, u1, s1;
  cpu_times(&u0, &s0);
  pid_t pids[NRANKS];
  for (int r = 0; r < NRANKS; r++) pids[r] = fh_spawn(rank_main, NULL, group * NRANKS + r);
  int status[NRANKS], killed[NRANKS];
  fh_wait_until(pids, NRANKS, fh_now() + IDLE_S + 40.0, status, killed);
  cpu_times(&u1, &s1);
  shared->launcher_cpu_s[group] = (u1 - u0) + (s1 - s0);
  int ok = 1;
  for (int r = 0; r < NRANKS; r++) {
    char buf[96];
    if (killed[r] || !fh_status_ok(status[r])) {
      FH_FAIL("%s rank %d %s (%s): %s", transports[group], r, killed[r] ? "hung: killed by the test" : "failed",
              fh_status_str(status[r], buf, sizeof buf), shared->r[group][r].error);
      ok = 0;
    }
  }
  shared->launcher_ok[group] = ok;
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc > 1) {
    ngroups = argc - 1 < MAX_GROUPS ? argc - 1 : MAX_GROUPS;
    for (int g = 0; g < ngroups; g++) transports[g] = argv[g + 1];
  }
  struct fh_shm_snapshot snap;
  fh_shm_snapshot_take(&snap);
  shared = fh_shared_alloc(sizeof *shared);
  if (!shared) return 1;
  double t0 = fh_now();
  pid_t launchers[MAX_GROUPS];
  for (int g = 0; g < ngroups; g++) launchers[g] = fh_spawn(launcher_main, NULL, g);
  int status[MAX_GROUPS], killed[MAX_GROUPS];
  fh_wait_until(launchers, ngroups, t0 + IDLE_S + 60.0, status, killed);
  for (int g = 0; g < ngroups; g++) {
    char buf[96];
    FH_EXPECT(!killed[g] && fh_status_ok(status[g]), "%s launcher: %s", transports[g],
              killed[g] ? "hung" : fh_status_str(status[g], buf, sizeof buf));
    for (int r = 0; r < NRANKS; r++) {
      struct rank_report *rep = &shared->r[g][r];
      if (!rep->done && rep->idle_wall_s == 0) continue; /* reported by the launcher */
      fh_note("%s rank %d: idle %.2f s, CPU %.1f ms (user %.1f, sys %.1f): %.2f%% of a core", transports[g], r,
              rep->idle_wall_s, rep->idle_cpu_s * 1e3, rep->idle_user_s * 1e3, rep->idle_sys_s * 1e3,
              100.0 * rep->idle_cpu_s / IDLE_S);
      FH_EXPECT(rep->idle_cpu_s < CPU_BOUND_S, "%s rank %d used %.1f ms of CPU over %.0f s idle (bound %.0f ms)",
                transports[g], r, rep->idle_cpu_s * 1e3, IDLE_S, CPU_BOUND_S * 1e3);
    }
    fh_note("%s launcher (holds the unique id): %.1f ms of CPU while its ranks ran (not judged)", transports[g],
            shared->launcher_cpu_s[g] * 1e3);
  }
  fh_shm_check_leaks(&snap, "after the idle CPU test");
  fh_note("idle CPU: %.1f s, %s", fh_now() - t0, fh_failures ? "FAILED" : "passed");
  return fh_failures ? 1 : 0;
}
