/* Collectives on device buffers, all ranks on GPU 0 in this one process (ncclCommInitAll with the same device for
 * every rank), each rank on a stream of its own, driven in groups from this thread. Every collective, in-place
 * and out-of-place, at sizes 0, 1, 7, 1000 and 1048579 elements, for float32 sum, int32 max, bf16 sum and
 * float32 avg; then a ring of sends and an all-to-all; then ncclRedOpCreatePreMulSum with a host scalar and with one
 * in GPU memory (read as the kernel runs: changed between calls, the operator destroyed right after each); then,
 * on fresh communicators, rank 0 passing another count, type or reduction than the others, which every rank's
 * ncclCommGetAsyncError must report as a failure, one at least as ncclInvalidUsage naming both calls; then
 * nonblocking communicators (creation polled without pause, then an all-reduce). Inputs
 * are small integers, so every reduction order gives the exact answer, which is computed on the host and compared
 * element by element.
 * `big` instead runs float32 and bf16 sum all-reduces of 1 GiB per rank only.
 * `deterministic` (with DCCL_DETERMINISTIC=1) instead checks the bits of float32 sums and averages.
 * `path_mismatch` (with DCCL_DIRECT_MIN_BYTES=8192 DCCL_STALL_REPORT_MS=500) instead has rank 0 call a collective
 * that takes a FIFO algorithm while the others take the direct one, or a broadcast from another root where every
 * rank waits to receive, so no fingerprint meets another: the stall report must name both calls on every rank
 * within 2.5 s, then an all-reduce on the first communicators works.
 * `revoke` instead revokes every rank while rank 0's receive waits in its kernel (ncclCommRevoke).
 * `one_stream` instead calls every rank's all-reduce on one stream in one group: summed in a shared launch, or
 * refused at the call where the work does not fit one.
 * Usage: gpu_colls [nranks=2] [memalloc|big|deterministic|path_mismatch|premul|root_mismatch|revoke|one_stream]
 * (DCCL_ALGO picks ring, tree, oneshot or direct; by default the all-reduce is direct, since the ranks share this
 * process and GPU; DCCL_TRANSPORT=shm stages the links)
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
static int nranks = 2, n_failed, n_passed;

static ncclComm_t comms[MAX_RANKS];
static cudaStream_t streams[MAX_RANKS];
static void *dsend[MAX_RANKS], *drecv[MAX_RANKS];
static size_t cap_bytes;

/* Rank r's input element i: a small integer, exact in every type tested. */
static int input(int r, size_t i) {
  return (int)((r * 3 + (int)(i % 11)) % 7) + 1;
}

static uint16_t bf16_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16); /* exact for small integers */
}
static float f_of_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

struct tcase {
  ncclDataType_t type;
  ncclRedOp_t op;
  const char *name;
};

static size_t esize(ncclDataType_t t) { return t == ncclBfloat16 ? 2 : 4; }

static void store(ncclDataType_t t, void *buf, size_t i, double v) {
  if (t == ncclFloat32) ((float *)buf)[i] = (float)v;
  else if (t == ncclInt32) ((int32_t *)buf)[i] = (int32_t)v;
  else ((uint16_t *)buf)[i] = bf16_of((float)v);
}
static double load(ncclDataType_t t, const void *buf, size_t i) {
  if (t == ncclFloat32) return ((const float *)buf)[i];
  if (t == ncclInt32) return ((const int32_t *)buf)[i];
  return f_of_bf16(((const uint16_t *)buf)[i]);
}

static double reduce_ref(const struct tcase *c, size_t i) {
  double acc = 0;
  for (int r = 0; r < nranks; r++) {
    double x = input(r, i);
    if (c->op == ncclMax) acc = r == 0 || x > acc ? x : acc;
    else acc += x;
  }
  return c->op == ncclAvg ? acc / nranks : acc;
}

static void fill_inputs(const struct tcase *c, size_t n) {
  void *h = malloc(n * esize(c->type) + 1);
  for (int r = 0; r < nranks; r++) {
    for (size_t i = 0; i < n; i++) store(c->type, h, i, input(r, i));
    CUDA_OK(cudaMemcpy(dsend[r], h, n * esize(c->type), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(drecv[r], 0xee, cap_bytes));
  }
  CUDA_OK(cudaDeviceSynchronize()); /* no kernel of ours runs between cases */
  free(h);
}

/* Copies rank r's output (n elements) back and compares it with want(i). */
static int compare(const char *what, const struct tcase *c, int r, const void *dbuf, size_t n,
                   double (*want)(const struct tcase *, int, size_t)) {
  void *h = malloc(n * esize(c->type) + 1);
  CUDA_OK(cudaMemcpy(h, dbuf, n * esize(c->type), cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    double got = load(c->type, h, i), exp = want(c, r, i);
    double tol = c->type == ncclBfloat16 || c->op == ncclAvg ? 1e-2 * (exp < 0 ? -exp : exp) + 1e-2 : 0;
    if (got - exp > tol || exp - got > tol) {
      if (bad++ < 3) printf("  %s %s rank %d element %zu: %g, expected %g\n", what, c->name, r, i, got, exp);
    }
  }
  free(h);
  return bad == 0;
}

static double want_allreduce(const struct tcase *c, int r, size_t i) { (void)r; return reduce_ref(c, i); }
static double want_bcast(const struct tcase *c, int r, size_t i) { (void)c, (void)r; return input(1 % nranks, i); }
static size_t cur_n;
static double want_allgather(const struct tcase *c, int r, size_t i) {
  (void)c, (void)r;
  return input((int)(i / cur_n), i % cur_n);
}
static double want_reducescatter(const struct tcase *c, int r, size_t i) { return reduce_ref(c, (size_t)r * cur_n + i); }
static double want_ring(const struct tcase *c, int r, size_t i) { (void)c; return input((r + nranks - 1) % nranks, i); }
static double want_alltoall(const struct tcase *c, int r, size_t i) {
  (void)c;
  return input((int)(i / cur_n), (size_t)r * cur_n + i % cur_n);
}

static void result(int ok, const char *what, const struct tcase *c, size_t n, int inplace) {
  if (ok) n_passed++;
  else {
    n_failed++;
    printf("FAIL: %s %s n=%zu %s (%s)\n", what, c->name, n, inplace ? "in-place" : "out-of-place",
           ncclGetLastError(NULL));
  }
}

static int sync_all(void) {
  for (int r = 0; r < nranks; r++)
    if (cudaStreamSynchronize(streams[r]) != cudaSuccess) return 0;
  for (int r = 0; r < nranks; r++) {
    ncclResult_t e;
    if (ncclCommGetAsyncError(comms[r], &e) != ncclSuccess || e != ncclSuccess) {
      printf("  rank %d: %s\n", r, ncclGetLastError(comms[r]));
      return 0;
    }
  }
  return 1;
}

static void run_case(const struct tcase *c, size_t n, int inplace) {
  size_t es = esize(c->type);
  int ok;
  /* all-reduce */
  fill_inputs(c, n);
  ncclGroupStart();
  for (int r = 0; r < nranks; r++)
    ncclAllReduce(dsend[r], inplace ? dsend[r] : drecv[r], n, c->type, c->op, comms[r], streams[r]);
  ok = ncclGroupEnd() == ncclSuccess && sync_all();
  for (int r = 0; r < nranks && ok; r++) ok = compare("allreduce", c, r, inplace ? dsend[r] : drecv[r], n, want_allreduce);
  result(ok, "allreduce", c, n, inplace);
  if (c->op != ncclSum) return; /* the rest moves data: one reduction is enough */
  /* broadcast from rank 1 */
  fill_inputs(c, n);
  ncclGroupStart();
  for (int r = 0; r < nranks; r++)
    ncclBroadcast(dsend[r], inplace ? dsend[r] : drecv[r], n, c->type, 1 % nranks, comms[r], streams[r]);
  ok = ncclGroupEnd() == ncclSuccess && sync_all();
  for (int r = 0; r < nranks && ok; r++) ok = compare("broadcast", c, r, inplace ? dsend[r] : drecv[r], n, want_bcast);
  result(ok, "broadcast", c, n, inplace);
  /* reduce to rank 0 */
  fill_inputs(c, n);
  ncclGroupStart();
  for (int r = 0; r < nranks; r++)
    ncclReduce(dsend[r], inplace ? dsend[r] : drecv[r], n, c->type, c->op, 0, comms[r], streams[r]);
  ok = ncclGroupEnd() == ncclSuccess && sync_all() &&
       compare("reduce", c, 0, inplace ? dsend[0] : drecv[0], n, want_allreduce);
  result(ok, "reduce", c, n, inplace);
  /* all-gather of n / nranks per rank; in place: rank r's part sits at r * per in the output */
  cur_n = n / nranks;
  fill_inputs(c, n);
  ncclGroupStart();
  for (int r = 0; r < nranks; r++) {
    const char *src = inplace ? (const char *)drecv[r] + (size_t)r * cur_n * es : dsend[r];
    if (inplace) CUDA_OK(cudaMemcpy((void *)src, dsend[r], cur_n * es, cudaMemcpyDeviceToDevice));
    ncclAllGather(src, drecv[r], cur_n, c->type, comms[r], streams[r]);
  }
  ok = ncclGroupEnd() == ncclSuccess && sync_all();
  for (int r = 0; r < nranks && ok; r++) ok = compare("allgather", c, r, drecv[r], cur_n * nranks, want_allgather);
  result(ok, "allgather", c, n, inplace);
  /* reduce-scatter of n / nranks per rank */
  fill_inputs(c, n);
  ncclGroupStart();
  for (int r = 0; r < nranks; r++)
    ncclReduceScatter(dsend[r], inplace ? (char *)dsend[r] + (size_t)r * cur_n * es : drecv[r], cur_n, c->type, c->op,
                      comms[r], streams[r]);
  ok = ncclGroupEnd() == ncclSuccess && sync_all();
  for (int r = 0; r < nranks && ok; r++)
    ok = compare("reducescatter", c, r, inplace ? (char *)dsend[r] + (size_t)r * cur_n * es : drecv[r], cur_n,
                 want_reducescatter);
  result(ok, "reducescatter", c, n, inplace);
  if (inplace) return;
  /* a ring of sends */
  fill_inputs(c, n);
  ncclGroupStart();
  for (int r = 0; r < nranks; r++) {
    ncclSend(dsend[r], n, c->type, (r + 1) % nranks, comms[r], streams[r]);
    ncclRecv(drecv[r], n, c->type, (r + nranks - 1) % nranks, comms[r], streams[r]);
  }
  ok = ncclGroupEnd() == ncclSuccess && sync_all();
  for (int r = 0; r < nranks && ok; r++) ok = compare("send/recv ring", c, r, drecv[r], n, want_ring);
  result(ok, "send/recv ring", c, n, 0);
  /* all-to-all of n / nranks per pair */
  fill_inputs(c, n);
  ncclGroupStart();
  for (int r = 0; r < nranks; r++) ncclAlltoAll(dsend[r], drecv[r], cur_n, c->type, comms[r], streams[r]);
  ok = ncclGroupEnd() == ncclSuccess && sync_all();
  for (int r = 0; r < nranks && ok; r++) ok = compare("alltoall", c, r, drecv[r], cur_n * nranks, want_alltoall);
  result(ok, "alltoall", c, n, 0);
}

/* Fills n elements of h with f(i), which repeats every 11 elements: one period by hand, then doubling copies
 * (storing 2^28 elements one by one took most of a 1 GiB case's time). */
static void fill_periodic(const struct tcase *c, void *h, size_t n, int r,
                          double (*f)(const struct tcase *, int, size_t)) {
  size_t es = esize(c->type), period = 11 * 64;
  for (size_t i = 0; i < period && i < n; i++) store(c->type, h, i, f(c, r, i));
  for (size_t done = period; done < n; done *= 2)
    memcpy((char *)h + done * es, h, (n - done < done ? n - done : done) * es);
}
static double input_of(const struct tcase *c, int r, size_t i) { (void)c; return input(r, i); }

/* An all-reduce of n elements per rank, out of place and in place, timed (rank 0's stream, the first call); every
 * byte of every rank's output compared with the exact sum (small integers: exact in float32 and bf16). */
static void big_allreduce(const struct tcase *c, size_t n) {
  size_t bytes = n * esize(c->type);
  char *h = malloc(bytes), *want = malloc(bytes);
  if (!h || !want) {
    printf("FAIL: out of host memory for the 1 GiB case\n");
    exit(1);
  }
  fill_periodic(c, want, n, 0, want_allreduce);
  for (int inplace = 0; inplace < 2; inplace++) {
    for (int r = 0; r < nranks; r++) {
      fill_periodic(c, h, n, r, input_of);
      CUDA_OK(cudaMemcpy(dsend[r], h, bytes, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemset(drecv[r], 0xee, bytes));
    }
    CUDA_OK(cudaDeviceSynchronize());
    cudaEvent_t t0, t1;
    CUDA_OK(cudaEventCreate(&t0));
    CUDA_OK(cudaEventCreate(&t1));
    CUDA_OK(cudaEventRecord(t0, streams[0]));
    ncclGroupStart();
    for (int r = 0; r < nranks; r++)
      ncclAllReduce(dsend[r], inplace ? dsend[r] : drecv[r], n, c->type, c->op, comms[r], streams[r]);
    int ok = ncclGroupEnd() == ncclSuccess && sync_all();
    CUDA_OK(cudaEventRecord(t1, streams[0]));
    CUDA_OK(cudaEventSynchronize(t1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
    for (int r = 0; r < nranks && ok; r++) {
      CUDA_OK(cudaMemcpy(h, inplace ? dsend[r] : drecv[r], bytes, cudaMemcpyDeviceToHost));
      ok = memcmp(h, want, bytes) == 0;
      if (!ok) printf("  rank %d's output differs from the exact sum\n", r);
    }
    printf("%s: allreduce %s of %zu MiB per rank %s: %.1f ms (rank 0's stream, first call)\n", ok ? "PASS" : "FAIL",
           c->name, bytes >> 20, inplace ? "in place" : "out of place", ms);
    result(ok, "allreduce", c, n, inplace);
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
  }
  free(h);
  free(want);
}

/* Rank r premultiplies its input by scale(r, call): halves and quarters, exact in float32. */
static double scale(int r, int call) { return (r + 1) * 0.5 / (call + 1); }
static int premul_call;
static double want_premul(const struct tcase *c, int r, size_t i) {
  (void)c, (void)r;
  double acc = 0;
  for (int k = 0; k < nranks; k++) acc += input(k, i) * scale(k, premul_call);
  return acc;
}

/* All-reduce with a premultiplying sum: the scalar on the host, or in GPU memory (ncclScalarDevice) that this test
 * changes between calls; each operator is destroyed right after its call, before the kernel has run. A GPU-memory
 * scalar with host buffers is refused. */
static void premul_cases(void) {
  const struct tcase c = {ncclFloat32, ncclSum, "float32 premulsum"};
  float *dscale[MAX_RANKS];
  for (int r = 0; r < nranks; r++) CUDA_OK(cudaMalloc((void **)&dscale[r], sizeof(float)));
  const size_t sizes[] = {1, 200, 1000, 1048579}; /* LL one-shot, bulk one-shot, ring */
  for (int device = 0; device < 2; device++)
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
      for (premul_call = 0; premul_call < 2; premul_call++) {
        size_t n = sizes[s];
        fill_inputs(&c, n);
        int ok = 1;
        ncclGroupStart();
        for (int r = 0; r < nranks; r++) {
          float v = (float)scale(r, premul_call);
          ncclRedOp_t op;
          /* On the rank's stream, before its call: a plain cudaMemcpy from pageable memory may still be on its way
           * (on the legacy stream) when a kernel on a non-blocking stream reads the scalar. */
          if (device) CUDA_OK(cudaMemcpyAsync(dscale[r], &v, sizeof v, cudaMemcpyHostToDevice, streams[r]));
          ok &= ncclRedOpCreatePreMulSum(&op, device ? (void *)dscale[r] : (void *)&v, ncclFloat32,
                                         device ? ncclScalarDevice : ncclScalarHostImmediate, comms[r]) == ncclSuccess;
          ok &= ncclAllReduce(dsend[r], drecv[r], n, ncclFloat32, op, comms[r], streams[r]) == ncclSuccess;
          ok &= ncclRedOpDestroy(op, comms[r]) == ncclSuccess;
        }
        ok = (ncclGroupEnd() == ncclSuccess) & ok && sync_all();
        for (int r = 0; r < nranks && ok; r++) ok = compare("allreduce", &c, r, drecv[r], n, want_premul);
        result(ok, device ? "allreduce, scalar in GPU memory" : "allreduce, host scalar", &c, n, 0);
      }
  /* Host buffers cannot take a scalar only a kernel reads. */
  float hin[4] = {1, 2, 3, 4}, hout[4];
  ncclRedOp_t op;
  int ok = ncclRedOpCreatePreMulSum(&op, dscale[0], ncclFloat32, ncclScalarDevice, comms[0]) == ncclSuccess;
  ncclResult_t res = ncclAllReduce(hin, hout, 4, ncclFloat32, op, comms[0], streams[0]);
  ok = ok && res == ncclInvalidUsage && strstr(ncclGetLastError(comms[0]), "GPU memory");
  printf("%s: a GPU-memory scalar with host buffers is refused: %s\n", ok ? "PASS" : "FAIL", ncclGetLastError(comms[0]));
  if (ok) n_passed++; else n_failed++;
  ncclRedOpDestroy(op, comms[0]);
  for (int r = 0; r < nranks; r++) CUDA_OK(cudaFree(dscale[r]));
}

/* A call in which rank 0 differs from the others: the kernels compare the calls' fingerprints (in the slots'
 * headers, or on the direct all-reduce's boards) and every rank reports a failure, at least one naming both calls. */
enum mismatch { MISMATCH_COUNT, MISMATCH_TYPE, MISMATCH_OP };
static void device_mismatch_case(enum mismatch what, size_t n, const char *want0, const char *want1) {
  if (nranks < 2) return;
  ncclComm_t c[MAX_RANKS];
  int devs[MAX_RANKS] = {0};
  if (ncclCommInitAll(c, nranks, devs) != ncclSuccess) {
    printf("FAIL: ncclCommInitAll for the mismatch case: %s\n", ncclGetLastError(NULL));
    n_failed++;
    return;
  }
  ncclGroupStart();
  for (int r = 0; r < nranks; r++) {
    int odd = r == 0;
    size_t count = what == MISMATCH_COUNT && odd ? n / 2 : n;
    ncclDataType_t type = what == MISMATCH_TYPE && odd ? ncclInt32 : ncclFloat32;
    ncclRedOp_t op = what == MISMATCH_OP && odd ? ncclMax : ncclSum;
    ncclAllReduce(dsend[r], drecv[r], count, type, op, c[r], streams[r]);
  }
  int ok = ncclGroupEnd() == ncclSuccess, named = 0;
  for (int r = 0; r < nranks; r++) ok &= cudaStreamSynchronize(streams[r]) == cudaSuccess;
  for (int r = 0; r < nranks; r++) {
    ncclResult_t e = ncclSuccess;
    ncclCommGetAsyncError(c[r], &e);
    const char *text = ncclGetLastError(c[r]);
    if (e == ncclInvalidUsage && strstr(text, "mismatched calls") && strstr(text, want0) && strstr(text, want1)) {
      if (!named++) printf("  rank %d: %s\n", r, text);
    } else if (e == ncclSuccess) {
      ok = 0;
      printf("  rank %d: no error after a mismatched call\n", r);
    }
  }
  ok = ok && named > 0;
  printf("%s: a device call of %s against %s is named (%d of %d ranks)\n", ok ? "PASS" : "FAIL", want0, want1, named,
         nranks);
  if (ok) n_passed++; else n_failed++;
  for (int r = 0; r < nranks; r++) ncclCommAbort(c[r]);
}

/* Mismatches no fingerprint shows. PATH_KIND and PATH_COUNT: rank 0 in a FIFO algorithm (below
 * DCCL_DIRECT_MIN_BYTES), the others in the direct one, so nothing they exchange carries the other's call: rank 0
 * broadcasts from root 1 (so it waits to receive) where the others all-reduce, or all-reduces fewer elements
 * (one-shot). PATH_ROOT: a ring broadcast (below the minimum) whose rank 0 names root 1 and the others root 0, so
 * every rank waits to receive. Every rank must fail with ncclInvalidUsage naming both calls, found by the stall
 * report, and its kernels must stop, within 2.5 s. */
enum path_mismatch { PATH_KIND, PATH_COUNT, PATH_ROOT };
static void path_mismatch_case(enum path_mismatch what, const char *want0, const char *want1) {
  if (nranks < 2) return;
  ncclComm_t c[MAX_RANKS];
  int devs[MAX_RANKS] = {0};
  if (ncclCommInitAll(c, nranks, devs) != ncclSuccess) {
    printf("FAIL: ncclCommInitAll for the path mismatch case: %s\n", ncclGetLastError(NULL));
    n_failed++;
    return;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ncclGroupStart();
  for (int r = 0; r < nranks; r++) {
    if (what == PATH_ROOT || (r == 0 && what == PATH_KIND))
      ncclBroadcast(dsend[r], drecv[r], 1024, ncclFloat32, r == 0 ? 1 : 0, c[r], streams[r]);
    else
      ncclAllReduce(dsend[r], drecv[r], r == 0 ? 1024 : 4096, ncclFloat32, ncclSum, c[r], streams[r]);
  }
  int ok = ncclGroupEnd() == ncclSuccess, done = 0;
  double s = 0;
  while (ok && !done && s < 10) { /* no cudaStreamSynchronize: a hang must fail the test, not block it */
    done = 1;
    for (int r = 0; r < nranks; r++) done &= cudaStreamQuery(streams[r]) != cudaErrorNotReady;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    usleep(1000);
  }
  int named = 0;
  for (int r = 0; r < nranks; r++) {
    ncclResult_t e = ncclSuccess;
    ncclCommGetAsyncError(c[r], &e);
    const char *text = ncclGetLastError(c[r]);
    int good = e == ncclInvalidUsage && strstr(text, "found by the stall report") && strstr(text, want0) &&
               strstr(text, want1);
    named += good;
    if (!good || r == 0) printf("  rank %d: error %d: %s\n", r, (int)e, text);
  }
  ok = ok && done && s < 2.5 && named == nranks;
  printf("%s: rank 0 in %s, the others in %s (%s): %d of %d ranks name both, kernels ended after %.2f s%s\n",
         ok ? "PASS" : "FAIL", want0, want1, what == PATH_ROOT ? "every rank waits to receive" : "FIFO against direct",
         named, nranks, s, done ? "" : " (still running)");
  if (ok) n_passed++; else n_failed++;
  for (int r = 0; r < nranks; r++) ncclCommAbort(c[r]);
}

/* DCCL_DETERMINISTIC=1 (the `deterministic` argument): a float32 sum of values whose sum depends on the order,
 * in place and out of place, and a float32 average; every rank's output must have the bits of the sum in rank
 * order 0..N-1 in float (what the host paths compute), whatever channels carry it. Then the same for reduce-scatter
 * and reduce (root 1), sum and average. */
static float det_input(int r, size_t i) { return (float)((i * 7919u + (size_t)r * 104729u) % 100003u) / 7.0f + 1e-3f * r; }

/* Element i of the rank-order reduction of every rank's det_input (an average: each input times the float 1/N). */
static float det_want(size_t i, int average) {
  float inv = 1.0f / (float)nranks, acc = 0;
  for (int r = 0; r < nranks; r++) {
    float x = average ? det_input(r, i) * inv : det_input(r, i);
    acc = r == 0 ? x : acc + x;
  }
  return acc;
}

/* Reduce-scatter (blocks of `block`) and reduce to rank 1 of nranks x block elements: the rank-order bits. */
static void deterministic_blocks(size_t block, int average) {
  size_t n = (size_t)nranks * block;
  float *h = malloc(n * sizeof(float));
  for (int r = 0; r < nranks; r++) {
    for (size_t i = 0; i < n; i++) h[i] = det_input(r, i);
    CUDA_OK(cudaMemcpy(dsend[r], h, n * sizeof(float), cudaMemcpyHostToDevice));
  }
  ncclRedOp_t op = average ? ncclAvg : ncclSum;
  for (int kind = 0; kind < 2; kind++) { /* reduce-scatter, reduce */
    const int root = 1 % nranks;
    ncclGroupStart();
    for (int r = 0; r < nranks; r++)
      if (kind == 0) ncclReduceScatter(dsend[r], drecv[r], block, ncclFloat32, op, comms[r], streams[r]);
      else ncclReduce(dsend[r], drecv[r], n, ncclFloat32, op, root, comms[r], streams[r]);
    int ok = ncclGroupEnd() == ncclSuccess && sync_all();
    size_t bad = 0;
    for (int r = 0; r < nranks && ok; r++) {
      if (kind == 1 && r != root) continue;
      size_t len = kind == 0 ? block : n, first = kind == 0 ? (size_t)r * block : 0;
      CUDA_OK(cudaMemcpy(h, drecv[r], len * sizeof(float), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < len; i++) {
        float w = det_want(first + i, average);
        if (memcmp(&h[i], &w, sizeof(float)) && bad++ < 3)
          printf("  rank %d element %zu: %.9g, rank-order result %.9g\n", r, first + i, h[i], w);
      }
    }
    ok = ok && bad == 0;
    printf("%s: deterministic float32 %s %s of %zu elements per rank has the rank-order bits\n", ok ? "PASS" : "FAIL",
           kind == 0 ? "reduce-scatter" : "reduce", average ? "average" : "sum", kind == 0 ? block : n);
    if (ok) n_passed++; else n_failed++;
  }
  free(h);
}
static void deterministic_cases(void) {
  size_t sizes[] = {1, 1000, 1048579};
  for (size_t k = 0; k < 3; k++) {
    size_t n = sizes[k];
    for (int variant = 0; variant < 3; variant++) { /* out of place, in place, average */
      float *h = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
      for (int r = 0; r < nranks; r++) {
        for (size_t i = 0; i < n; i++) h[i] = det_input(r, i);
        CUDA_OK(cudaMemcpy(dsend[r], h, n * sizeof(float), cudaMemcpyHostToDevice));
      }
      for (size_t i = 0; i < n; i++) want[i] = det_want(i, variant == 2);
      ncclGroupStart();
      for (int r = 0; r < nranks; r++)
        ncclAllReduce(dsend[r], variant == 1 ? dsend[r] : drecv[r], n, ncclFloat32, variant == 2 ? ncclAvg : ncclSum,
                      comms[r], streams[r]);
      int ok = ncclGroupEnd() == ncclSuccess && sync_all();
      size_t bad = 0;
      for (int r = 0; r < nranks && ok; r++) {
        CUDA_OK(cudaMemcpy(h, variant == 1 ? dsend[r] : drecv[r], n * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++)
          if (memcmp(&h[i], &want[i], sizeof(float)) && bad++ < 3)
            printf("  rank %d element %zu: %.9g, rank-order sum %.9g\n", r, i, h[i], want[i]);
      }
      ok = ok && bad == 0;
      printf("%s: deterministic float32 %s of %zu elements has the rank-order bits on every rank\n",
             ok ? "PASS" : "FAIL", variant == 0 ? "sum" : variant == 1 ? "sum in place" : "average", n);
      if (ok) n_passed++; else n_failed++;
      free(h);
      free(want);
    }
  }
  const size_t blocks[] = {1, 1000, 1048576 / MAX_RANKS};
  for (size_t k = 0; k < sizeof(blocks) / sizeof(blocks[0]); k++)
    for (int average = 0; average < 2; average++) deterministic_blocks(blocks[k], average);
}

/* Waits, polling as fast as PyTorch's nonblocking mode may, until comm is no longer in progress. */
static ncclResult_t settle(ncclComm_t comm, long *polls) {
  ncclResult_t state = ncclInProgress;
  for (long i = 0; i < 200000000L && state == ncclInProgress; i++, (*polls)++)
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
  return state;
}

/* Every rank's all-reduce on one stream (rank 0's) in one group. Their kernels launched apart would run one after
 * the other, the first waiting for the second: a small one shares one launch and must give the sum; a large one
 * (more tasks than one launch holds) must give it too or be refused at the call with a reason naming the stream
 * (under DCCL_ALGO=ring it must be refused), and never hang. */
static void one_stream_case(void) {
  if (nranks < 2) return;
  const struct tcase c = {ncclFloat32, ncclSum, "float32 sum"};
  const size_t sizes[] = {1000, 1048579};
  for (int k = 0; k < 2; k++) {
    size_t n = sizes[k];
    fill_inputs(&c, n);
    ncclGroupStart();
    for (int r = 0; r < nranks; r++) ncclAllReduce(dsend[r], drecv[r], n, ncclFloat32, ncclSum, comms[r], streams[0]);
    ncclResult_t res = ncclGroupEnd();
    char text[512];
    snprintf(text, sizeof(text), "%s", res == ncclSuccess ? "" : ncclGetLastError(NULL));
    int done = 0;
    for (int polls = 0; !done && polls < 10000; polls++) { /* 10 s: a hang fails the case instead of blocking it */
      done = cudaStreamQuery(streams[0]) != cudaErrorNotReady;
      if (!done) usleep(1000);
    }
    int ok = done;
    const char *algo = getenv("DCCL_ALGO"); /* the ring's 4 MiB, 32 channels a rank, cannot share one launch */
    if (res == ncclSuccess) {
      ok = ok && !(k == 1 && algo && !strcmp(algo, "ring")) && sync_all();
      for (int r = 0; r < nranks && ok; r++) ok = compare("one-stream all-reduce", &c, r, drecv[r], n, want_allreduce);
    } else {
      ok = ok && k == 1 && res == ncclInvalidUsage && strstr(text, "one stream") != NULL;
    }
    printf("%s: %d ranks' all-reduce of %zu floats on one stream in one group: %s%s%s\n", ok ? "PASS" : "FAIL",
           nranks, n, res == ncclSuccess ? "summed" : "refused: ", text, done ? "" : " (still running after 10 s)");
    if (ok) n_passed++; else n_failed++;
  }
}

/* Nonblocking communicators with a GPU (what TORCH_NCCL_USE_COMM_NONBLOCKING=1 makes): the creation's state is
 * polled without pause while its thread builds the device side, then a device all-reduce runs on them. */
static void nonblocking_case(void) {
  ncclUniqueId id;
  ncclComm_t c[MAX_RANKS] = {0};
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  const struct tcase sum = {ncclFloat32, ncclSum, "float32 sum"};
  size_t n = 1000;
  long polls = 0;
  int ok = ncclGetUniqueId(&id) == ncclSuccess;
  ncclGroupStart();
  for (int r = 0; r < nranks; r++) ok &= ncclCommInitRankConfig(&c[r], nranks, id, r, &cfg) != ncclInternalError;
  ncclResult_t g = ncclGroupEnd();
  ok &= g == ncclSuccess || g == ncclInProgress;
  for (int r = 0; ok && r < nranks; r++) ok &= settle(c[r], &polls) == ncclSuccess;
  if (ok) {
    fill_inputs(&sum, n);
    ncclGroupStart();
    for (int r = 0; r < nranks; r++) ncclAllReduce(dsend[r], drecv[r], n, ncclFloat32, ncclSum, c[r], streams[r]);
    g = ncclGroupEnd();
    ok &= g == ncclSuccess || g == ncclInProgress;
    for (int r = 0; ok && r < nranks; r++) ok &= settle(c[r], &polls) == ncclSuccess;
    for (int r = 0; ok && r < nranks; r++) ok &= cudaStreamSynchronize(streams[r]) == cudaSuccess;
    for (int r = 0; ok && r < nranks; r++) ok &= compare("nonblocking allreduce", &sum, r, drecv[r], n, want_allreduce);
  }
  printf("%s: nonblocking communicators: creation polled %ld times, then a device all-reduce (%s)\n",
         ok ? "PASS" : "FAIL", polls, ok ? "ok" : ncclGetLastError(NULL));
  if (ok) n_passed++; else n_failed++;
  for (int r = 0; r < nranks; r++) ncclCommDestroy(c[r]);
}

/* ncclCommRevoke with a kernel waiting: rank 0 receives from rank 1, which never sends, so its kernel spins; every
 * rank revokes; the kernel must exit, ncclCommGetAsyncError settle on ncclSuccess within 5 s, the stream
 * synchronise, and a call on the revoked communicator be refused. */
static void revoke_case(void) {
  const size_t n = 1024;
  if (nranks < 2) return;
  /* A matched pair first: a link's first use waits on the host for its peer, which the lone receive must not. */
  int ok = ncclGroupStart() == ncclSuccess;
  ok = ok && ncclSend(dsend[1], n, ncclFloat32, 0, comms[1], streams[1]) == ncclSuccess;
  ok = ok && ncclRecv(drecv[0], n, ncclFloat32, 1, comms[0], streams[0]) == ncclSuccess;
  ok = (ncclGroupEnd() == ncclSuccess) & ok && sync_all();
  ok = ok && ncclRecv(drecv[0], n, ncclFloat32, 1, comms[0], streams[0]) == ncclSuccess;
  usleep(200000);
  ok = ok && cudaStreamQuery(streams[0]) == cudaErrorNotReady; /* the receive waits */
  for (int r = 0; r < nranks && ok; r++) ok = ncclCommRevoke(comms[r], NCCL_REVOKE_DEFAULT) == ncclSuccess;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  double took = 0;
  for (int r = 0; r < nranks && ok; r++) {
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress && took < 5.0) {
      ok = ncclCommGetAsyncError(comms[r], &state) == ncclSuccess;
      clock_gettime(CLOCK_MONOTONIC, &t1);
      took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    }
    ok = ok && state == ncclSuccess;
  }
  ok = ok && cudaStreamSynchronize(streams[0]) == cudaSuccess;
  ok = ok && ncclAllReduce(dsend[0], drecv[0], n, ncclFloat32, ncclSum, comms[0], streams[0]) == ncclInvalidUsage;
  printf("%s: revoked with a receive's kernel waiting: settled in %.3f s, then calls refused (%s)\n",
         ok ? "PASS" : "FAIL", took, ncclGetLastError(comms[0]));
  if (ok) n_passed++; else n_failed++;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1) nranks = atoi(argv[1]);
  int memalloc = argc > 2 && !strcmp(argv[2], "memalloc"); /* buffers from ncclMemAlloc instead of cudaMalloc */
  int big = argc > 2 && !strcmp(argv[2], "big");
  int deterministic = argc > 2 && !strcmp(argv[2], "deterministic"); /* run with DCCL_DETERMINISTIC=1 */
  int path_mismatch = argc > 2 && !strcmp(argv[2], "path_mismatch");
  int premul_only = argc > 2 && !strcmp(argv[2], "premul"); /* only the premulsum cases (to chase one alone) */
  int root_mismatch = argc > 2 && !strcmp(argv[2], "root_mismatch"); /* path_mismatch's broadcast alone */
  int revoke = argc > 2 && !strcmp(argv[2], "revoke");
  int one_stream = argc > 2 && !strcmp(argv[2], "one_stream");
  const char *transport = getenv("DCCL_TRANSPORT");
  int staged = transport && (!strcmp(transport, "shm") || !strcmp(transport, "staged"));
  if (nranks < 1 || nranks > MAX_RANKS) return 2;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("SKIP: no usable GPU\n");
    return 77;
  }
  alarm(300);
  CUDA_OK(cudaSetDevice(0));
  int devs[MAX_RANKS] = {0};
  if (ncclCommInitAll(comms, nranks, devs) != ncclSuccess) {
    printf("FAIL: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  /* Every rank's device memory is counted and stays under DCCL_DEV_MEM_LIMIT (64 MiB unless set). */
  const char *limit_env = getenv("DCCL_DEV_MEM_LIMIT");
  size_t limit = limit_env ? strtoull(limit_env, NULL, 0) : (size_t)64 << 20;
  for (int r = 0; r < nranks; r++) {
    size_t dev_bytes = 0, pinned = 0;
    ncclResult_t res = dcclCommMemoryUsage(comms[r], &dev_bytes, &pinned);
    int ok = res == ncclSuccess && dev_bytes > 0 && dev_bytes <= limit + ((size_t)1 << 20) && pinned > 0;
    /* DCCL_TRANSPORT=shm stages device links through host memory: their FIFOs are pinned host memory, not GPU's. */
    if (staged && nranks > 1) ok = ok && dev_bytes < ((size_t)1 << 20) && pinned > ((size_t)1 << 20);
    printf("%s: rank %d holds %zu bytes of GPU memory, %zu of pinned host memory (limit %zu%s)\n", ok ? "PASS" : "FAIL",
           r, dev_bytes, pinned, limit, staged ? ", staged: FIFOs in host memory" : "");
    if (ok)
      n_passed++;
    else
      n_failed++;
  }
  size_t max_n = 1048579;
  cap_bytes = big ? ((size_t)1 << 30) + 64 : max_n * 4 + 64;
  for (int r = 0; r < nranks; r++) {
    CUDA_OK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    if (memalloc) {
      if (ncclMemAlloc((void **)&dsend[r], cap_bytes) != ncclSuccess ||
          ncclMemAlloc((void **)&drecv[r], cap_bytes) != ncclSuccess) {
        printf("FAIL: ncclMemAlloc: %s\n", ncclGetLastError(NULL));
        return 1;
      }
    } else {
      CUDA_OK(cudaMalloc(&dsend[r], cap_bytes));
      CUDA_OK(cudaMalloc(&drecv[r], cap_bytes));
    }
  }
  const struct tcase cases[] = {{ncclFloat32, ncclSum, "float32 sum"},
                                {ncclInt32, ncclMax, "int32 max"},
                                {ncclBfloat16, ncclSum, "bf16 sum"},
                                {ncclFloat32, ncclAvg, "float32 avg"}};
  const size_t sizes[] = {0, 1, 7, 1000, 1048579};
  if (deterministic) {
    deterministic_cases();
  } else if (path_mismatch) {
    path_mismatch_case(PATH_KIND, "ncclBroadcast", "ncclAllReduce");
    path_mismatch_case(PATH_COUNT, "1024 x float32 sum", "4096 x float32 sum");
    path_mismatch_case(PATH_ROOT, "1024 x float32, root 1", "1024 x float32, root 0");
    run_case(&cases[0], 4096, 0); /* the first communicators still work */
  } else if (premul_only) {
    premul_cases();
  } else if (root_mismatch) {
    path_mismatch_case(PATH_ROOT, "1024 x float32, root 1", "1024 x float32, root 0");
  } else if (revoke) {
    revoke_case();
  } else if (one_stream) {
    one_stream_case();
  } else if (big) {
    for (size_t k = 0; k < 3; k += 2) /* float32 sum, bf16 sum */
      big_allreduce(&cases[k], ((size_t)1 << 30) / esize(cases[k].type));
  } else {
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
      for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
        for (int inplace = 0; inplace < 2; inplace++) run_case(&cases[k], sizes[s], inplace);
    premul_cases();
    device_mismatch_case(MISMATCH_COUNT, 256, "128 x float32 sum", "256 x float32 sum");     /* small */
    device_mismatch_case(MISMATCH_COUNT, 8192, "4096 x float32 sum", "8192 x float32 sum");  /* larger */
    device_mismatch_case(MISMATCH_TYPE, 4096, "4096 x int32 sum", "4096 x float32 sum");
    device_mismatch_case(MISMATCH_OP, 4096, "4096 x float32 max", "4096 x float32 sum");
    nonblocking_case();
  }
  for (int r = 0; r < nranks; r++) {
    ncclCommDestroy(comms[r]);
    if (memalloc) {
      if (ncclMemFree(dsend[r]) != ncclSuccess || ncclMemFree(drecv[r]) != ncclSuccess) {
        printf("FAIL: ncclMemFree: %s\n", ncclGetLastError(NULL));
        n_failed++;
      }
    } else {
      cudaFree(dsend[r]);
      cudaFree(drecv[r]);
    }
    cudaStreamDestroy(streams[r]);
  }
  printf("gpu_colls (%d ranks, DCCL_ALGO=%s%s%s): %d passed, %d failed\n", nranks,
         getenv("DCCL_ALGO") ? getenv("DCCL_ALGO") : "", staged ? ", staged" : "",
         memalloc ? ", ncclMemAlloc buffers" : big ? ", 1 GiB" : deterministic ? ", deterministic" : "",
         n_passed, n_failed);
  return n_failed ? 1 : 0;
}
