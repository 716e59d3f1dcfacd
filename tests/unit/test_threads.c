/* Several communicators in one process, each used from its own thread at the same time: two jobs of four
 * ranks made by ncclCommInitAll, eight threads running collectives concurrently, while another thread polls
 * ncclCommGetAsyncError on all of them. Then many short-lived threads each make one call: what a call keeps per
 * thread must be freed when its thread exits (the heap may not grow with the number of threads). */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "dccl.h"

#define NRANKS 4
#define NJOBS 2
#define ITERS 40
#define COUNT 100003

static ncclComm_t comms[NJOBS][NRANKS];
static atomic_int failures, polls, stop_polling;

static void *rank_thread(void *arg) {
  int job = (int)((long)arg / NRANKS), rank = (int)((long)arg % NRANKS);
  ncclComm_t comm = comms[job][rank];
  double *in = malloc(COUNT * sizeof(double)), *out = malloc(COUNT * NRANKS * sizeof(double));
  for (int it = 0; it < ITERS; it++) {
    for (int i = 0; i < COUNT; i++) in[i] = rank + job * 100 + it + i % 5;
    if (ncclAllReduce(in, out, COUNT, ncclDouble, ncclSum, comm, NULL) != ncclSuccess) {
      failures++;
      break;
    }
    for (int i = 0; i < COUNT; i++) {
      double expect = 0;
      for (int r = 0; r < NRANKS; r++) expect += r + job * 100 + it + i % 5;
      if (out[i] != expect) {
        failures++;
        break;
      }
    }
    if (ncclAllGather(in, out, COUNT, ncclDouble, comm, NULL) != ncclSuccess) failures++;
    for (int r = 0; r < NRANKS; r++)
      if (out[(size_t)r * COUNT + 7] != r + job * 100 + it + 7 % 5) failures++;
  }
  free(in);
  free(out);
  return NULL;
}

static void *poll_thread(void *arg) {
  (void)arg;
  while (!atomic_load(&stop_polling)) {
    for (int j = 0; j < NJOBS; j++)
      for (int r = 0; r < NRANKS; r++) {
        ncclResult_t async;
        if (ncclCommGetAsyncError(comms[j][r], &async) != ncclSuccess || async != ncclSuccess) failures++;
        polls++;
      }
  }
  return NULL;
}

/* One call on a one-rank communicator from a thread that then exits. */
static void *short_thread(void *arg) {
  float x = 1, y = 0;
  if (ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, (ncclComm_t)arg, NULL) != ncclSuccess || y != 1) failures++;
  return NULL;
}

/* Heap bytes in use after `n` short threads, each joined before the next starts. */
static size_t heap_after_threads(ncclComm_t comm, int n) {
  for (int i = 0; i < n; i++) {
    pthread_t t;
    pthread_create(&t, NULL, short_thread, comm);
    pthread_join(t, NULL);
  }
  return mallinfo2().uordblks;
}

static void thread_exit_frees(void) {
  ncclComm_t comm;
  int dev = 0;
  if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess) {
    failures++;
    return;
  }
  size_t before = heap_after_threads(comm, 20), after = heap_after_threads(comm, 500);
  /* A kept operation is about 5 KiB: 500 exited threads keeping theirs would add 2.5 MiB. */
  long growth = (long)after - (long)before;
  printf("heap after 20 short threads %zu bytes, after 500 more %zu (%+ld)\n", before, after, growth);
  if (growth > 256 * 1024) failures++;
  ncclCommDestroy(comm);
}

int main(void) {
  for (int j = 0; j < NJOBS; j++)
    if (ncclCommInitAll(comms[j], NRANKS, NULL) != ncclSuccess) {
      printf("ncclCommInitAll failed: %s\n0 passed, 1 failed\n", ncclGetLastError(NULL));
      return 1;
    }
  pthread_t threads[NJOBS * NRANKS], poller;
  pthread_create(&poller, NULL, poll_thread, NULL);
  for (long t = 0; t < NJOBS * NRANKS; t++) pthread_create(&threads[t], NULL, rank_thread, (void *)t);
  for (int t = 0; t < NJOBS * NRANKS; t++) pthread_join(threads[t], NULL);
  atomic_store(&stop_polling, 1);
  pthread_join(poller, NULL);
  for (int j = 0; j < NJOBS; j++)
    for (int r = 0; r < NRANKS; r++)
      if (ncclCommDestroy(comms[j][r]) != ncclSuccess) failures++;
  thread_exit_frees();
  int f = atomic_load(&failures);
  printf("%d ranks x %d iterations in %d concurrent communicators, %d async-error polls\n", NRANKS, ITERS,
         NJOBS * NRANKS, atomic_load(&polls));
  printf("%d passed, %d failed\n", f ? 0 : 1, f ? 1 : 0);
  return f != 0;
}
