/* Loading a file into GPU memory, DCCL against what users do today, side by side in one run (docs/storage.md,
 * issue 16's benchmark):
 *   one rank:   one thread pread-ing 64 MiB requests into a pinned buffer and cudaMemcpy-ing each to the GPU,
 *               against dcclFileLoad into the GPU buffer (the bounce through pinned staging buffers); warm page
 *               cache, and cold (drop_caches as root, else posix_fadvise(POSIX_FADV_DONTNEED));
 *   collective: N ranks in processes of their own on GPU 0 (run under MPS), each loading the whole file that way,
 *               against dcclCommFileLoad (each rank reads 1/N, the all-gather on the GPU gives the rest).
 * Every measurement runs in a forked child (the parent never touches CUDA, so it may fork), timed from just before
 * the load to the end of its stream; a collective round is its slowest rank. The loaded bytes are compared with the
 * file after every DCCL load. Rounds alternate the two sides; medians, GB/s, and the ratio baseline / DCCL (time).
 * Usage: file_load_gpu_perf FILE [ranks=4] [rounds=3] */
#include <cuda_runtime.h>
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
#include "file_load_gpu_check.h"

#define MAX_ROUNDS 15
#define MAX_RANKS 16
#define REQUEST ((size_t)64 << 20)

static const char *path;
static size_t bytes;

/* What the children report: each rank's seconds (negative: it failed). */
struct shared {
  ncclUniqueId id;
  double seconds[MAX_RANKS];
};
static struct shared *sh;

/* What users do: pread into one pinned buffer, cudaMemcpy to the GPU, request by request. */
static int baseline(char *dev) {
  char *pinned;
  if (cudaMallocHost((void **)&pinned, REQUEST) != cudaSuccess) return 0;
  int fd = open(path, O_RDONLY), ok = fd >= 0;
  for (size_t done = 0; ok && done < bytes;) {
    size_t want = bytes - done < REQUEST ? bytes - done : REQUEST;
    ssize_t n = pread(fd, pinned, want, (off_t)done);
    ok = n > 0 && cudaMemcpy(dev + done, pinned, (size_t)n, cudaMemcpyHostToDevice) == cudaSuccess;
    done += n > 0 ? (size_t)n : 0;
  }
  if (fd >= 0) close(fd);
  cudaFreeHost(pinned);
  return ok;
}

/* One rank's run: `collective` loads with dcclCommFileLoad (nranks ranks), else with dcclFileLoad (dccl) or the
 * baseline. */
static int child(int rank, int nranks, int dccl, int collective) {
  cudaSetDevice(0);
  cudaStream_t s;
  char *dev;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess || cudaMalloc((void **)&dev, bytes))
    return 1;
  cudaMemset(dev, 0, bytes);
  cudaDeviceSynchronize();
  ncclComm_t comm = NULL;
  if (collective && ncclCommInitRank(&comm, nranks, sh->id, rank) != ncclSuccess) return 1;
  double t = now_s();
  int ok;
  if (collective) {
    ok = dcclCommFileLoad(comm, path, 0, bytes, dev, s) == ncclSuccess;
  } else if (dccl) {
    dcclLoad_t load;
    ok = dcclFileLoad(path, 0, bytes, dev, s, &load) == ncclSuccess && dcclLoadWait(load) == ncclSuccess;
  } else {
    ok = baseline(dev);
  }
  ok = ok && cudaStreamSynchronize(s) == cudaSuccess;
  t = now_s() - t;
  if (!ok) fprintf(stderr, "rank %d: %s\n", rank, ncclGetLastError(comm));
  if (ok && dccl) ok = gpu_matches_file(path, bytes, dev);
  sh->seconds[rank] = ok ? t : -1;
  if (comm) ncclCommDestroy(comm);
  return ok ? 0 : 1;
}

/* nranks children at once; the slowest one's seconds, or -1. */
static double run(int nranks, int dccl, int collective) {
  if (collective && ncclGetUniqueId(&sh->id) != ncclSuccess) return -1;
  pid_t pids[MAX_RANKS];
  for (int r = 0; r < nranks; r++)
    if ((pids[r] = fork()) == 0) _exit(child(r, nranks, dccl, collective));
  double slowest = 0;
  for (int r = 0; r < nranks; r++) {
    int status;
    int ok = waitpid(pids[r], &status, 0) == pids[r] && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok || sh->seconds[r] < 0) slowest = -1;
    else if (slowest >= 0 && sh->seconds[r] > slowest) slowest = sh->seconds[r];
  }
  return slowest;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE [ranks=4] [rounds=3]\n", argv[0]);
    return 2;
  }
  path = argv[1];
  int nranks = argc > 2 ? atoi(argv[2]) : 4, rounds = argc > 3 ? atoi(argv[3]) : 3;
  bytes = file_bytes(path);
  if (bytes == 0 || nranks < 1 || nranks > MAX_RANKS || rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "%s: need a non-empty file, 1-%d ranks, 1-%d rounds\n", argv[0], MAX_RANKS, MAX_ROUNDS);
    return 2;
  }
  if (!(sh = shared_results(sizeof(*sh)))) return 1;
  printf("# file_load_gpu_perf: %s, %zu bytes into GPU 0, %d rounds alternating; medians\n", path, bytes, rounds);
  printf("# %-34s %10s %10s %9s %9s %9s\n", "", "base s", "DCCL s", "base GB/s", "DCCL GB/s", "speedup");
  int ok = 1;
  for (int collective = 0; collective <= 1; collective++) {
    for (int cold = 1; cold >= 0; cold--) {
      double base[MAX_ROUNDS], ours[MAX_ROUNDS];
      int n = collective ? nranks : 1;
      for (int i = 0; i < rounds; i++) {
        if (cold) drop_cache(path);
        base[i] = run(n, 0, 0);
        if (cold) drop_cache(path);
        ours[i] = run(n, 1, collective);
        ok &= base[i] > 0 && ours[i] > 0;
      }
      double b = median(base, rounds), d = median(ours, rounds);
      char what[64];
      snprintf(what, sizeof what, "%d rank%s, %s: %s", n, n > 1 ? "s" : "", cold ? "cold" : "warm",
               collective ? "each all / collective" : "pread+cudaMemcpy / dccl");
      printf("%-36s %10.3f %10.3f %9.2f %9.2f %8.2fx\n", what, b, d, bytes / b / 1e9, bytes / d / 1e9, b / d);
    }
  }
  if (!ok) printf("FAIL: a load failed or loaded other bytes than the file's\n");
  return ok ? 0 : 1;
}
