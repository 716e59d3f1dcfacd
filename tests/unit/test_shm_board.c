/* transports/shm/shm_board: 4 processes allgather through one board, the creator's and three that open it by name.
 * Checked: 20000 rounds of records of changing sizes (8-256 bytes), every rank's record read by every rank with the
 * round's contents (a rank two rounds ahead would overwrite a slot still being read: the parity rule forbids it);
 * a record larger than the board's is refused; a round that one rank never joins ends for the others with
 * ncclRemoteError naming that rank, by the deadline (ranks 1, 2) or the abort flag (rank 0, set by a thread), within
 * seconds, its wait told meanwhile (every few ms) that rank 3 is awaited, for longer each time. Prints the time per
 * round (4 processes on however many cores). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transports/shm/shm_board.h"
#include "transports/shm/shm_private.h"
#include "unit_check.h"
#include "util/clock.h"
#include "util/error.h"

#define NRANKS 4
#define ROUNDS 20000
#define MAX_BYTES 256

static _Atomic int abort_flag;

static void *abort_later(void *arg) {
  (void)arg;
  struct timespec ts = {0, 100 * 1000 * 1000};
  nanosleep(&ts, NULL);
  atomic_store(&abort_flag, 1);
  return NULL;
}

/* What a waiting rank heard while rank 3 stayed away. */
static struct {
  int calls, wrong_peer, shrank;
  uint64_t last_ns;
} idle;

static void on_idle(void *arg, int peer, uint64_t idle_ns) {
  (void)arg;
  idle.calls++;
  idle.wrong_peer += peer != 3;
  idle.shrank += idle_ns < idle.last_ns;
  idle.last_ns = idle_ns;
}

static unsigned char fill(int rank, int round, size_t i) { return (unsigned char)(rank * 61 + round * 7 + (int)i); }

/* One rank's part; returns its failures (a child's exit code). */
static int rank_main(const char *name, int rank) {
  struct dccl_shm_board *b = NULL;
  if (rank != 0 && dccl_shm_board_open(name, 0, rank, NRANKS, MAX_BYTES, &b) != ncclSuccess) {
    printf("FAIL: rank %d: open: %s\n", rank, dccl_last_error());
    return 1;
  }
  if (rank == 0 && dccl_shm_board_open(name, 0, 0, NRANKS, MAX_BYTES, &b) != ncclSuccess) return 1;
  unsigned char data[NRANKS * MAX_BYTES];
  int bad = 0;
  struct dccl_shm_board_wait forever = {NULL, 0, NRANKS > (int)sysconf(_SC_NPROCESSORS_ONLN), NULL, NULL};
  int64_t t0 = dccl_now_ns();
  for (int round = 0; round < ROUNDS && !bad; round++) {
    size_t size = 8 * (size_t)(1 + round % 32);
    for (size_t i = 0; i < size; i++) data[(size_t)rank * size + i] = fill(rank, round, i);
    if (dccl_shm_board_allgather(b, data, size, &forever) != ncclSuccess) bad++;
    for (int r = 0; r < NRANKS && !bad; r++)
      for (size_t i = 0; i < size; i++)
        if (data[(size_t)r * size + i] != fill(r, round, i)) {
          printf("FAIL: rank %d round %d: rank %d's byte %zu is %d, want %d\n", rank, round, r, i,
                 data[(size_t)r * size + i], fill(r, round, i));
          bad++;
          break;
        }
  }
  if (rank == 0 && !bad)
    printf("%d ranks: %.2f us per allgather round\n", NRANKS, (double)(dccl_now_ns() - t0) / 1e3 / ROUNDS);
  if (dccl_shm_board_allgather(b, data, MAX_BYTES + 8, &forever) != ncclInternalError) {
    printf("FAIL: rank %d: a record larger than the board's was taken\n", rank);
    bad++;
  }
  /* A round rank 3 never joins. */
  if (rank != 3) {
    pthread_t t;
    if (rank == 0) pthread_create(&t, NULL, abort_later, NULL);
    int64_t start = dccl_now_ns();
    struct dccl_shm_board_wait wait = {rank == 0 ? &abort_flag : NULL, rank == 0 ? 0 : start + 200 * 1000 * 1000,
                                       forever.oversubscribed, on_idle, NULL};
    ncclResult_t res = dccl_shm_board_allgather(b, data, 8, &wait);
    double s = (double)(dccl_now_ns() - start) / 1e9;
    if (rank == 0) pthread_join(t, NULL);
    const char *why = rank == 0 ? "aborted" : "timed out";
    if (res != ncclRemoteError || !strstr(dccl_last_error(), "waiting for rank 3") ||
        !strstr(dccl_last_error(), why) || s > 5.0) {
      printf("FAIL: rank %d: a round rank 3 skipped ended with %d after %.2f s: %s\n", rank, (int)res, s,
             dccl_last_error());
      bad++;
    }
    /* 100-200 ms of waiting, told every 2 ms or so. */
    if (idle.calls < 10 || idle.wrong_peer || idle.shrank || idle.last_ns < 50 * 1000 * 1000) {
      printf("FAIL: rank %d: told %d times while waiting (%d naming another rank than 3, %d with less time than "
             "before), last %.3f s\n", rank, idle.calls, idle.wrong_peer, idle.shrank, (double)idle.last_ns / 1e9);
      bad++;
    }
  }
  dccl_shm_board_close(b);
  return bad;
}

int main(void) {
  char name[DCCL_SHM_NAME_LEN];
  snprintf(name, sizeof(name), "/%s%d-test-board", DCCL_SHM_PREFIX, (int)getpid());
  struct dccl_shm_board *made = NULL;
  check(dccl_shm_board_open(name, 1, 0, NRANKS, MAX_BYTES, &made) == ncclSuccess, "create: %s", dccl_last_error());
  pid_t kids[NRANKS];
  for (int r = 1; r < NRANKS; r++)
    if ((kids[r] = fork()) == 0) _exit(rank_main(name, r) ? 1 : 0);
  int bad = rank_main(name, 0);
  check(bad == 0, "rank 0: %d failures", bad);
  for (int r = 1; r < NRANKS; r++) {
    int status = -1;
    check(waitpid(kids[r], &status, 0) == kids[r] && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "rank %d exited cleanly (status %#x)", r, status);
  }
  dccl_shm_board_close(made);
  dccl_shm_segment_unlink(name);
  printf("test_shm_board: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
