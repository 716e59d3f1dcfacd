/* Loading a file into host memory, DCCL against what users do today, side by side in one run (docs/storage.md):
 *   one rank:   one thread pread-ing the whole file in 64 MiB requests, against dcclFileLoad (DCCL_FILE_THREADS
 *               threads); warm page cache, and cold (the file's pages dropped before each run: drop_caches as root,
 *               else posix_fadvise(POSIX_FADV_DONTNEED));
 *   collective: N forked ranks each reading the whole file themselves (one thread each), against dcclCommFileLoad
 *               (each rank reads 1/N, an all-gather gives the rest), warm and cold.
 * Rounds alternate the two sides; medians are printed with the ratio DCCL / baseline (time) and GB/s.
 * Usage: file_load_perf FILE [ranks=4] [rounds=3]   (the file is read, never written) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dccl.h"
#include "file_load_common.h"

#define MAX_ROUNDS 15

static const char *path;
static size_t bytes;

static int baseline_read(char *buf) {
  int fd = open(path, O_RDONLY);
  size_t done = 0;
  while (fd >= 0 && done < bytes) {
    size_t want = bytes - done < (64u << 20) ? bytes - done : (64u << 20);
    ssize_t n = pread(fd, buf + done, want, (off_t)done);
    if (n <= 0) break;
    done += (size_t)n;
  }
  if (fd >= 0) close(fd);
  return done == bytes;
}

static int dccl_read(char *buf) {
  dcclLoad_t load;
  return dcclFileLoad(path, 0, bytes, buf, NULL, &load) == ncclSuccess && dcclLoadWait(load) == ncclSuccess;
}

/* nranks forked ranks, each with a buffer of the whole file: every one reads it all, or the collective load.
 * Returns the slowest rank's seconds (the parent times from fork to the last exit), or -1. */
static double ranks_read(int nranks, int collective) {
  ncclUniqueId id;
  if (collective && ncclGetUniqueId(&id) != ncclSuccess) return -1;
  double t0 = now_s();
  pid_t pids[64];
  for (int r = 0; r < nranks; r++) {
    if ((pids[r] = fork()) == 0) {
      char *buf = malloc(bytes);
      int ok = buf != NULL;
      if (ok) memset(buf, 0, bytes); /* pages in place before the clock matters to either side */
      if (collective) {
        ncclComm_t comm;
        ok = ok && ncclCommInitRank(&comm, nranks, id, r) == ncclSuccess &&
             dcclCommFileLoad(comm, path, 0, bytes, buf, NULL) == ncclSuccess;
      } else {
        ok = ok && baseline_read(buf);
      }
      _exit(ok ? 0 : 1);
    }
  }
  int ok = 1;
  for (int r = 0; r < nranks; r++) {
    int status;
    ok &= waitpid(pids[r], &status, 0) == pids[r] && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok ? now_s() - t0 : -1;
}

static void report(const char *what, double *base, double *ours, int rounds) {
  double b = median(base, rounds), d = median(ours, rounds);
  printf("%-34s %10.3f %10.3f %9.2f %9.2f %8.2fx\n", what, b, d, bytes / b / 1e9, bytes / d / 1e9, b / d);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE [ranks=4] [rounds=3]\n", argv[0]);
    return 2;
  }
  path = argv[1];
  int nranks = argc > 2 ? atoi(argv[2]) : 4, rounds = argc > 3 ? atoi(argv[3]) : 3;
  bytes = file_bytes(path);
  if (bytes == 0 || nranks < 1 || nranks > 64 || rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "%s: need a non-empty file, 1-64 ranks, 1-%d rounds\n", argv[0], MAX_ROUNDS);
    return 2;
  }
  char *buf = malloc(bytes);
  if (!buf) return 1;
  memset(buf, 0, bytes);
  const char *how = drop_cache(path);
  printf("# file_load_perf: %s, %zu bytes, %d rounds alternating, cold = %s; medians\n", path, bytes, rounds, how);
  printf("# %-32s %10s %10s %9s %9s %9s\n", "", "base s", "DCCL s", "base GB/s", "DCCL GB/s", "speedup");
  double base[MAX_ROUNDS], ours[MAX_ROUNDS];
  int ok = 1;
  for (int cold = 1; cold >= 0; cold--) {
    for (int i = 0; i < rounds; i++) {
      if (cold) drop_cache(path); else ok &= baseline_read(buf);
      double t = now_s();
      ok &= baseline_read(buf);
      base[i] = now_s() - t;
      if (cold) drop_cache(path);
      t = now_s();
      ok &= dccl_read(buf);
      ours[i] = now_s() - t;
    }
    report(cold ? "one rank, cold: 1 thread / dccl" : "one rank, warm: 1 thread / dccl", base, ours, rounds);
  }
  for (int cold = 1; cold >= 0; cold--) {
    for (int i = 0; i < rounds; i++) {
      if (cold) drop_cache(path);
      base[i] = ranks_read(nranks, 0);
      if (cold) drop_cache(path);
      ours[i] = ranks_read(nranks, 1);
      ok &= base[i] > 0 && ours[i] > 0;
    }
    char what[64];
    snprintf(what, sizeof what, "%d ranks, %s: each all / collective", nranks, cold ? "cold" : "warm");
    report(what, base, ours, rounds);
  }
  printf("# the collective's figures include forking the ranks and creating the communicator in each round\n");
  free(buf);
  if (!ok) printf("FAIL: a read failed\n");
  return ok ? 0 : 1;
}
