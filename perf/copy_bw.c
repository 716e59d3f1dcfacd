/* The hardware ceiling for host collectives: how fast T threads together copy memory (each its own buffers, well
 * above the last-level cache). An all-reduce must at least read every input once and write every output once,
 * 2*N*S bytes of memory traffic for N ranks of S bytes, so its time is at least 2*N*S / (2 * copy rate): a copy
 * of B bytes is B read plus B written. Usage: copy_bw [threads=2] [MiB per thread=256] [repetitions=5] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t bytes;
static int reps;
static pthread_barrier_t barrier;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *copier(void *arg) {
  long t = (long)arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET((int)t % CPU_SETSIZE, &set);
  sched_setaffinity(0, sizeof(set), &set); /* like mpirun --bind-to core; best effort */
  char *src = malloc(bytes), *dst = malloc(bytes);
  if (!src || !dst) return NULL;
  memset(src, 1, bytes);
  memset(dst, 2, bytes);
  for (int r = 0; r < reps; r++) {
    pthread_barrier_wait(&barrier);
    memcpy(dst, src, bytes);
    pthread_barrier_wait(&barrier);
  }
  free(src);
  free(dst);
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  bytes = (size_t)(argc > 2 ? atol(argv[2]) : 256) << 20;
  reps = argc > 3 ? atoi(argv[3]) : 5;
  if (threads < 1 || reps < 1 || bytes == 0) {
    fprintf(stderr, "usage: copy_bw [threads] [MiB per thread] [repetitions]\n");
    return 2;
  }
  pthread_t *tid = calloc((size_t)threads, sizeof(*tid));
  pthread_barrier_init(&barrier, NULL, (unsigned)threads + 1);
  for (long t = 0; t < threads; t++) pthread_create(&tid[t], NULL, copier, (void *)t);
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    pthread_barrier_wait(&barrier);
    double t0 = now_s();
    pthread_barrier_wait(&barrier);
    double dt = now_s() - t0;
    if (dt < best) best = dt;
  }
  for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
  double copied = (double)bytes * threads / best / 1e9;
  printf("threads %d, %zu MiB each: copy %.2f GB/s (memory traffic %.2f GB/s read+write)\n", threads, bytes >> 20,
         copied, 2 * copied);
  return 0;
}
