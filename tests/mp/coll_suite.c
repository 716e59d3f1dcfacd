/* coll_suite: every collective x type x op x size x placement x root on one communicator, checked on every rank
 * against an exact reference, and every rank's output compared bitwise with rank 0's.
 *
 * Two launch modes in one binary:
 *   mpirun -np K coll_suite [options]   MPI creates the processes; the communicator comes from the MPI bootstrap
 *                                       and MPI gathers the per-case records to rank 0.
 *   coll_suite --fork N [options]       no MPI: this process makes a unique id, forks N ranks that join it, and
 *                                       the records travel through a shared mapping made before the fork.
 * The summary line is "P passed, F failed"; the exit status is nonzero on any failure. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dccl.h"
#include "suite.h"
#include "suite_device.h"
#if defined(DCCL_TEST_HAVE_MPI)
#include <mpi.h>
#endif
#if defined(DCCL_TEST_HAVE_DCCL_MPI)
#include "dccl_mpi.h"
#endif

static void print_header(const struct suite_options *opt, const char *mode, int nranks, size_t ncases) {
  const char *transport = getenv("DCCL_TRANSPORT"), *hostid = getenv("DCCL_HOSTID");
  printf("coll_suite: %d ranks (%s), %s buffers, algo %s, transport %s%s, %zu %s\n", nranks, mode,
         opt->device ? "GPU" : "host", opt->algo ? opt->algo : "default", transport && *transport ? transport : "default",
         hostid && *hostid ? " (DCCL_HOSTID set per rank)" : "", ncases, opt->selftest ? "selftest cases" : "cases");
  fflush(stdout);
}

static void list_cases(const struct suite_case *cases, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char name[192];
    suite_case_name(&cases[i], name, sizeof(name));
    printf("#%zu %s\n", i, name);
  }
  printf("%zu cases\n", n);
}

static size_t judge(const struct suite_options *opt, const struct suite_case *cases, size_t ncases,
                    const struct suite_record *records, int nranks) {
  return opt->selftest ? suite_report_selftest(cases, ncases, records, nranks)
                       : suite_report(cases, ncases, records, nranks);
}

/* Runs this rank's part: create the communicator, run every case, destroy it. */
static void run_rank(const struct suite_options *opt, ncclComm_t comm, int rank, int nranks,
                     const struct suite_case *cases, size_t ncases, struct suite_record *records) {
  struct suite_rank me = {comm, rank, nranks, opt->verbose, opt->full_check, opt->device};
  if (suite_run_cases(&me, cases, ncases, records) == 0) {
    suite_watchdog_enter("ncclCommDestroy");
    ncclResult_t rc = ncclCommDestroy(comm);
    if (rc != ncclSuccess)
      fprintf(stderr, "rank %d: ncclCommDestroy returned %s: %s\n", rank, ncclGetErrorString(rc),
              ncclGetLastError(NULL));
    suite_watchdog_idle();
  }
}

/* ---- MPI mode ---- */
#if defined(DCCL_TEST_HAVE_MPI)

static ncclResult_t comm_init_mpi(ncclComm_t *comm, int rank, int nranks) {
#if defined(DCCL_TEST_HAVE_DCCL_MPI)
  (void)rank;
  (void)nranks;
  return dcclCommInitMPI(comm, MPI_COMM_WORLD, NULL);
#else
  ncclUniqueId id;
  ncclResult_t rc = ncclSuccess;
  if (rank == 0) rc = ncclGetUniqueId(&id);
  int ok = rc == ncclSuccess;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) return rank == 0 ? rc : ncclSystemError;
  MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  return ncclCommInitRank(comm, nranks, id, rank);
#endif
}

static int run_mpi(int *argc, char ***argv, const struct suite_options *opt) {
  MPI_Init(argc, argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  struct suite_case *cases;
  size_t ncases;
  if (suite_build_cases(opt, nranks, &cases, &ncases)) {
    fprintf(stderr, "rank %d: out of memory building the case list\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (opt->list_only) {
    if (rank == 0) list_cases(cases, ncases);
    free(cases);
    MPI_Finalize();
    return 0;
  }
  if (rank == 0) print_header(opt, "mpirun", nranks, ncases);
  struct suite_record *records = calloc(ncases ? ncases : 1, sizeof(*records));
  if (!records) MPI_Abort(MPI_COMM_WORLD, 2);
  suite_watchdog_start(rank, opt->case_timeout_s);
  suite_watchdog_enter("communicator creation");
  ncclComm_t comm = NULL;
  ncclResult_t rc = opt->device && suite_device_select(rank) ? ncclSystemError : comm_init_mpi(&comm, rank, nranks);
  suite_watchdog_idle();
  if (rc != ncclSuccess)
    fprintf(stderr, "rank %d: ERROR creating the communicator: %s: %s\n", rank, ncclGetErrorString(rc),
            ncclGetLastError(NULL));
  else
    run_rank(opt, comm, rank, nranks, cases, ncases, records);

  struct suite_record *all = NULL;
  if (rank == 0) {
    all = calloc((size_t)nranks * (ncases ? ncases : 1), sizeof(*all));
    if (!all) MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Gather(records, (int)(ncases * sizeof(*records)), MPI_BYTE, all, (int)(ncases * sizeof(*records)), MPI_BYTE, 0,
             MPI_COMM_WORLD);
  unsigned long long failed = 0;
  if (rank == 0) failed = judge(opt, cases, ncases, all, nranks);
  MPI_Bcast(&failed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  free(all);
  free(records);
  free(cases);
  MPI_Finalize();
  return failed ? 1 : 0;
}
#else
static int run_mpi(int *argc, char ***argv, const struct suite_options *opt) {
  (void)argc;
  (void)argv;
  (void)opt;
  fprintf(stderr, "coll_suite was built without MPI: use --fork N\n");
  return 2;
}
#endif

/* ---- fork mode ---- */

static double monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fork_child(const struct suite_options *opt, ncclUniqueId id, int rank, int nranks,
                      const struct suite_case *cases, size_t ncases, struct suite_record *records) {
  suite_watchdog_start(rank, opt->case_timeout_s);
  suite_watchdog_enter("communicator creation");
  ncclComm_t comm = NULL;
  if (opt->device && suite_device_select(rank)) return 3;
  ncclResult_t rc = ncclCommInitRank(&comm, nranks, id, rank);
  suite_watchdog_idle();
  if (rc != ncclSuccess) {
    fprintf(stderr, "rank %d: ERROR ncclCommInitRank: %s: %s\n", rank, ncclGetErrorString(rc), ncclGetLastError(NULL));
    return 3;
  }
  run_rank(opt, comm, rank, nranks, cases, ncases, records);
  return 0;
}

/* Waits for every child until the deadline, then kills the rest. Returns how many ended abnormally. */
static int wait_children(pid_t *pids, int n, int timeout_s) {
  int abnormal = 0, remaining = n;
  const double deadline = monotonic_s() + timeout_s;
  while (remaining > 0) {
    for (int r = 0; r < n; r++) {
      if (pids[r] <= 0) continue;
      int status;
      pid_t got = waitpid(pids[r], &status, WNOHANG);
      if (got == 0) continue;
      if (got < 0 && errno == EINTR) continue;
      pids[r] = 0;
      remaining--;
      if (got < 0) {
        fprintf(stderr, "parent: waitpid for rank %d failed: %s\n", r, strerror(errno));
        abnormal++;
      } else if (WIFSIGNALED(status)) {
        fprintf(stderr, "parent: rank %d was killed by signal %d\n", r, WTERMSIG(status));
        abnormal++;
      } else if (WEXITSTATUS(status) != 0) {
        fprintf(stderr, "parent: rank %d exited with status %d\n", r, WEXITSTATUS(status));
        abnormal++;
      }
    }
    if (remaining == 0) break;
    if (monotonic_s() > deadline) {
      fprintf(stderr, "parent: %d rank(s) still running after %d s: killing them\n", remaining, timeout_s);
      for (int r = 0; r < n; r++) {
        if (pids[r] > 0) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], NULL, 0);
          pids[r] = 0;
          abnormal++;
        }
      }
      break;
    }
    usleep(20000);
  }
  return abnormal;
}

static int run_fork(const struct suite_options *opt) {
  const int nranks = opt->fork_ranks;
  struct suite_case *cases;
  size_t ncases;
  if (suite_build_cases(opt, nranks, &cases, &ncases)) {
    fprintf(stderr, "out of memory building the case list\n");
    return 2;
  }
  if (opt->list_only) {
    list_cases(cases, ncases);
    free(cases);
    return 0;
  }
  print_header(opt, "fork", nranks, ncases);
  /* The records live in a mapping every child shares with the parent: made before the fork. */
  size_t bytes = (size_t)nranks * (ncases ? ncases : 1) * sizeof(struct suite_record);
  struct suite_record *records = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (records == MAP_FAILED) {
    perror("mmap");
    free(cases);
    return 2;
  }
  ncclUniqueId id;
  ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc != ncclSuccess) {
    fprintf(stderr, "ERROR ncclGetUniqueId: %s: %s\n", ncclGetErrorString(rc), ncclGetLastError(NULL));
    printf("0 passed, %zu failed\n", ncases);
    return 1;
  }
  pid_t *pids = calloc((size_t)nranks, sizeof(*pids));
  if (!pids) return 2;
  int abnormal = 0;
  for (int r = 0; r < nranks; r++) {
    fflush(stdout);
    fflush(stderr);
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
      /* A rank must not outlive its parent (a parent killed by ctest's timeout would leave it running). */
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(3);
      int code = fork_child(opt, id, r, nranks, cases, ncases, records + (size_t)r * ncases);
      fflush(stdout);
      fflush(stderr);
      _exit(code); /* nothing of the parent's (atexit handlers, stdio buffers) runs twice */
    }
    if (pid < 0) {
      perror("fork");
      abnormal++;
    }
    pids[r] = pid;
  }
  abnormal += wait_children(pids, nranks, opt->total_timeout_s);
  size_t failed = judge(opt, cases, ncases, records, nranks);
  if (abnormal) fprintf(stderr, "parent: %d rank(s) ended abnormally\n", abnormal);
  free(pids);
  munmap(records, bytes);
  free(cases);
  return failed || abnormal ? 1 : 0;
}

int main(int argc, char **argv) {
  struct suite_options opt;
  if (suite_parse_options(argc, argv, &opt)) return 2;
  /* DCCL reads its parameters once per process: the algorithm must be in the environment before any call. */
  if (opt.algo) setenv("DCCL_ALGO", opt.algo, 1);
  setvbuf(stdout, NULL, _IOLBF, 0);
  return opt.fork_ranks ? run_fork(&opt) : run_mpi(&argc, &argv, &opt);
}
