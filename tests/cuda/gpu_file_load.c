/* Files into GPU memory (dcclFileLoad, dcclCommFileLoad; src/storage): the bounce through pinned staging buffers.
 * Checked, every byte against the file: ranges of 1, 4095, 4 MiB + 13 and 40 MiB + 1 bytes at odd offsets into a
 * cudaMalloc buffer at an odd address, with many small chunks too; ordering on the stream: a kernel queued first
 * writes the destination 200 ms later, the load's call returns well before that, and the file's bytes win (the
 * load waited for the kernel), and a copy queued after the load sees them (the stream waited for the load); a
 * missing file refused at the call with the stream left usable; the collective load of 2 and 3 ranks of this
 * process (a thread each) into each rank's GPU buffer.
 * Usage: gpu_file_load  (DCCL_FILE_CHUNK and DCCL_FILE_THREADS apply) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_ok.h"
#include "dccl.h"
#include "late_writer.h"

static int failures;
#define EXPECT(cond, ...)                \
  do {                                   \
    if (!(cond)) {                       \
      printf("FAIL: " __VA_ARGS__);      \
      printf("\n");                      \
      failures++;                        \
    }                                    \
  } while (0)

static unsigned char byte_at(size_t i) { return (unsigned char)(i * 131u + (i >> 12) + 7); }
static char path[256];
#define FILE_BYTES ((size_t)48 << 20)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int make_file(void) {
  snprintf(path, sizeof path, "/dev/shm/dccl-gpu-load-%d", (int)getpid());
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  unsigned char *buf = malloc(FILE_BYTES);
  for (size_t i = 0; i < FILE_BYTES; i++) buf[i] = byte_at(i);
  size_t n = fwrite(buf, 1, FILE_BYTES, f);
  free(buf);
  fclose(f);
  return n == FILE_BYTES ? 0 : -1;
}

/* The device bytes [dst, dst + n) against the file from `offset`; the first wrong byte's index, or -1. */
static long first_wrong(const unsigned char *dev, size_t offset, size_t n) {
  unsigned char *host = malloc(n ? n : 1);
  CUDA_OK(cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost));
  long bad = -1;
  for (size_t i = 0; i < n && bad < 0; i++)
    if (host[i] != byte_at(offset + i)) bad = (long)i;
  free(host);
  return bad;
}

static void ranges(cudaStream_t s) {
  static const size_t sizes[] = {1, 4095, (4u << 20) + 13, (40u << 20) + 1};
  unsigned char *base;
  CUDA_OK(cudaMalloc((void **)&base, (41u << 20) + 64));
  unsigned char *dst = base + 3; /* an odd address */
  for (int i = 0; i < 4; i++) {
    size_t offset = 1000 * (size_t)i + 17;
    CUDA_OK(cudaMemsetAsync(base, 0, (41u << 20) + 64, s)); /* ordered before the load on s */
    dcclLoad_t load = NULL;
    ncclResult_t res = dcclFileLoad(path, offset, sizes[i], dst, s, &load);
    EXPECT(res == ncclSuccess, "load of %zu bytes: %s", sizes[i], ncclGetLastError(NULL));
    if (res != ncclSuccess) continue;
    res = dcclLoadWait(load);
    EXPECT(res == ncclSuccess, "wait for %zu bytes: %s", sizes[i], ncclGetLastError(NULL));
    CUDA_OK(cudaStreamSynchronize(s));
    long bad = first_wrong(dst, offset, sizes[i]);
    EXPECT(bad < 0, "%zu bytes from byte %zu: byte %ld differs from the file", sizes[i], offset, bad);
    if (bad < 0) printf("ok: %zu bytes from byte %zu into GPU memory, every byte checked\n", sizes[i], offset);
  }
  CUDA_OK(cudaFree(base));
}

/* A kernel queued first writes the destination 200 ms later: the file's bytes must be what remains. */
static void ordering(cudaStream_t s) {
  size_t n = 4u << 20;
  float *dst;
  CUDA_OK(cudaMalloc((void **)&dst, n));
  CUDA_OK(late_writer_launch(dst, (int)(n / sizeof(float)), 1.0f, 200, s));
  double t0 = now();
  dcclLoad_t load = NULL;
  ncclResult_t res = dcclFileLoad(path, 0, n, dst, s, &load);
  double call_s = now() - t0;
  EXPECT(res == ncclSuccess, "load behind a kernel: %s", ncclGetLastError(NULL));
  if (res != ncclSuccess) return;
  EXPECT(call_s < 0.05, "the call took %.3f s with a 200 ms kernel queued before it (it must not wait)", call_s);
  /* A copy queued after the load: it must see the file's bytes. */
  unsigned char *host;
  CUDA_OK(cudaMallocHost((void **)&host, n));
  CUDA_OK(cudaMemcpyAsync(host, dst, n, cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  double total_s = now() - t0;
  EXPECT(dcclLoadWait(load) == ncclSuccess, "wait: %s", ncclGetLastError(NULL));
  long bad = -1;
  for (size_t i = 0; i < n && bad < 0; i++)
    if (host[i] != byte_at(i)) bad = (long)i;
  EXPECT(bad < 0, "behind a kernel: byte %ld is not the file's (the load ran before the kernel, or the copy before "
         "the load)", bad);
  EXPECT(total_s >= 0.15, "the stream finished in %.3f s: the kernel's delay did not hold the load back", total_s);
  if (bad < 0)
    printf("ok: a load behind a 200 ms kernel returned in %.1f ms; the copy after it saw the file (%.0f ms in all)\n",
           call_s * 1e3, total_s * 1e3);
  CUDA_OK(cudaFreeHost(host));
  CUDA_OK(cudaFree(dst));
}

static void refused(cudaStream_t s) {
  void *dst;
  CUDA_OK(cudaMalloc(&dst, 4096));
  dcclLoad_t load = NULL;
  ncclResult_t res = dcclFileLoad("/nonexistent/dccl-file", 0, 4096, dst, s, &load);
  EXPECT(res == ncclInvalidArgument && load == NULL && strstr(ncclGetLastError(NULL), "/nonexistent/dccl-file"),
         "a missing file: %d (%s)", (int)res, ncclGetLastError(NULL));
  CUDA_OK(cudaMemsetAsync(dst, 1, 4096, s));
  CUDA_OK(cudaStreamSynchronize(s)); /* nothing was left queued waiting for a load that never started */
  CUDA_OK(cudaFree(dst));
}

struct rank_arg {
  ncclComm_t comm;
  int rank, nranks;
  unsigned char *dst;
  ncclResult_t res;
};

static void *collective_rank(void *p) {
  struct rank_arg *a = p;
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  a->res = dcclCommFileLoad(a->comm, path, 5, (8u << 20) + 3, a->dst, s);
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaStreamDestroy(s));
  return NULL;
}

static void collective(int nranks) {
  ncclComm_t comms[4];
  int devs[4] = {0, 0, 0, 0};
  if (ncclCommInitAll(comms, nranks, devs) != ncclSuccess) {
    EXPECT(0, "ncclCommInitAll: %s", ncclGetLastError(NULL));
    return;
  }
  struct rank_arg args[4];
  pthread_t threads[4];
  size_t n = (8u << 20) + 3;
  for (int r = 0; r < nranks; r++) {
    args[r] = (struct rank_arg){comms[r], r, nranks, NULL, ncclSuccess};
    CUDA_OK(cudaMalloc((void **)&args[r].dst, n));
    pthread_create(&threads[r], NULL, collective_rank, &args[r]);
  }
  for (int r = 0; r < nranks; r++) pthread_join(threads[r], NULL);
  for (int r = 0; r < nranks; r++) {
    EXPECT(args[r].res == ncclSuccess, "collective load, rank %d of %d: %s", r, nranks, ncclGetLastError(comms[r]));
    long bad = first_wrong(args[r].dst, 5, n);
    EXPECT(bad < 0, "collective load, rank %d of %d: byte %ld differs from the file", r, nranks, bad);
    CUDA_OK(cudaFree(args[r].dst));
    ncclCommDestroy(comms[r]);
  }
  if (!failures) printf("ok: the collective load of %zu bytes, %d ranks on the GPU, every byte checked\n", n, nranks);
}

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("SKIP: no usable GPU\n");
    return 77;
  }
  if (make_file() != 0) {
    printf("FAIL: cannot write %s\n", path);
    return 1;
  }
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ranges(s);
  ordering(s);
  refused(s);
  collective(2);
  collective(3);
  CUDA_OK(cudaStreamDestroy(s));
  unlink(path);
  printf("gpu_file_load: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
