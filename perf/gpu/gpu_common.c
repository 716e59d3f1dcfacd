#include "gpu_common.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels.h"

void cu_die(CUresult r, const char *what, const char *file, int line) {
  printf("FAILED: %s: %s (%s:%d)\n", what, cu_name(r), file, line);
  fflush(stdout);
  exit(2);
}

const char *cu_name(CUresult r) {
  static __thread char unknown[32];
  const char *name = NULL;
  if (cuGetErrorName(r, &name) == CUDA_SUCCESS && name) return name;
  snprintf(unknown, sizeof unknown, "CUresult %d", (int)r);
  return unknown;
}

double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double median(double *v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double percentile_sorted(const double *v, size_t n, double p) {
  if (n == 0) return 0;
  size_t i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

CUdevice gpu_open(void) {
  /* Eager loading as well as the explicit preload below: either alone keeps module loading out of the timed part. */
  setenv("CUDA_MODULE_LOADING", "EAGER", 1);
  CUdevice dev;
  CUcontext ctx;
  CU_MUST(cuInit(0));
  CU_MUST(cuDeviceGet(&dev, 0));
  CU_MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU_MUST(cuCtxSetCurrent(ctx));
  int err = kernels_preload();
  if (err) {
    printf("FAILED: loading the kernels: cudaError %d\n", err);
    exit(2);
  }
  return dev;
}

int gpu_sm_count(CUdevice dev) {
  int n = 0;
  CU_MUST(cuDeviceGetAttribute(&n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  return n;
}

int gpu_mps_enabled(CUdevice dev) {
  int on = 0;
  if (cuDeviceGetAttribute(&on, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, dev) != CUDA_SUCCESS) return -1;
  return on;
}

CUresult stream_wait(CUstream s, double timeout_s) {
  double deadline = now_us() + timeout_s * 1e6;
  CUresult e;
  while ((e = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY && now_us() < deadline) {
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
  return e;
}

static char watchdog_who[64];

static void watchdog_fire(int sig) {
  (void)sig;
  char msg[128];
  int n = snprintf(msg, sizeof msg, "FAILED: %s: watchdog expired, exiting\n", watchdog_who);
  if (n > 0) (void)!write(1, msg, (size_t)n);
  _exit(3);
}

void watchdog_arm(int seconds, const char *who) {
  snprintf(watchdog_who, sizeof watchdog_who, "%s", who);
  signal(SIGALRM, watchdog_fire);
  alarm((unsigned)seconds);
}
