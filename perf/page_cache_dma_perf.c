/* Can the GPU copy a file straight out of the page cache? (issue 16, docs/storage.md) The file is mapped
 * read-only, the mapping registered with CUDA (cudaHostRegister with cudaHostRegisterReadOnly: the pages are
 * pinned where they lie, no copy into a staging buffer) and copied to the GPU in 64 MiB cudaMemcpyAsync calls;
 * against dcclFileLoad (the bounce: pread into pinned staging buffers, then copies), side by side, warm and cold
 * page cache, rounds alternating, every load checked against the file. The registration's time (pinning every
 * page, and reading it from the disk when it is not cached) is reported apart from the copies'.
 * A mapped file that shrinks raises SIGBUS on access: this path would need the file kept whole while it is loaded
 * (DCCL's loads use pread, which reports a short file as an error instead).
 * Usage: page_cache_dma_perf FILE [rounds=3]   (each load in a forked child; the parent never touches CUDA) */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "dccl.h"
#include "file_load_common.h"
#include "file_load_gpu_check.h"

#define MAX_ROUNDS 15
#define CHUNK ((size_t)64 << 20)

static const char *path;
static size_t bytes;
struct shared {
  double seconds, register_s; /* negative: failed */
};
static struct shared *sh;

/* The mapping registered with CUDA, copied in chunks; sh->register_s gets the registration's share. */
static int registered(char *dev, cudaStream_t s) {
  int fd = open(path, O_RDONLY);
  void *map = fd >= 0 ? mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (fd >= 0) close(fd);
  if (map == MAP_FAILED) return 0;
  double t = now_s();
  cudaError_t e = cudaHostRegister(map, bytes, cudaHostRegisterReadOnly);
  sh->register_s = now_s() - t;
  if (e != cudaSuccess) fprintf(stderr, "cudaHostRegister(ReadOnly) of the mapping: %s\n", cudaGetErrorString(e));
  int ok = e == cudaSuccess;
  for (size_t at = 0; ok && at < bytes; at += CHUNK)
    ok = cudaMemcpyAsync(dev + at, (char *)map + at, bytes - at < CHUNK ? bytes - at : CHUNK,
                         cudaMemcpyHostToDevice, s) == cudaSuccess;
  ok = ok && cudaStreamSynchronize(s) == cudaSuccess;
  if (e == cudaSuccess) cudaHostUnregister(map);
  munmap(map, bytes);
  return ok;
}

static int child(int dccl) {
  cudaSetDevice(0);
  cudaStream_t s;
  char *dev;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess || cudaMalloc((void **)&dev, bytes))
    return 1;
  cudaMemset(dev, 0, bytes);
  cudaDeviceSynchronize();
  sh->register_s = 0;
  double t = now_s();
  int ok;
  if (dccl) {
    dcclLoad_t load;
    ok = dcclFileLoad(path, 0, bytes, dev, s, &load) == ncclSuccess && dcclLoadWait(load) == ncclSuccess &&
         cudaStreamSynchronize(s) == cudaSuccess;
  } else {
    ok = registered(dev, s);
  }
  t = now_s() - t;
  ok = ok && gpu_matches_file(path, bytes, dev);
  sh->seconds = ok ? t : -1;
  return ok ? 0 : 1;
}

static double run(int dccl, double *register_s) {
  pid_t pid = fork();
  if (pid == 0) _exit(child(dccl));
  int status;
  int ok = waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  *register_s = sh->register_s;
  return ok ? sh->seconds : -1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE [rounds=3]\n", argv[0]);
    return 2;
  }
  path = argv[1];
  int rounds = argc > 2 ? atoi(argv[2]) : 3;
  bytes = file_bytes(path);
  if (bytes == 0 || rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "%s: need a non-empty file and 1-%d rounds\n", argv[0], MAX_ROUNDS);
    return 2;
  }
  if (!(sh = shared_results(sizeof(*sh)))) return 1;
  printf("# page_cache_dma_perf: %s, %zu bytes into GPU 0, %d rounds alternating; medians\n", path, bytes, rounds);
  printf("# %-22s %12s %12s %10s %10s %9s\n", "", "registered s", "of it, reg s", "DCCL s", "reg GB/s", "DCCL/reg");
  int ok = 1;
  for (int cold = 1; cold >= 0; cold--) {
    double reg[MAX_ROUNDS], reg_part[MAX_ROUNDS], ours[MAX_ROUNDS], unused;
    for (int i = 0; i < rounds; i++) {
      if (cold) drop_cache(path);
      reg[i] = run(0, &reg_part[i]);
      if (cold) drop_cache(path);
      ours[i] = run(1, &unused);
      ok &= reg[i] > 0 && ours[i] > 0;
    }
    double r = median(reg, rounds), p = median(reg_part, rounds), d = median(ours, rounds);
    printf("%-24s %12.3f %12.3f %10.3f %10.2f %8.2fx\n", cold ? "cold" : "warm", r, p, d, bytes / r / 1e9, d / r);
  }
  if (!ok) printf("FAIL: a load failed or loaded other bytes than the file's\n");
  return ok ? 0 : 1;
}
