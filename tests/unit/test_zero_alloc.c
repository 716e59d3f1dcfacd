/* After warm-up the per-call path allocates nothing: ops come from the communicator's pool, plans from its cache,
 * and links exist. This program counts every malloc, calloc, realloc and aligned allocation of the process (it
 * defines them, forwarding to glibc's, so the library's calls land here) over 10,000 operations of every kind:
 *  - 2 ranks in 2 processes (forked after ncclGetUniqueId), lone collectives and grouped send/recv, all-to-all;
 *  - 3 ranks of one process (ncclCommInitAll), driven together in groups from one thread.
 * Every result is checked, so an operation that did nothing cannot pass. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dccl.h"
#include "unit_check.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static _Atomic int counting;
static _Atomic long allocations;

static void count(void) {
  if (atomic_load_explicit(&counting, memory_order_relaxed)) atomic_fetch_add(&allocations, 1);
}
void *malloc(size_t n) {
  count();
  return __libc_malloc(n);
}
void *calloc(size_t n, size_t size) {
  count();
  return __libc_calloc(n, size);
}
void *realloc(void *p, size_t n) {
  count();
  return __libc_realloc(p, n);
}
int posix_memalign(void **p, size_t align, size_t n) {
  count();
  *p = __libc_memalign(align, n);
  return *p ? 0 : 12; /* ENOMEM */
}
void *aligned_alloc(size_t align, size_t n) {
  count();
  return __libc_memalign(align, n);
}

#define ITERATIONS 1000 /* x 10 operations */
#define MAX_COUNT (1 << 20)

/* Counts of floats that take each algorithm the cost model picks by size (one-shot, tree, ring). */
static const size_t sizes[] = {2, 4096, MAX_COUNT};

/* One round of ten operations on a 2-rank communicator; returns the number of wrong results. */
static int round_2ranks(ncclComm_t comm, int rank, float *send, float *recv, int it) {
  int wrong = 0;
  size_t n = sizes[it % 3];
  for (size_t i = 0; i < n; i++) send[i] = (float)(rank + 1);
  wrong += ncclAllReduce(send, recv, n, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess || recv[n - 1] != 3.0f;
  wrong += ncclBroadcast(send, recv, n, ncclFloat32, 1, comm, NULL) != ncclSuccess || recv[0] != 2.0f;
  wrong += ncclReduce(send, recv, n, ncclFloat32, ncclMax, 0, comm, NULL) != ncclSuccess || (rank == 0 && recv[0] != 2.0f);
  wrong += ncclAllGather(send, recv, n / 2, ncclFloat32, comm, NULL) != ncclSuccess || recv[n / 2] != 2.0f;
  wrong += ncclReduceScatter(send, recv, n / 2, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess || recv[0] != 3.0f;
  ncclGroupStart();
  ncclSend(send, n, ncclFloat32, 1 - rank, comm, NULL);
  ncclRecv(recv, n, ncclFloat32, 1 - rank, comm, NULL);
  wrong += ncclGroupEnd() != ncclSuccess || recv[n - 1] != (float)(2 - rank);
  wrong += ncclAlltoAll(send, recv, n / 2, ncclFloat32, comm, NULL) != ncclSuccess || recv[0] != 1.0f;
  ncclGroupStart();
  ncclSend(send, 1, ncclFloat32, rank, comm, NULL); /* to itself: a copy inside the group */
  ncclRecv(recv, 1, ncclFloat32, rank, comm, NULL);
  wrong += ncclGroupEnd() != ncclSuccess || recv[0] != (float)(rank + 1);
  wrong += ncclAllReduce(send, send, n, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess || send[0] != 3.0f;
  wrong += ncclBroadcast(send, send, 1, ncclInt32, 0, comm, NULL) != ncclSuccess;
  return wrong;
}

static int rank_main(ncclUniqueId id, int rank) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) {
    printf("FAIL: rank %d: ncclCommInitRank: %s\n", rank, ncclGetLastError(NULL));
    return 1;
  }
  float *send = malloc(MAX_COUNT * sizeof(float)), *recv = malloc(MAX_COUNT * sizeof(float));
  int wrong = 0;
  /* The first round fills the pool and the plan cache: seeing those allocations shows the counter works. */
  atomic_store(&counting, 1);
  wrong += round_2ranks(comm, rank, send, recv, 0);
  atomic_store(&counting, 0);
  check(allocations > 0, "rank %d: the counter saw no allocation in the first round", rank);
  for (int it = 1; it < 6; it++) wrong += round_2ranks(comm, rank, send, recv, it); /* warm-up */
  allocations = 0;
  atomic_store(&counting, 1);
  for (int it = 0; it < ITERATIONS; it++) wrong += round_2ranks(comm, rank, send, recv, it);
  atomic_store(&counting, 0);
  check(wrong == 0, "rank %d: %d operations failed or gave wrong results (%s)", rank, wrong, ncclGetLastError(NULL));
  check(allocations == 0, "rank %d: %ld allocations in %d operations after warm-up", rank, allocations,
        ITERATIONS * 10);
  printf("rank %d: %ld allocations in %d operations after warm-up\n", rank, allocations, ITERATIONS * 10);
  check(ncclCommDestroy(comm) == ncclSuccess, "rank %d: destroy", rank);
  free(send);
  free(recv);
  return checks_failed != 0;
}

static void two_processes(void) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    check(0, "ncclGetUniqueId: %s", ncclGetLastError(NULL));
    return;
  }
  fflush(NULL);
  pid_t pids[2];
  for (int r = 0; r < 2; r++)
    if ((pids[r] = fork()) == 0) _exit(rank_main(id, r));
  for (int r = 0; r < 2; r++) {
    int status = 0;
    pid_t got = waitpid(pids[r], &status, 0);
    check(got == pids[r] && WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d's process failed (status %#x)",
          r, status);
  }
}

#define NCOMMS 3

/* Three ranks of one process in groups: an all-reduce of each size and a ring of sends per round. */
static void one_process_groups(void) {
  ncclComm_t comms[NCOMMS];
  if (ncclCommInitAll(comms, NCOMMS, NULL) != ncclSuccess) {
    check(0, "ncclCommInitAll: %s", ncclGetLastError(NULL));
    return;
  }
  float *buf[NCOMMS][2];
  for (int r = 0; r < NCOMMS; r++)
    for (int b = 0; b < 2; b++) buf[r][b] = calloc(MAX_COUNT, sizeof(float));
  int wrong = 0;
  allocations = 0;
  for (int it = 0; it < 6 + ITERATIONS / 5; it++) {
    if (it == 6) atomic_store(&counting, 1);
    size_t n = sizes[it % 3];
    ncclGroupStart();
    for (int r = 0; r < NCOMMS; r++) {
      buf[r][0][0] = buf[r][0][n - 1] = (float)r;
      ncclAllReduce(buf[r][0], buf[r][1], n, ncclFloat32, ncclSum, comms[r], NULL);
    }
    wrong += ncclGroupEnd() != ncclSuccess || buf[0][1][n - 1] != 3.0f;
    ncclGroupStart();
    for (int r = 0; r < NCOMMS; r++) {
      ncclSend(buf[r][0], n, ncclFloat32, (r + 1) % NCOMMS, comms[r], NULL);
      ncclRecv(buf[r][1], n, ncclFloat32, (r + NCOMMS - 1) % NCOMMS, comms[r], NULL);
    }
    wrong += ncclGroupEnd() != ncclSuccess || buf[1][1][n - 1] != 0.0f || buf[0][1][0] != 2.0f;
  }
  atomic_store(&counting, 0);
  check(wrong == 0, "one process: %d groups failed or gave wrong results (%s)", wrong, ncclGetLastError(NULL));
  check(allocations == 0, "one process: %ld allocations in %d groups after warm-up", allocations,
        2 * ITERATIONS / 5);
  printf("one process, %d ranks: %ld allocations in %d groups after warm-up\n", NCOMMS, allocations,
         2 * ITERATIONS / 5);
  for (int r = 0; r < NCOMMS; r++) {
    ncclCommDestroy(comms[r]);
    free(buf[r][0]);
    free(buf[r][1]);
  }
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  alarm(240); /* a hang fails the test (SIGALRM) */
  two_processes();
  one_process_groups();
  printf("test_zero_alloc: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
