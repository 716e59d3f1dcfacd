/* Device-buffer semantics beyond plain calls, 2 ranks of this process on GPU 0, each on a stream of its own:
 * - two ranks of one process on the legacy default stream are refused with a reason (their kernels would
 *   serialise and wait for each other forever);
 * - all-reduces captured into CUDA graphs (global capture mode) replay correctly: inputs change before every
 *   replay, eager all-reduces run between replays, two graphs (different sizes and ops) alternate;
 * - zero-element calls are captured (nothing recorded), even a send/recv whose link was never made;
 * - a host-buffer collective on a communicator follows its device work: when it returns, the device all-reduce
 *   queued before it has finished.
 * Exit codes: 0 all passed, 1 a failure, 77 no usable GPU. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_ok.h"
#include "dccl.h"

#define NRANKS 2
static int n_failed, n_passed;
static ncclComm_t comms[NRANKS];
static cudaStream_t streams[NRANKS];

static void check(int ok, const char *what) {
  printf("%s: %s%s%s\n", ok ? "ok" : "FAIL", what, ok ? "" : ": ", ok ? "" : ncclGetLastError(NULL));
  if (ok) n_passed++; else n_failed++;
}

static void legacy_stream_refused(float **buf) {
  ncclGroupStart();
  for (int r = 0; r < NRANKS; r++) ncclAllReduce(buf[r], buf[r], 1024, ncclFloat32, ncclSum, comms[r], NULL);
  ncclResult_t res = ncclGroupEnd();
  check(res == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "legacy default stream"),
        "two ranks of one process on the legacy stream are refused");
}

/* Writes rank r's input (value + r at every element), n floats. */
static void set_inputs(float **in, size_t n, float value) {
  float *h = malloc(n * sizeof(float));
  for (int r = 0; r < NRANKS; r++) {
    for (size_t i = 0; i < n; i++) h[i] = value + (float)r + (float)(i % 5);
    CUDA_OK(cudaMemcpy(in[r], h, n * sizeof(float), cudaMemcpyHostToDevice));
  }
  free(h);
}

/* Every rank's output holds op over the ranks' inputs. */
static int outputs_ok(float **out, size_t n, float value, ncclRedOp_t op) {
  float *h = malloc(n * sizeof(float));
  int ok = 1;
  for (int r = 0; r < NRANKS && ok; r++) {
    CUDA_OK(cudaMemcpy(h, out[r], n * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n && ok; i++) {
      float base = value + (float)(i % 5), want = op == ncclMax ? base + NRANKS - 1 : NRANKS * base + 1;
      if (h[i] != want) {
        printf("  rank %d element %zu: %g, expected %g\n", r, i, h[i], want);
        ok = 0;
      }
    }
  }
  free(h);
  return ok;
}

static void capture(cudaGraphExec_t *exec, float **in, float **out, size_t n, ncclRedOp_t op) {
  cudaGraph_t graphs[NRANKS];
  for (int r = 0; r < NRANKS; r++) CUDA_OK(cudaStreamBeginCapture(streams[r], cudaStreamCaptureModeGlobal));
  ncclGroupStart();
  for (int r = 0; r < NRANKS; r++) ncclAllReduce(in[r], out[r], n, ncclFloat32, op, comms[r], streams[r]);
  ncclResult_t res = ncclGroupEnd();
  /* Every capture ends before any graph is instantiated (global mode forbids that while one is open). */
  for (int r = 0; r < NRANKS; r++) CUDA_OK(cudaStreamEndCapture(streams[r], &graphs[r]));
  for (int r = 0; r < NRANKS; r++) {
    CUDA_OK(cudaGraphInstantiate(&exec[r], graphs[r], 0));
    CUDA_OK(cudaGraphDestroy(graphs[r]));
  }
  check(res == ncclSuccess, "all-reduces are captured into graphs");
}

static int sync_ok(void) {
  for (int r = 0; r < NRANKS; r++)
    if (cudaStreamSynchronize(streams[r]) != cudaSuccess) return 0;
  for (int r = 0; r < NRANKS; r++) {
    ncclResult_t e;
    if (ncclCommGetAsyncError(comms[r], &e) != ncclSuccess || e != ncclSuccess) return 0;
  }
  return 1;
}

static void graphs_replay(float **in, float **out, float **in2, float **out2) {
  const size_t n1 = 1 << 20, n2 = 1000;
  cudaGraphExec_t g1[NRANKS], g2[NRANKS];
  capture(g1, in, out, n1, ncclSum);
  capture(g2, in2, out2, n2, ncclMax);
  int ok = 1;
  for (int iter = 0; iter < 10 && ok; iter++) {
    set_inputs(in, n1, (float)(iter * 10));
    set_inputs(in2, n2, (float)(iter * 7));
    CUDA_OK(cudaDeviceSynchronize());
    for (int r = 0; r < NRANKS; r++) CUDA_OK(cudaGraphLaunch(g1[r], streams[r]));
    for (int r = 0; r < NRANKS; r++) CUDA_OK(cudaGraphLaunch(g2[r], streams[r]));
    ok = sync_ok() && outputs_ok(out, n1, (float)(iter * 10), ncclSum) && outputs_ok(out2, n2, (float)(iter * 7), ncclMax);
    /* An eager all-reduce between replays, over the same links. */
    set_inputs(in2, n2, 3.0f);
    CUDA_OK(cudaDeviceSynchronize());
    ncclGroupStart();
    for (int r = 0; r < NRANKS; r++) ncclAllReduce(in2[r], out2[r], n2, ncclFloat32, ncclSum, comms[r], streams[r]);
    ok = ok && ncclGroupEnd() == ncclSuccess && sync_ok() && outputs_ok(out2, n2, 3.0f, ncclSum);
    if (!ok) printf("  replay %d failed\n", iter);
  }
  check(ok, "two graphs alternate over 10 replays with new inputs, eager all-reduces between");
  for (int r = 0; r < NRANKS; r++) {
    cudaGraphExecDestroy(g1[r]);
    cudaGraphExecDestroy(g2[r]);
  }
}

/* Zero-element calls captured (nccl-tests -G starts at 0 bytes): an all-reduce, an all-gather and a send/recv pair
 * whose link was never made are accepted, and the graphs replay. */
static void empty_calls_captured(float **in, float **out) {
  cudaGraph_t graphs[NRANKS];
  cudaGraphExec_t exec[NRANKS];
  for (int r = 0; r < NRANKS; r++) CUDA_OK(cudaStreamBeginCapture(streams[r], cudaStreamCaptureModeGlobal));
  ncclGroupStart();
  for (int r = 0; r < NRANKS; r++) {
    ncclAllReduce(in[r], out[r], 0, ncclFloat32, ncclSum, comms[r], streams[r]);
    ncclAllGather(in[r], out[r], 0, ncclFloat32, comms[r], streams[r]);
    ncclSend(in[r], 0, ncclFloat32, 1 - r, comms[r], streams[r]);
    ncclRecv(out[r], 0, ncclFloat32, 1 - r, comms[r], streams[r]);
  }
  ncclResult_t res = ncclGroupEnd();
  const char *why = res == ncclSuccess ? "" : ncclGetLastError(NULL);
  for (int r = 0; r < NRANKS; r++) CUDA_OK(cudaStreamEndCapture(streams[r], &graphs[r]));
  int ok = res == ncclSuccess;
  for (int r = 0; r < NRANKS; r++) {
    CUDA_OK(cudaGraphInstantiate(&exec[r], graphs[r], 0));
    CUDA_OK(cudaGraphDestroy(graphs[r]));
    CUDA_OK(cudaGraphLaunch(exec[r], streams[r]));
  }
  ok = ok && sync_ok();
  for (int r = 0; r < NRANKS; r++) cudaGraphExecDestroy(exec[r]);
  if (!ok) printf("  %s\n", why);
  check(ok, "zero-element all-reduce, all-gather and send/recv (no link made yet) are captured and replay");
}

static void host_op_follows_device_work(float **in, float **out) {
  const size_t n = (size_t)64 << 20; /* 256 MiB: the kernels run for milliseconds */
  ncclGroupStart();
  for (int r = 0; r < NRANKS; r++) ncclAllReduce(in[r], out[r], n, ncclFloat32, ncclSum, comms[r], streams[r]);
  int ok = ncclGroupEnd() == ncclSuccess;
  float host_in[NRANKS][4] = {{1, 2, 3, 4}, {1, 2, 3, 4}}, host_out[NRANKS][4];
  ncclGroupStart();
  for (int r = 0; r < NRANKS; r++) ncclAllReduce(host_in[r], host_out[r], 4, ncclFloat32, ncclSum, comms[r], NULL);
  ok = ok && ncclGroupEnd() == ncclSuccess && host_out[0][3] == 8.0f;
  for (int r = 0; r < NRANKS; r++) ok = ok && cudaStreamQuery(streams[r]) == cudaSuccess;
  check(ok, "a host all-reduce returns after the device all-reduce queued before it");
  ok = sync_ok();
  check(ok, "and the device all-reduce succeeded");
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("SKIP: no usable GPU\n");
    return 77;
  }
  alarm(240);
  CUDA_OK(cudaSetDevice(0));
  int devs[NRANKS] = {0};
  if (ncclCommInitAll(comms, NRANKS, devs) != ncclSuccess) {
    printf("FAIL: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  float *in[NRANKS], *out[NRANKS], *in2[NRANKS], *out2[NRANKS];
  size_t big = (size_t)64 << 20;
  for (int r = 0; r < NRANKS; r++) {
    CUDA_OK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc((void **)&in[r], big * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&out[r], big * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&in2[r], 4096 * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&out2[r], 4096 * sizeof(float)));
  }
  legacy_stream_refused(in);
  empty_calls_captured(in, out);
  graphs_replay(in, out, in2, out2);
  host_op_follows_device_work(in, out);
  for (int r = 0; r < NRANKS; r++) {
    ncclCommDestroy(comms[r]);
    cudaFree(in[r]);
    cudaFree(out[r]);
    cudaFree(in2[r]);
    cudaFree(out2[r]);
    cudaStreamDestroy(streams[r]);
  }
  printf("gpu_graphs: %d passed, %d failed\n", n_passed, n_failed);
  return n_failed ? 1 : 0;
}
