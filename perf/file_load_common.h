/* What the file-load perf tools (file_load_perf, file_load_gpu_perf, page_cache_dma_perf) share: the clock,
 * the file's size, memory the forked runs report in, dropping a file's pages for a cold run, and the median of the
 * rounds. */
#ifndef DCCL_PERF_FILE_LOAD_COMMON_H_
#define DCCL_PERF_FILE_LOAD_COMMON_H_

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The file's size: 0 when it is missing or empty. */
static inline size_t file_bytes(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && st.st_size > 0 ? (size_t)st.st_size : 0;
}

/* Memory shared with the forked runs, which write their results there; NULL if it cannot be mapped. */
static inline void *shared_results(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* Drops the file's pages: every page cache on the host where root may, else this file's (both keep data safe).
 * Returns which way it went. */
static const char *drop_cache(const char *path) {
  sync();
  int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
  if (fd >= 0 && write(fd, "1", 1) == 1) {
    close(fd);
    return "drop_caches";
  }
  if (fd >= 0) close(fd);
  fd = open(path, O_RDONLY);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  return "posix_fadvise(DONTNEED)";
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return v[n / 2];
}

#endif
