/* A hang must fail the test with a message naming the step, not wait for ctest's timeout in silence. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "suite.h"

static pthread_mutex_t watchdog_lock = PTHREAD_MUTEX_INITIALIZER;
static char watchdog_step[256];
static double watchdog_started; /* 0: idle */
static int watchdog_rank, watchdog_timeout_s;

static double monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *watchdog_main(void *arg) {
  (void)arg;
  for (;;) {
    sleep(1);
    pthread_mutex_lock(&watchdog_lock);
    if (watchdog_started > 0 && monotonic_s() - watchdog_started > watchdog_timeout_s) {
      fprintf(stderr, "rank %d: HANG: %s has not finished after %d s; exiting\n", watchdog_rank, watchdog_step,
              watchdog_timeout_s);
      fflush(stderr);
      fflush(stdout);
      _exit(124);
    }
    pthread_mutex_unlock(&watchdog_lock);
  }
  return NULL;
}

void suite_watchdog_start(int rank, int timeout_s) {
  watchdog_rank = rank;
  watchdog_timeout_s = timeout_s;
  if (timeout_s <= 0) return;
  pthread_t t;
  if (pthread_create(&t, NULL, watchdog_main, NULL) == 0) pthread_detach(t);
}

void suite_watchdog_enter(const char *what) {
  pthread_mutex_lock(&watchdog_lock);
  snprintf(watchdog_step, sizeof(watchdog_step), "%s", what);
  watchdog_started = monotonic_s();
  pthread_mutex_unlock(&watchdog_lock);
}

void suite_watchdog_idle(void) {
  pthread_mutex_lock(&watchdog_lock);
  watchdog_started = 0;
  pthread_mutex_unlock(&watchdog_lock);
}
