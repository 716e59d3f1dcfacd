/* Communicators whose kernels run at the same time on one GPU: ncomms communicators of nranks ranks each, all on
 * GPU 0 in this process, every (communicator, rank) on a stream of its own. Every round issues a large all-reduce
 * and an all-gather on every communicator, rank by rank and communicator by communicator (rank 0 of each, then
 * rank 1 of each, ...: no group, since a device call only launches), and only then waits. The GPU takes kernels in
 * about that order, so if each launch took the CTAs one communicator alone may use, the first kernels would fill
 * the GPU with half of each communicator, each spinning for a peer that never gets an SM (DCCL_MAX_CTAS set to
 * that share shows it). The test gives each round a deadline and then aborts, so a deadlock is a failure, not a
 * hang. Results are checked element by element (small integer
 * inputs: every order of summation is exact). Then the same communicators one at a time, which must still work,
 * and communicator 0 with each rank's calls on two streams that nothing orders (DCCL must).
 * Usage: gpu_concurrent [nranks=4] [ncomms=2]
 * Exit codes: 0 all passed, 1 a failure, 77 no usable GPU. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_ok.h"
#include "dccl.h"

#define MAX_RANKS 8
#define MAX_COMMS 4
#define COUNT ((size_t)4 << 20) /* floats per rank: 16 MiB, every channel busy */
#define ROUNDS 10
#define ROUND_DEADLINE_S 30.0

static int nranks = 4, ncomms = 2, n_failed, n_passed;
static ncclComm_t comms[MAX_COMMS][MAX_RANKS];
static cudaStream_t streams[MAX_COMMS][MAX_RANKS];
static cudaStream_t second[MAX_RANKS]; /* communicator 0's ranks' other stream */
static float *dsend[MAX_COMMS][MAX_RANKS], *drecv[MAX_COMMS][MAX_RANKS], *dgather[MAX_COMMS][MAX_RANKS];
static float *host;

static void check(int ok, const char *fmt, int a, int b) {
  printf("%s: ", ok ? "PASS" : "FAIL");
  printf(fmt, a, b);
  printf("\n");
  if (ok)
    n_passed++;
  else
    n_failed++;
}

/* Communicator k's rank r, element i, round t: small integers. */
static float input(int k, int r, size_t i, int t) {
  return (float)((k * 5 + r * 3 + t + (int)(i % 13)) % 9);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for every stream in `which` (a mask of communicators) up to the deadline; on expiry aborts them all. */
static int wait_all(unsigned which, const char *what, int round) {
  double end = now_s() + ROUND_DEADLINE_S;
  for (;;) {
    int busy = 0;
    for (int k = 0; k < ncomms; k++)
      for (int r = 0; r < nranks && (which >> k & 1); r++) {
        cudaError_t e = cudaStreamQuery(streams[k][r]);
        if (e == cudaSuccess && k == 0 && second[r]) e = cudaStreamQuery(second[r]); // made for the last phase
        if (e == cudaErrorNotReady)
          busy = 1;
        else if (e != cudaSuccess) {
          printf("FAIL: %s round %d: communicator %d rank %d's stream: %s\n", what, round, k, r, cudaGetErrorString(e));
          return 0;
        }
      }
    if (!busy) return 1;
    if (now_s() > end) {
      printf("FAIL: %s round %d: kernels still running after %.0f s (a deadlock); aborting\n", what, round,
             ROUND_DEADLINE_S);
      for (int k = 0; k < ncomms; k++)
        for (int r = 0; r < nranks; r++) ncclCommAbort(comms[k][r]);
      exit(1);
    }
    usleep(1000);
  }
}

static void fill(int k, int t) {
  for (int r = 0; r < nranks; r++) {
    for (size_t i = 0; i < COUNT; i++) host[i] = input(k, r, i, t);
    CUDA_OK(cudaMemcpy(dsend[k][r], host, COUNT * sizeof(float), cudaMemcpyHostToDevice));
  }
}

static int check_allreduce(int k, int t) {
  for (int r = 0; r < nranks; r++) {
    CUDA_OK(cudaMemcpy(host, drecv[k][r], COUNT * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < COUNT; i++) {
      float want = 0;
      for (int q = 0; q < nranks; q++) want += input(k, q, i, t);
      if (host[i] != want) {
        printf("  communicator %d rank %d element %zu: %g, expected %g\n", k, r, i, host[i], want);
        return 0;
      }
    }
  }
  return 1;
}

static int check_allgather(int k, int t) {
  size_t per = COUNT / (size_t)nranks;
  for (int r = 0; r < nranks; r++) {
    CUDA_OK(cudaMemcpy(host, dgather[k][r], COUNT * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < per * (size_t)nranks; i++)
      if (host[i] != input(k, (int)(i / per), i % per, t)) {
        printf("  communicator %d rank %d all-gather element %zu: %g\n", k, r, i, host[i]);
        return 0;
      }
  }
  return 1;
}

/* Issues a round on the communicators in `which` (a mask): an all-reduce, then an all-gather of the inputs' first
 * part, rank by rank, each rank's calls on every communicator before the next rank's. */
static int issue(unsigned which) {
  int ok = 1;
  for (int r = 0; r < nranks; r++)
    for (int k = 0; k < ncomms; k++)
      if (which >> k & 1)
        ok &= ncclAllReduce(dsend[k][r], drecv[k][r], COUNT, ncclFloat32, ncclSum, comms[k][r], streams[k][r]) ==
              ncclSuccess;
  for (int r = 0; r < nranks; r++)
    for (int k = 0; k < ncomms; k++)
      if (which >> k & 1)
        ok &= ncclAllGather(dsend[k][r], dgather[k][r], COUNT / (size_t)nranks, ncclFloat32, comms[k][r],
                            streams[k][r]) == ncclSuccess;
  if (!ok) printf("  %s\n", ncclGetLastError(NULL));
  return ok;
}

/* Communicator 0 on two streams per rank that nothing orders: the all-reduce on each rank's stream, the all-gather
 * on its second one. The communicator's kernels share its links, so DCCL must run them in issue order (as NCCL
 * does); run at once, they would take each other's slots. */
static int issue_two_streams(void) {
  int ok = 1;
  for (int r = 0; r < nranks; r++)
    ok &= ncclAllReduce(dsend[0][r], drecv[0][r], COUNT, ncclFloat32, ncclSum, comms[0][r], streams[0][r]) ==
          ncclSuccess;
  for (int r = 0; r < nranks; r++)
    ok &= ncclAllGather(dsend[0][r], dgather[0][r], COUNT / (size_t)nranks, ncclFloat32, comms[0][r], second[r]) ==
          ncclSuccess;
  if (!ok) printf("  %s\n", ncclGetLastError(NULL));
  return ok;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1) nranks = atoi(argv[1]);
  if (argc > 2) ncomms = atoi(argv[2]);
  if (nranks < 1 || nranks > MAX_RANKS || ncomms < 1 || ncomms > MAX_COMMS) return 2;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("SKIP: no usable GPU\n");
    return 77;
  }
  alarm(600);
  CUDA_OK(cudaSetDevice(0));
  host = malloc(COUNT * sizeof(float));
  int devs[MAX_RANKS] = {0};
  for (int k = 0; k < ncomms; k++) {
    if (ncclCommInitAll(comms[k], nranks, devs) != ncclSuccess) {
      printf("FAIL: ncclCommInitAll %d: %s\n", k, ncclGetLastError(NULL));
      return 1;
    }
    for (int r = 0; r < nranks; r++) {
      CUDA_OK(cudaStreamCreateWithFlags(&streams[k][r], cudaStreamNonBlocking));
      CUDA_OK(cudaMalloc((void **)&dsend[k][r], COUNT * sizeof(float)));
      CUDA_OK(cudaMalloc((void **)&drecv[k][r], COUNT * sizeof(float)));
      CUDA_OK(cudaMalloc((void **)&dgather[k][r], COUNT * sizeof(float)));
    }
  }
  /* All at once: every communicator's round queued before any is waited for. */
  for (int t = 0; t < ROUNDS; t++) {
    for (int k = 0; k < ncomms; k++) fill(k, t);
    CUDA_OK(cudaDeviceSynchronize());
    int ok = issue((1u << ncomms) - 1);
    ok = ok && wait_all((1u << ncomms) - 1, "at once", t);
    for (int k = 0; k < ncomms && ok; k++) ok = check_allreduce(k, t) && check_allgather(k, t);
    if (!ok || t == ROUNDS - 1)
      check(ok, "%d communicators of %d ranks at once on one GPU, every round", ncomms, nranks);
    if (!ok) break;
  }
  /* One at a time. */
  int ok = 1;
  for (int k = 0; k < ncomms && ok; k++) {
    fill(k, ROUNDS);
    ok = issue(1u << k) && wait_all(1u << k, "one at a time", k) && check_allreduce(k, ROUNDS) &&
         check_allgather(k, ROUNDS);
  }
  check(ok, "the %d communicators of %d ranks one at a time", ncomms, nranks);
  for (int r = 0; r < nranks; r++) CUDA_OK(cudaStreamCreateWithFlags(&second[r], cudaStreamNonBlocking));
  ok = 1;
  for (int t = 0; t < ROUNDS && ok; t++) {
    fill(0, ROUNDS + 1 + t);
    CUDA_OK(cudaDeviceSynchronize()); /* a pageable copy may still be landing when cudaMemcpy returns */
    ok = issue_two_streams() && wait_all(1u, "two streams", t) && check_allreduce(0, ROUNDS + 1 + t) &&
         check_allgather(0, ROUNDS + 1 + t);
  }
  check(ok, "communicator 0's %d ranks on two streams each, %d rounds", nranks, ROUNDS);
  for (int k = 0; k < ncomms; k++)
    for (int r = 0; r < nranks; r++) {
      ncclResult_t e = ncclSuccess;
      if (ncclCommGetAsyncError(comms[k][r], &e) != ncclSuccess || e != ncclSuccess) {
        printf("FAIL: communicator %d rank %d: %s\n", k, r, ncclGetLastError(comms[k][r]));
        n_failed++;
      }
      ncclCommDestroy(comms[k][r]);
      cudaFree(dsend[k][r]);
      cudaFree(drecv[k][r]);
      cudaFree(dgather[k][r]);
      cudaStreamDestroy(streams[k][r]);
      if (k == 0 && second[r]) cudaStreamDestroy(second[r]);
    }
  free(host);
  printf("gpu_concurrent (%d ranks x %d communicators): %d passed, %d failed\n", nranks, ncomms, n_passed, n_failed);
  return n_failed ? 1 : 0;
}
