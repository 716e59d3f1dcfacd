/* The all-reduce of ranks that share one process and one GPU (ncclCommInitAll with the same device for each, one
 * stream per rank, every rank's call issued in one group by this thread), timed over sizes: what the direct
 * all-reduce is for, beside whatever DCCL_ALGO picks. Float32 sum, out of place; each size checked once first.
 * Columns: size, time per call (wall time of back-to-back calls, streams synchronised at the end), algbw = S / t,
 * busbw = algbw x 2 (N-1) / N as nccl-tests count it, the HBM traffic rate 2 N S / t against the floor of
 * docs/design.md (every input read once and every output written once), and up to 1 MiB the time per call with
 * every rank's stream synchronised after each (issue 11's 8-byte bar; "-" above 1 MiB). Beside it, in the same
 * run: the floor of that shape (an empty kernel on every rank's stream, then every stream synchronised) in the
 * header, and of a shared launch's (one empty kernel, every other rank's stream ordered before and after it by
 * events, as DCCL's ranks of one process share a launch), and up to 1 MiB a line "# graph+sync": the group
 * captured once as one CUDA graph across the ranks' streams, replayed and synchronised after each (its result
 * checked after the replays).
 * Usage: inproc_allreduce [nranks=2] [min bytes=8] [max bytes=1G] [iterations=20] [factor=8] */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dccl.h"

cudaError_t perf_launch_empty(cudaStream_t stream);

#define MAX_RANKS 8

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static size_t parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  size_t m = *end == 'K' ? 1 << 10 : *end == 'M' ? 1 << 20 : *end == 'G' ? 1 << 30 : 1;
  return (size_t)(v * (double)m);
}

static int nranks;
static ncclComm_t comms[MAX_RANKS];
static cudaStream_t streams[MAX_RANKS];
static float *in[MAX_RANKS], *out[MAX_RANKS];

static int allreduce(size_t n) {
  ncclGroupStart();
  for (int r = 0; r < nranks; r++) ncclAllReduce(in[r], out[r], n, ncclFloat32, ncclSum, comms[r], streams[r]);
  return ncclGroupEnd() == ncclSuccess;
}

static int sync_all(void) {
  for (int r = 0; r < nranks; r++)
    if (cudaStreamSynchronize(streams[r]) != cudaSuccess) return 0;
  return 1;
}

/* An empty kernel on every rank's stream, then every stream synchronised: what the same shape costs with no work. */
static double empty_sync_us(int iters) {
  double t0 = now_us();
  for (int i = 0; i < iters; i++) {
    for (int r = 0; r < nranks; r++)
      if (perf_launch_empty(streams[r]) != cudaSuccess) return -1;
    if (!sync_all()) return -1;
  }
  return (now_us() - t0) / iters;
}

/* One empty kernel on stream 0, every other stream's work ordered before it and its end before theirs by events,
 * then every stream synchronised: a shared launch's shape with no work. */
static double joined_sync_us(int iters) {
  cudaEvent_t ev[MAX_RANKS];
  int ok = 1;
  for (int r = 0; r < nranks; r++) ok = ok && cudaEventCreateWithFlags(&ev[r], cudaEventDisableTiming) == cudaSuccess;
  double t0 = now_us();
  for (int i = 0; i < iters && ok; i++) {
    for (int r = 1; r < nranks; r++)
      ok = ok && cudaEventRecord(ev[r], streams[r]) == cudaSuccess &&
           cudaStreamWaitEvent(streams[0], ev[r], 0) == cudaSuccess;
    ok = ok && perf_launch_empty(streams[0]) == cudaSuccess && cudaEventRecord(ev[0], streams[0]) == cudaSuccess;
    for (int r = 1; r < nranks; r++) ok = ok && cudaStreamWaitEvent(streams[r], ev[0], 0) == cudaSuccess;
    ok = ok && sync_all();
  }
  double us = (now_us() - t0) / iters;
  for (int r = 0; r < nranks; r++) cudaEventDestroy(ev[r]);
  return ok ? us : -1;
}

/* The group of every rank's all-reduce captured as one graph: stream 0 forks to the others through an event and
 * joins them back, so one launch on stream 0 replays every rank's kernel. */
static int capture(size_t n, cudaGraphExec_t *exec) {
  cudaEvent_t fork, join[MAX_RANKS];
  cudaGraph_t graph;
  int ok = cudaEventCreateWithFlags(&fork, cudaEventDisableTiming) == cudaSuccess;
  for (int r = 0; r < nranks; r++)
    ok = ok && cudaEventCreateWithFlags(&join[r], cudaEventDisableTiming) == cudaSuccess;
  ok = ok && cudaStreamBeginCapture(streams[0], cudaStreamCaptureModeGlobal) == cudaSuccess;
  ok = ok && cudaEventRecord(fork, streams[0]) == cudaSuccess;
  for (int r = 1; r < nranks; r++) ok = ok && cudaStreamWaitEvent(streams[r], fork, 0) == cudaSuccess;
  ok = allreduce(n) && ok;
  for (int r = 1; r < nranks; r++)
    ok = ok && cudaEventRecord(join[r], streams[r]) == cudaSuccess &&
         cudaStreamWaitEvent(streams[0], join[r], 0) == cudaSuccess;
  ok = cudaStreamEndCapture(streams[0], &graph) == cudaSuccess && ok;
  ok = ok && cudaGraphInstantiate(exec, graph, 0) == cudaSuccess;
  cudaGraphDestroy(graph);
  cudaEventDestroy(fork);
  for (int r = 0; r < nranks; r++) cudaEventDestroy(join[r]);
  return ok;
}

/* Every rank's output holds the sum of check's inputs. */
static int verify(size_t n) {
  float *h = malloc(n * sizeof(float) + 4);
  int ok = h != NULL;
  for (int r = 0; r < nranks && ok; r++) {
    ok = cudaMemcpy(h, out[r], n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
    for (size_t i = 0; i < n && ok; i++)
      ok = h[i] == (float)(nranks * (nranks + 1) / 2 + nranks * (int)(i % 3));
  }
  free(h);
  return ok;
}

/* Rank r's element i is r + 1 + (i % 3): every output element must be the sum over ranks. */
static int check(size_t n) {
  float *h = malloc(n * sizeof(float) + 4);
  int ok = h != NULL;
  for (int r = 0; r < nranks && ok; r++) {
    for (size_t i = 0; i < n; i++) h[i] = (float)(r + 1 + (int)(i % 3));
    ok = cudaMemcpy(in[r], h, n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemset(out[r], 0, n * sizeof(float)) == cudaSuccess;
  }
  free(h); /* the memsets ran on the legacy stream, which the ranks' non-blocking streams do not wait for */
  return ok && cudaDeviceSynchronize() == cudaSuccess && allreduce(n) && sync_all() && verify(n);
}

/* The group replayed as one graph and synchronised after each; prints "# graph+sync", checks the last result. */
static int graph_row(size_t bytes, size_t n, int iters) {
  cudaGraphExec_t exec;
  if (!check(n) || !capture(n, &exec)) return 0;
  int ok = 1;
  for (int r = 0; r < nranks; r++) ok = ok && cudaMemset(out[r], 0, n * sizeof(float)) == cudaSuccess;
  ok = ok && cudaDeviceSynchronize() == cudaSuccess;
  double t0 = now_us();
  for (int i = 0; i < iters && ok; i++)
    ok = cudaGraphLaunch(exec, streams[0]) == cudaSuccess && cudaStreamSynchronize(streams[0]) == cudaSuccess;
  double us = (now_us() - t0) / iters;
  ok = ok && verify(n);
  cudaGraphExecDestroy(exec);
  if (ok) printf("# graph+sync %zu B: %.2f us\n", bytes, us);
  return ok;
}

int main(int argc, char **argv) {
  nranks = argc > 1 ? atoi(argv[1]) : 2;
  size_t lo = argc > 2 ? parse_size(argv[2]) : 8, hi = argc > 3 ? parse_size(argv[3]) : (size_t)1 << 30;
  int iters = argc > 4 ? atoi(argv[4]) : 20, factor = argc > 5 ? atoi(argv[5]) : 8;
  if (nranks < 1 || nranks > MAX_RANKS || lo < 4 || hi < lo || iters < 1 || factor < 2) {
    fprintf(stderr, "usage: %s [nranks=2 (1-8)] [min bytes=8] [max bytes=1G] [iterations=20] [factor=8]\n", argv[0]);
    return 2;
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("SKIP: no usable GPU\n");
    return 77;
  }
  cudaSetDevice(0);
  int devs[MAX_RANKS] = {0};
  if (ncclCommInitAll(comms, nranks, devs) != ncclSuccess) {
    fprintf(stderr, "ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  for (int r = 0; r < nranks; r++) {
    if (cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking) != cudaSuccess ||
        cudaMalloc((void **)&in[r], hi) != cudaSuccess || cudaMalloc((void **)&out[r], hi) != cudaSuccess) {
      fprintf(stderr, "cannot allocate 2 x %zu bytes for rank %d\n", hi, r);
      return 1;
    }
  }
  const char *algo = getenv("DCCL_ALGO");
  printf("# inproc_allreduce: %d ranks of one process on GPU 0, float32 sum, out of place, DCCL_ALGO=%s, %d "
         "iterations\n#%12s %12s %10s %10s %12s %12s\n",
         nranks, algo && *algo ? algo : "(default)", iters, "size (B)", "time (us)", "algbw", "busbw", "2NS/t GB/s",
         "sync each");
  printf("# empty kernel on every rank's stream, then every stream synchronised: %.2f us\n", empty_sync_us(iters));
  printf("# one empty kernel, the other streams joined to it by events, every stream synchronised: %.2f us\n",
         joined_sync_us(iters));
  int status = 0;
  for (size_t bytes = lo; bytes <= hi; bytes *= (size_t)factor) {
    size_t n = bytes / sizeof(float);
    if (!check(n)) {
      printf("FAIL: %zu bytes: wrong result or error (%s)\n", bytes, ncclGetLastError(NULL));
      status = 1;
      break;
    }
    for (int i = 0; i < 3; i++) allreduce(n);
    sync_all();
    double t0 = now_us();
    int ok = 1;
    for (int i = 0; i < iters && ok; i++) ok = allreduce(n);
    ok = ok && sync_all();
    double us = (now_us() - t0) / iters, sync_us = 0;
    if (ok && bytes <= (1 << 20)) {
      t0 = now_us();
      for (int i = 0; i < iters && ok; i++) ok = allreduce(n) && sync_all();
      sync_us = (now_us() - t0) / iters;
    }
    if (!ok) {
      printf("FAIL: %zu bytes: %s\n", bytes, ncclGetLastError(NULL));
      status = 1;
      break;
    }
    double algbw = bytes / us / 1e3, busbw = algbw * 2.0 * (nranks - 1) / nranks;
    char sync_text[32] = "-";
    if (sync_us > 0) snprintf(sync_text, sizeof(sync_text), "%.2f", sync_us);
    printf(" %12zu %12.2f %10.2f %10.2f %12.1f %12s\n", bytes, us, algbw, busbw, 2.0 * nranks * bytes / us / 1e3,
           sync_text);
    fflush(stdout); /* a graph that hangs must not take the row with it */
    if (bytes <= (1 << 20) && !graph_row(bytes, n, iters)) {
      printf("FAIL: %zu bytes under graph replay: %s\n", bytes, ncclGetLastError(NULL));
      status = 1;
      break;
    }
  }
  for (int r = 0; r < nranks; r++) {
    ncclCommDestroy(comms[r]);
    cudaFree(in[r]);
    cudaFree(out[r]);
    cudaStreamDestroy(streams[r]);
  }
  return status;
}
