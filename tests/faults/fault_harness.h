/* Shared helpers of the fault tests: launching ranks by fork, a shared memory region the ranks report through,
 * deadlines that keep a test from hanging, /dev/shm leak detection, and the data pattern all-reduces check.
 *
 * A test's parent process calls ncclGetUniqueId, then forks one child per rank; each child calls
 * ncclCommInitRank. Children die with the parent (PR_SET_PDEATHSIG), and the parent kills any child still
 * running at its deadline, so no test outlives its own bounds. */
#ifndef DCCL_FAULT_HARNESS_H_
#define DCCL_FAULT_HARNESS_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dccl.h"

/* --- failures: counted, printed with the place; a test exits nonzero when any was recorded --- */
extern int fh_failures;
void fh_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define FH_FAIL(...) fh_fail(__FILE__, __LINE__, __VA_ARGS__)
#define FH_EXPECT(cond, ...)   \
  do {                         \
    if (!(cond)) FH_FAIL(__VA_ARGS__); \
  } while (0)
/* Prints a progress line with the elapsed time since the first call. */
void fh_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* --- time --- */
double fh_now(void); /* CLOCK_MONOTONIC in seconds: one clock for every process of the host */
void fh_sleep(double seconds); /* the whole duration, even when signals interrupt */

/* --- processes --- */
/* Zeroed MAP_SHARED memory: made before fork, it is the same bytes in the parent and every child. */
void *fh_shared_alloc(size_t bytes);
void fh_shared_free(void *p, size_t bytes);
/* Forks a child that runs fn(arg, index) and exits with its return value (through exit(), so atexit handlers,
 * the library's included, run as in a real program). The child is killed if the parent dies. -1 on failure. */
pid_t fh_spawn(int (*fn)(void *arg, int index), void *arg, int index);
/* Reaps pids[0..n) (entries <= 0 are skipped) until `deadline` (an fh_now() time); at the deadline SIGKILLs and
 * reaps the ones still running. status[i] receives each wait status, killed[i] (may be NULL) whether the deadline
 * killed it. Returns how many the deadline killed. */
int fh_wait_until(pid_t *pids, int n, double deadline, int *status, int *killed);
/* Forks n children running fn(arg, 0..n-1) and reaps them within timeout_s, as fh_wait_until (status and killed
 * hold n entries). */
int fh_run_ranks(int (*fn)(void *arg, int index), void *arg, int n, double timeout_s, int *status, int *killed);
/* Waits for one child with a deadline (same rules as fh_wait_until). Returns 1 if the deadline killed it. */
int fh_wait_one(pid_t pid, double deadline, int *status);
/* "exit 0", "killed by signal 9 (Killed)". */
const char *fh_status_str(int status, char *buf, size_t len);
/* Nonzero when the wait status is a clean exit(0). */
int fh_status_ok(int status);

/* --- /dev/shm hygiene --- */
struct fh_shm_snapshot {
  int count;
  char (*names)[256];
};
/* Records the dccl-* entries of /dev/shm present now. */
void fh_shm_snapshot_take(struct fh_shm_snapshot *s);
void fh_shm_snapshot_free(struct fh_shm_snapshot *s);
/* Reports (as failures naming `when`) dccl-* entries of /dev/shm that were not in the snapshot and that no live
 * process maps or holds open, rechecked after a short grace so a concurrent test's segment in the middle of its
 * life is not blamed on us. Leaked entries are removed after being reported. Returns how many leaked. */
int fh_shm_check_leaks(const struct fh_shm_snapshot *s, const char *when);

/* --- error text --- */
/* Nonzero when `text` names `rank` as "rank N" (also "rank=N", "rank: N", "rank #N", any case). */
int fh_text_names_rank(const char *text, int rank);
/* Nonzero when `needle` occurs in `text`, ignoring case. */
int fh_text_has(const char *text, const char *needle);
/* Copies at most len-1 bytes of src (NULL reads as "(null)") and terminates. */
void fh_copy_text(char *dst, size_t len, const char *src);

/* --- data: a pattern whose sum over ranks is exact in float (small integers) --- */
float fh_pattern(int rank, size_t index, int iter);
void fh_fill(float *buf, size_t count, int rank, int iter);
/* Number of elements of an all-reduce (sum over nranks) result that differ from the expected values; the first
 * bad index goes to *first_bad (may be NULL). */
size_t fh_check_sum(const float *buf, size_t count, int nranks, int iter, size_t *first_bad);

/* The transport named by argv[1] (shm or socket; shm without one), set as DCCL_TRANSPORT for the ranks; NULL,
 * after printing the usage, for anything else. */
const char *fh_transport_arg(int argc, char **argv);

/* A unique id from the parent, with the reason on failure. */
ncclResult_t fh_unique_id(ncclUniqueId *id);

#endif
