/* Deterministic mode (DCCL_DETERMINISTIC=1) across processes: three rank processes on GPU 0 (forked before anyone
 * touches CUDA) reduce float32 values whose sum depends on the order (1e8, -1e8, 3, 0.25, ...) by all-reduce,
 * reduce-scatter and reduce (root 1), sum and average, out of place and in place. Each output element must have the
 * bits of the rank-order float sum 0..N-1 the host path gives (an average: each input times the float 1/N first).
 * Run on the copy-engine path (DCCL_CE=1, collectives/device/ce_collectives.h) with pieces small enough
 * (DCCL_CE_CHUNK=4096) that every call takes many rounds, and under MPS on the kernels' ordered schedules (buffers
 * outside windows); the test's trace expectation says which path ran.
 * Each rank's dcclCommMemoryUsage must stay within DCCL_DEV_MEM_LIMIT (64 MiB unset): the copy engines' region is
 * fitted into what the device links leave (run it also with a large DCCL_CE_CHUNK and a small limit).
 * Usage: gpu_ce_bits   (under tests/cuda/with_mps.sh [--off])
 * Exit codes: 0 passed, 1 a failure, 77 no usable GPU. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ok.h"
#include "dccl.h"
#include "fault_harness.h"
#include "gpu_rank.h"

#define NRANKS 3
#define BLOCK 33335 /* elements per rank of the reduce-scatter; the others reduce NRANKS x BLOCK */
#define ROOT 1

struct shared {
  ncclUniqueId id;
  int failures[NRANKS];
};

static float value(int r, size_t i) {
  static const float big[4] = {1.0e8f, -1.0e8f, 3.0f, 0.25f};
  return big[(r + i) % 4] * (1.0f + (float)(i % 5) * 0.1f) + (float)r * 0.5f;
}

/* Element i of the reduction over every rank, in rank order, as the host path combines it. */
static float want(size_t i, ncclRedOp_t op) {
  float inv = 1.0f / (float)NRANKS, sum = 0;
  for (int r = 0; r < NRANKS; r++) {
    float x = op == ncclAvg ? value(r, i) * inv : value(r, i);
    sum = r == 0 ? x : sum + x;
  }
  return sum;
}

/* One call; `first`: the index of the output's element 0 in the reduced vector (reduce-scatter: rank x BLOCK). */
static int check(ncclComm_t comm, int rank, const char *what, ncclResult_t res, const float *recv, size_t n,
                 size_t first, ncclRedOp_t op, cudaStream_t s) {
  if (res != ncclSuccess) {
    FH_FAIL("rank %d %s: %s", rank, what, ncclGetLastError(comm));
    return 1;
  }
  CUDA_OK(cudaStreamSynchronize(s));
  float *host = malloc(n * sizeof(float));
  CUDA_OK(cudaMemcpy(host, recv, n * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (size_t i = 0; i < n && bad < 3; i++) {
    float w = want(first + i, op);
    if (memcmp(&w, &host[i], sizeof(float)))
      FH_FAIL("rank %d %s: element %zu is %.9g, want %.9g (rank-order bits)", rank, what, first + i, host[i], w), bad++;
  }
  free(host);
  return bad != 0;
}

static int rank_main(void *arg, int rank) {
  struct shared *sh = arg;
  ncclComm_t comm;
  int setup = gpu_rank_comm(&comm, NRANKS, sh->id, rank);
  if (setup) return setup;
  const size_t n = (size_t)NRANKS * BLOCK;
  float *input = malloc(n * sizeof(float)), *send, *recv;
  for (size_t i = 0; i < n; i++) input[i] = value(rank, i);
  cudaStream_t s;
  CUDA_OK(cudaMalloc((void **)&send, n * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&recv, n * sizeof(float)));
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const ncclRedOp_t ops[2] = {ncclSum, ncclAvg};
  int failures = 0;
  for (int o = 0; o < 2; o++) {
    for (int in_place = 0; in_place < 2; in_place++) {
      ncclRedOp_t op = ops[o];
      char what[96];
      float *in = in_place ? recv : send;
      /* all-reduce */
      CUDA_OK(cudaMemcpyAsync(in, input, n * sizeof(float), cudaMemcpyHostToDevice, s));
      snprintf(what, sizeof(what), "all-reduce %s%s", o ? "avg" : "sum", in_place ? " in place" : "");
      failures += check(comm, rank, what, ncclAllReduce(in, recv, n, ncclFloat, op, comm, s), recv, n, 0, op, s);
      /* reduce-scatter: rank r's output is block r (in place: the input's block r) */
      CUDA_OK(cudaMemcpyAsync(in, input, n * sizeof(float), cudaMemcpyHostToDevice, s));
      float *out = in_place ? recv + (size_t)rank * BLOCK : recv;
      snprintf(what, sizeof(what), "reduce-scatter %s%s", o ? "avg" : "sum", in_place ? " in place" : "");
      failures += check(comm, rank, what, ncclReduceScatter(in, out, BLOCK, ncclFloat, op, comm, s), out, BLOCK,
                        (size_t)rank * BLOCK, op, s);
      /* reduce to ROOT (only its output is checked) */
      CUDA_OK(cudaMemcpyAsync(in, input, n * sizeof(float), cudaMemcpyHostToDevice, s));
      snprintf(what, sizeof(what), "reduce %s%s", o ? "avg" : "sum", in_place ? " in place" : "");
      ncclResult_t res = ncclReduce(in, recv, n, ncclFloat, op, ROOT, comm, s);
      if (rank == ROOT) failures += check(comm, rank, what, res, recv, n, 0, op, s);
      else if (res != ncclSuccess || cudaStreamSynchronize(s) != cudaSuccess)
        FH_FAIL("rank %d %s: %s", rank, what, ncclGetLastError(comm)), failures++;
    }
  }
  size_t dev_bytes = 0, pinned_bytes = 0;
  const char *limit_text = getenv("DCCL_DEV_MEM_LIMIT");
  size_t limit = limit_text ? strtoull(limit_text, NULL, 0) : (size_t)64 << 20;
  if (dcclCommMemoryUsage(comm, &dev_bytes, &pinned_bytes) != ncclSuccess || dev_bytes > limit)
    FH_FAIL("rank %d: %zu bytes of GPU memory held, limit %zu", rank, dev_bytes, limit), failures++;
  printf("rank %d: %d of 12 calls with wrong bits or refused; %.2f MiB of GPU memory held (limit %.0f MiB)\n", rank,
         failures, dev_bytes / 1048576.0, limit / 1048576.0);
  sh->failures[rank] = failures;
  free(input);
  ncclCommDestroy(comm);
  return failures ? 1 : 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (system("nvidia-smi -L > /dev/null 2>&1") != 0) {
    printf("SKIP: no usable GPU\n");
    return 77;
  }
  struct shared *sh = fh_shared_alloc(sizeof(*sh));
  if (fh_unique_id(&sh->id) != ncclSuccess) return 1;
  for (int r = 0; r < NRANKS; r++) sh->failures[r] = -1;
  int status[NRANKS], killed[NRANKS];
  fh_run_ranks(rank_main, sh, NRANKS, 120, status, killed);
  for (int r = 0; r < NRANKS; r++) {
    char sbuf[64];
    FH_EXPECT(fh_status_ok(status[r]) && sh->failures[r] == 0, "rank %d: %s, %d calls failed", r,
              fh_status_str(status[r], sbuf, sizeof(sbuf)), sh->failures[r]);
  }
  printf("gpu_ce_bits: %s\n", fh_failures ? "FAILED" : "passed");
  return fh_failures ? 1 : 0;
}
