/* Windows between processes on one GPU (ncclCommWindowRegister, src/core/comm_window.c): rank processes forked by
 * the parent before anyone touches CUDA register their buffers as windows and all-reduce from them in place (the
 * direct all-reduce, each rank reading the other processes' inputs through its mappings). Memory of both kinds:
 * cudaMalloc (legacy IPC handles) and ncclMemAlloc (cuMem, its file descriptor passed over a Unix socket). Buffers
 * sit at offsets inside their allocations, in two windows (send, receive) or one (in place). Checked, for each
 * kind: float32 sums of 2, 1001 and 4M elements (the rank-order sum's exact bits), bf16 and average, in place,
 * buffers outside windows (the FIFO algorithms), a deregistered window's slot reused, a CUDA graph of a window
 * all-reduce replayed with new inputs, reduce-scatter, all-gather, broadcast and reduce (direct, as by default
 * since 2026-12-02; DCCL_ALGO=ring would take the rings). `deterministic` (DCCL_DETERMINISTIC=1): the window call
 * (the direct all-reduce; the test's trace expectation says so) and a call on buffers outside windows (the one-shot
 * schedule in kernels over the device links, since 2026-12-05) both give the rank-order sum's exact bits.
 * `lazy` (DCCL_LAZY_MAP_BYTES=0): windows and buffers mapped on first use over the same allocations, either first,
 * each mapping kept while the other is let go (cudaMalloc: one legacy IPC open per allocation per process;
 * ncclMemAlloc: the allocation's descriptor passed at the meeting, mapped once for each).
 * Usage: gpu_windows NRANKS cudamalloc|memalloc [deterministic|lazy]  (under tests/cuda/with_mps.sh)
 * Exit codes: 0 all passed, 1 a failure, 77 no usable GPU. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ok.h"
#include "dccl.h"
#include "fault_harness.h"

#define MAX_RANKS 8
#define BIG ((size_t)4 << 20) /* elements */

struct shared {
  ncclUniqueId id;
  int nranks, memalloc, deterministic, lazy;
};

static void *dev_alloc(int memalloc, size_t bytes) {
  void *p = NULL;
  if (memalloc) {
    if (ncclMemAlloc(&p, bytes) != ncclSuccess) FH_FAIL("ncclMemAlloc: %s", ncclGetLastError(NULL));
  } else {
    CUDA_OK(cudaMalloc(&p, bytes));
  }
  return p;
}
static void dev_free(int memalloc, void *p) {
  if (memalloc) ncclMemFree(p); else cudaFree(p);
}

/* Rank r's input at i: small integers (exact in any order), or values whose float sum depends on the order. */
static float value(int r, size_t i, int tricky) {
  if (!tricky) return (float)((i * 7 + (size_t)r * 13) % 97) - 40.0f;
  static const float big[4] = {1.0e8f, -1.0e8f, 3.0f, 0.25f};
  return big[(r + i) % 4] * (1.0f + (float)(i % 5) * 0.1f) + (float)r * 0.5f;
}

/* Fills this rank's input on the device and checks the output against the rank-order float sum (exact bits). */
static int run_float(ncclComm_t comm, int rank, int nranks, float *send, float *recv, size_t n, int tricky,
                     ncclRedOp_t op, cudaStream_t s, const char *what) {
  float *host = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) host[i] = value(rank, i, tricky);
  CUDA_OK(cudaMemcpyAsync(send, host, n * sizeof(float), cudaMemcpyHostToDevice, s)); /* ordered before the call */
  ncclResult_t res = ncclAllReduce(send, recv, n, ncclFloat, op, comm, s);
  int bad = 0;
  if (res != ncclSuccess) {
    FH_FAIL("rank %d %s: ncclAllReduce: %s", rank, what, ncclGetLastError(comm));
    bad = 1;
  } else {
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(host, recv, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n && bad < 3; i++) {
      /* An average of floats is NCCL's: each input times the float reciprocal of nranks, then the sum. */
      float inv = 1.0f / (float)nranks, want = 0;
      for (int r = 0; r < nranks; r++) {
        float x = op == ncclAvg ? value(r, i, tricky) * inv : value(r, i, tricky);
        want = r == 0 ? x : want + x;
      }
      if (memcmp(&want, &host[i], sizeof(float)))
        FH_FAIL("rank %d %s: element %zu is %.9g, want %.9g", rank, what, i, host[i], want), bad++;
    }
  }
  free(host);
  return bad == 0;
}

/* bf16 is a float's top half: exact for the small integers used here. */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

static int run_bf16(ncclComm_t comm, int rank, int nranks, void *send, void *recv, size_t n, cudaStream_t s) {
  uint16_t *host = malloc(n * sizeof(*host));
  for (size_t i = 0; i < n; i++) host[i] = to_bf16((float)((i + (size_t)rank) % 9));
  CUDA_OK(cudaMemcpyAsync(send, host, n * sizeof(*host), cudaMemcpyHostToDevice, s));
  int ok = ncclAllReduce(send, recv, n, ncclBfloat16, ncclSum, comm, s) == ncclSuccess;
  FH_EXPECT(ok, "rank %d bf16: %s", rank, ncclGetLastError(comm));
  if (ok) {
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(host, recv, n * sizeof(*host), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n && ok; i++) {
      float want = 0;
      for (int r = 0; r < nranks; r++) want += (float)((i + (size_t)r) % 9);
      ok = from_bf16(host[i]) == want;
      FH_EXPECT(ok, "rank %d bf16: element %zu is %g, want %g", rank, i, from_bf16(host[i]), want);
    }
  }
  free(host);
  return ok;
}

/* A graph of one window all-reduce, replayed three times with new inputs written before each replay. */
static void run_graph(ncclComm_t comm, int rank, int nranks, float *send, float *recv, size_t n, cudaStream_t s) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  ncclResult_t res = ncclAllReduce(send, recv, n, ncclFloat, ncclSum, comm, s);
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  FH_EXPECT(res == ncclSuccess, "rank %d: captured all-reduce: %s", rank, ncclGetLastError(comm));
  if (res != ncclSuccess) return;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  float *host = malloc(n * sizeof(float));
  for (int round = 0; round < 3; round++) {
    for (size_t i = 0; i < n; i++) host[i] = (float)(rank * 100 + round * 10) + (float)(i % 7);
    CUDA_OK(cudaMemcpyAsync(send, host, n * sizeof(float), cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaMemcpyAsync(host, recv, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    for (size_t i = 0; i < n; i++) {
      float want = 0;
      for (int r = 0; r < nranks; r++) want += (float)(r * 100 + round * 10) + (float)(i % 7);
      if (host[i] != want) {
        FH_FAIL("rank %d: graph replay %d: element %zu is %g, want %g", rank, round, i, host[i], want);
        break;
      }
    }
  }
  free(host);
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
}

static ncclComm_t init(const struct shared *sh, int rank) {
  ncclComm_t comm = NULL;
  if (ncclCommInitRank(&comm, sh->nranks, sh->id, rank) != ncclSuccess) {
    FH_FAIL("rank %d: ncclCommInitRank: %s", rank, ncclGetLastError(NULL));
    return NULL;
  }
  return comm;
}

/* Reduce-scatter, all-gather, broadcast and reduce from windows (the direct algorithms unless DCCL_ALGO names
 * another), n elements per rank block, small integers: exact in any order. */
static void run_others(ncclComm_t comm, int rank, int nranks, float *send, float *recv, size_t n, cudaStream_t s) {
  size_t total = n * (size_t)nranks;
  float *host = malloc(total * sizeof(float));
  for (int which = 0; which < 4; which++) {
    static const char *names[4] = {"reduce-scatter", "all-gather", "broadcast from rank 1", "reduce to the last rank"};
    int root = which == 2 ? 1 % nranks : nranks - 1;
    size_t in = which == 0 ? total : n, out = which == 1 ? total : n;
    for (size_t i = 0; i < in; i++) host[i] = value(rank, i, 0);
    CUDA_OK(cudaMemcpyAsync(send, host, in * sizeof(float), cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaMemsetAsync(recv, 0xff, out * sizeof(float), s));
    ncclResult_t res = which == 0   ? ncclReduceScatter(send, recv, n, ncclFloat, ncclSum, comm, s)
                       : which == 1 ? ncclAllGather(send, recv, n, ncclFloat, comm, s)
                       : which == 2 ? ncclBroadcast(send, recv, n, ncclFloat, root, comm, s)
                                    : ncclReduce(send, recv, n, ncclFloat, ncclSum, root, comm, s);
    FH_EXPECT(res == ncclSuccess, "rank %d %s: %s", rank, names[which], ncclGetLastError(comm));
    if (res != ncclSuccess) continue;
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(host, recv, out * sizeof(float), cudaMemcpyDeviceToHost));
    if (which == 3 && rank != root) continue; /* only the root's output is defined */
    for (size_t i = 0; i < out; i++) {
      float want = 0;
      if (which == 0 || which == 3)
        for (int r = 0; r < nranks; r++) want += value(r, (which == 0 ? (size_t)rank * n : 0) + i, 0);
      else if (which == 1)
        want = value((int)(i / n), i % n, 0);
      else
        want = value(root, i, 0);
      if (host[i] != want) {
        FH_FAIL("rank %d %s: element %zu is %g, want %g", rank, names[which], i, host[i], want);
        break;
      }
    }
  }
  free(host);
}

/* Every case but the deterministic one, on the buffers given. */
static void run_default(ncclComm_t comm, int rank, int n, int memalloc, float *send, float *recv, size_t bytes,
                        cudaStream_t s) {
  ncclWindow_t wsend, wrecv, wspare;
  FH_EXPECT(ncclCommWindowRegister(comm, send, bytes, &wsend, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess &&
                ncclCommWindowRegister(comm, recv, bytes, &wrecv, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess,
            "rank %d: ncclCommWindowRegister: %s", rank, ncclGetLastError(comm));
  run_float(comm, rank, n, send, recv, 2, 0, ncclSum, s, "8 bytes");
  run_float(comm, rank, n, send, recv, 1001, 0, ncclSum, s, "1001 floats");
  run_float(comm, rank, n, send, recv, BIG, 0, ncclSum, s, "16 MiB");
  run_float(comm, rank, n, send, recv, 4096, 0, ncclAvg, s, "average");
  run_float(comm, rank, n, send, send, 4099, 0, ncclSum, s, "in place");
  run_bf16(comm, rank, n, send, recv, 1 << 20, s);
  run_graph(comm, rank, n, send, recv, 65536, s);
  run_others(comm, rank, n, send, recv, 100001, s);
  /* Buffers outside windows take the FIFO algorithms. */
  float *outside = dev_alloc(memalloc, 8192 * sizeof(float));
  run_float(comm, rank, n, outside, outside + 4096, 4096, 0, ncclSum, s, "outside windows");
  /* A slot given back and taken again: the receive window is deregistered and registered anew. */
  FH_EXPECT(ncclCommWindowDeregister(comm, wrecv) == ncclSuccess, "rank %d: deregister: %s", rank,
            ncclGetLastError(comm));
  FH_EXPECT(ncclCommWindowRegister(comm, recv, bytes, &wspare, 0) == ncclSuccess, "rank %d: register again: %s", rank,
            ncclGetLastError(comm));
  run_float(comm, rank, n, send, recv, 12345, 0, ncclSum, s, "after the slot's reuse");
  FH_EXPECT(ncclCommWindowDeregister(comm, wsend) == ncclSuccess && ncclCommWindowDeregister(comm, wspare) ==
                ncclSuccess, "rank %d: deregister: %s", rank, ncclGetLastError(comm));
  dev_free(memalloc, outside);
}

/* DCCL_DETERMINISTIC=1: the rank-order bits from the direct all-reduce (windows) and from the kernels' one-shot
 * schedule (buffers outside windows). */
static void run_deterministic(ncclComm_t comm, int rank, int n, int memalloc, float *send, float *recv, size_t bytes,
                              cudaStream_t s) {
  ncclWindow_t wsend, wrecv;
  FH_EXPECT(ncclCommWindowRegister(comm, send, bytes, &wsend, 0) == ncclSuccess &&
                ncclCommWindowRegister(comm, recv, bytes, &wrecv, 0) == ncclSuccess,
            "rank %d: ncclCommWindowRegister: %s", rank, ncclGetLastError(comm));
  run_float(comm, rank, n, send, recv, 100003, 1, ncclSum, s, "deterministic, rank-order bits");
  float *outside = dev_alloc(memalloc, 4096);
  run_float(comm, rank, n, outside, outside, 1000, 1, ncclSum, s, "deterministic outside windows, rank-order bits");
  FH_EXPECT(ncclCommWindowDeregister(comm, wsend) == ncclSuccess && ncclCommWindowDeregister(comm, wrecv) ==
                ncclSuccess, "rank %d: deregister: %s", rank, ncclGetLastError(comm));
  dev_free(memalloc, outside);
}

/* Windows over allocations that buffers outside windows mapped first, and the reverse (DCCL_LAZY_MAP_BYTES=0). */
static void run_lazy(ncclComm_t comm, int rank, int n, int memalloc, float *send, float *recv, size_t bytes,
                     cudaStream_t s) {
  char *base = (char *)send - 4096; /* [base, send): in the allocation, in no window */
  run_float(comm, rank, n, send, recv, 1001, 0, ncclSum, s, "mapped on first use");
  ncclWindow_t wsend, wrecv;
  FH_EXPECT(ncclCommWindowRegister(comm, send, bytes, &wsend, 0) == ncclSuccess &&
                ncclCommWindowRegister(comm, recv, bytes, &wrecv, 0) == ncclSuccess,
            "rank %d: a window over an allocation mapped on first use: %s", rank, ncclGetLastError(comm));
  run_float(comm, rank, n, send, recv, 4097, 0, ncclSum, s, "windows after first use");
  run_float(comm, rank, n, (float *)base, (float *)(base + 2048), 500, 0, ncclSum, s, "first use beside windows");
  FH_EXPECT(ncclCommWindowDeregister(comm, wsend) == ncclSuccess && ncclCommWindowDeregister(comm, wrecv) ==
                ncclSuccess, "rank %d: deregister: %s", rank, ncclGetLastError(comm));
  run_float(comm, rank, n, send, recv, 1003, 0, ncclSum, s, "first use after the windows went");
  /* The reverse: a window first, then a buffer of its allocation outside it, then the window let go. */
  char *other = dev_alloc(memalloc, 2 * bytes);
  ncclWindow_t wother;
  FH_EXPECT(ncclCommWindowRegister(comm, other, bytes, &wother, 0) == ncclSuccess, "rank %d: register: %s", rank,
            ncclGetLastError(comm));
  float *half = (float *)(other + bytes);
  run_float(comm, rank, n, half, half + 8192, 8192, 0, ncclSum, s, "first use in a window's allocation");
  FH_EXPECT(ncclCommWindowDeregister(comm, wother) == ncclSuccess, "rank %d: deregister: %s", rank,
            ncclGetLastError(comm));
  run_float(comm, rank, n, half, half + 8192, 8191, 0, ncclSum, s, "first use after its window went");
  dev_free(memalloc, other);
}

static int rank_main(void *arg, int rank) {
  const struct shared *sh = arg;
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ncclComm_t comm = init(sh, rank);
  if (!comm) return 1;
  /* One allocation: the send buffer 4 KiB in, the receive buffer after it; a window each. */
  size_t bytes = BIG * sizeof(float), span = 2 * bytes + (16 << 10);
  char *base = dev_alloc(sh->memalloc, span);
  float *send = (float *)(base + 4096), *recv = (float *)(base + 8192 + bytes);
  if (sh->deterministic)
    run_deterministic(comm, rank, sh->nranks, sh->memalloc, send, recv, bytes, s);
  else if (sh->lazy)
    run_lazy(comm, rank, sh->nranks, sh->memalloc, send, recv, bytes, s);
  else
    run_default(comm, rank, sh->nranks, sh->memalloc, send, recv, bytes, s);
  FH_EXPECT(ncclCommDestroy(comm) == ncclSuccess, "rank %d: destroy", rank);
  dev_free(sh->memalloc, base);
  return fh_failures ? 1 : 0;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 0;
  int kind_ok = argc >= 3 && (!strcmp(argv[2], "cudamalloc") || !strcmp(argv[2], "memalloc"));
  int mode_ok = argc < 4 || !strcmp(argv[3], "deterministic") || !strcmp(argv[3], "lazy");
  if (argc < 3 || argc > 4 || n < 2 || n > MAX_RANKS || !kind_ok || !mode_ok) {
    fprintf(stderr, "usage: gpu_windows NRANKS(2-%d) cudamalloc|memalloc [deterministic|lazy]\n",
            MAX_RANKS);
    return 2;
  }
  /* No CUDA in the parent: its children fork from it. */
  if (system("nvidia-smi -L > /dev/null 2>&1") != 0) {
    printf("SKIP: no usable GPU\n");
    return 77;
  }
  struct shared *sh = fh_shared_alloc(sizeof(*sh));
  sh->nranks = n;
  sh->memalloc = !strcmp(argv[2], "memalloc");
  sh->deterministic = argc == 4 && !strcmp(argv[3], "deterministic");
  sh->lazy = argc == 4 && !strcmp(argv[3], "lazy");
  /* Read once per process: set before the children start. */
  if (sh->deterministic) setenv("DCCL_DETERMINISTIC", "1", 1);
  if (sh->lazy) setenv("DCCL_LAZY_MAP_BYTES", "0", 1);
  if (fh_unique_id(&sh->id) != ncclSuccess) return 1;
  int status[MAX_RANKS], killed[MAX_RANKS];
  fh_run_ranks(rank_main, sh, n, 240, status, killed);
  for (int r = 0; r < n; r++) {
    char buf[64];
    FH_EXPECT(fh_status_ok(status[r]), "rank %d: %s%s", r, fh_status_str(status[r], buf, sizeof(buf)),
              killed[r] ? " (killed at the deadline)" : "");
  }
  printf("gpu_windows %d ranks, %s%s: %s\n", n, argv[2], argc == 4 ? (sh->lazy ? ", lazy" : ", deterministic") : "",
         fh_failures ? "FAILED" : "passed");
  return fh_failures ? 1 : 0;
}
