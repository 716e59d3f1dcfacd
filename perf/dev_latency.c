/* dev_latency: what one small device-buffer all-reduce costs, beside what any kernel costs, in one run.
 * Every rank (one process each, launched by mpirun; under MPS when ranks share a GPU) times, in alternating
 * rounds:
 *   empty+sync   an empty kernel launched and the stream synchronised, n times (the floor of any kernel);
 *   ar+sync      ncclAllReduce of `bytes` float32 sum, then a stream synchronise, n times;
 *   ar b2b       n ncclAllReduce back to back, one synchronise at the end;
 *   empty b2b    n empty kernels back to back, one synchronise at the end (the GPU's floor per kernel);
 *   fat+sync     as empty+sync with a parameter the size of DCCL's launch (struct dccl_dev_work, 3.5 KiB): what
 *                passing the work by value adds to every launch;
 *   shape+sync   as fat+sync, launched in the shape of DCCL's kernels: DCCL_DEV_THREADS threads and the shared
 *                memory of their CTA state (dev_cta): what the shape adds to a launch;
 *   meet+sync    a one-thread kernel per rank that publishes the round on a flag in its GPU memory and waits until
 *                every rank's flag (mapped by CUDA IPC) shows it, then a stream synchronise: it ends only once every
 *                rank's kernel has started, so it is the least any collective between these processes costs (the
 *                ranks' launches, the skew between them, a flag's trip); meet b2b the same back to back (at most 8
 *                ranks, on one GPU);
 *   wide meet b2b  kernels in DCCL's shape (its parameter's size, threads and shared memory), -c CTAs each (32),
 *                whose every CTA meets the same CTA of every rank twice (started, then done), back to back: the
 *                least a direct collective's launch costs between these processes, its work left out;
 *   ar issue     the calls alone, in batches of 100 with a synchronise between batches that is not counted (the
 *                host's cost per call; longer batches fill the stream's queue and time the GPU instead);
 *   empty issue, fat issue   the same for the empty kernel's launch and the large parameter's: what of ar issue
 *                the driver's launch takes;
 *   ptr query    one cudaPointerGetAttributes on a device buffer (DCCL asks the driver about each buffer of a call);
 *   graph+sync   a CUDA graph holding one ncclAllReduce, launched and synchronised n times;
 *   graph b2b    a CUDA graph holding 100 ncclAllReduce, launched n/100 times, one synchronise.
 * Each round's figure is the slowest rank's time per operation; the table gives the median and the minimum over
 * the rounds, and each mode over empty+sync. The result of the last all-reduce is checked.
 * -m picks modes (a comma-separated list of the names above), for a trace of one (perf/gpu/kernel_trace.c).
 * Usage: mpirun -np N dev_latency [-b bytes=8] [-n iters=2000] [-r rounds=7] [-m modes=all] [-c ctas=32] */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dccl.h"

cudaError_t perf_launch_empty(cudaStream_t stream);
cudaError_t perf_launch_fat(cudaStream_t stream);
size_t perf_fat_bytes(void);
cudaError_t perf_launch_shaped(cudaStream_t stream);
size_t perf_shaped_smem(void);
cudaError_t perf_launch_meet(cudaStream_t stream, uint32_t *const *flags, int n, int me, uint32_t round);
cudaError_t perf_launch_wide_meet(cudaStream_t stream, uint32_t *const *flags, int n, int me, uint32_t round,
                                  int ctas);

#define GRAPH_OPS 100
enum { EMPTY, EMPTY_B2B, FAT_SYNC, SHAPE_SYNC, MEET_SYNC, MEET_B2B, WIDE_MEET_B2B, AR_SYNC, AR_B2B, AR_ISSUE,
       EMPTY_ISSUE, FAT_ISSUE, PTR_QUERY, GRAPH_SYNC, GRAPH_B2B, NMODES };
static const char *mode_names[NMODES] = {"empty+sync", "empty b2b",   "fat+sync",  "shape+sync", "meet+sync",
                                         "meet b2b",   "wide meet b2b", "ar+sync", "ar b2b",     "ar issue",
                                         "empty issue", "fat issue",  "ptr query", "graph+sync", "graph b2b"};
#define MEET_MAX_RANKS 8
#define WIDE_MAX_CTAS 256 /* the wide meeting's words: word 0 is the one-thread meeting's, 1.. the CTAs' */

static void check_cuda(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return;
  fprintf(stderr, "dev_latency: %s: %s\n", what, cudaGetErrorString(e));
  MPI_Abort(MPI_COMM_WORLD, 2);
}
static void check_nccl(ncclResult_t r, ncclComm_t comm, const char *what) {
  if (r == ncclSuccess) return;
  fprintf(stderr, "dev_latency: %s: %s (%s)\n", what, ncclGetErrorString(r), ncclGetLastError(comm));
  MPI_Abort(MPI_COMM_WORLD, 2);
}
static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

struct bench {
  ncclComm_t comm;
  cudaStream_t stream;
  float *send, *recv;
  size_t count;
  cudaGraphExec_t one, hundred;
  uint32_t *flags[MEET_MAX_RANKS]; /* every rank's meeting flag, this one's own among them */
  int nranks, rank;
  uint32_t round; /* meet kernels launched so far: every rank launches the same number */
  uint32_t wide_round; /* and wide meet kernels */
  int ctas;            /* a wide meet kernel's */
  uint32_t *wide[MEET_MAX_RANKS]; /* every rank's words for the wide meetings (flags + 1) */
};

static void meet(struct bench *b) {
  check_cuda(perf_launch_meet(b->stream, b->flags, b->nranks, b->rank, ++b->round), "launching the meet kernel");
}

static void wide_meet(struct bench *b) {
  check_cuda(perf_launch_wide_meet(b->stream, b->wide, b->nranks, b->rank, ++b->wide_round, b->ctas),
             "launching the wide meet kernel");
}

/* Each rank's flags in its GPU memory, mapped into every other rank's process by CUDA IPC. */
static void map_flags(struct bench *b) {
  cudaIpcMemHandle_t mine, all[MEET_MAX_RANKS];
  size_t bytes = (1 + WIDE_MAX_CTAS) * sizeof(uint32_t);
  check_cuda(cudaMalloc((void **)&b->flags[b->rank], bytes), "cudaMalloc");
  check_cuda(cudaMemset(b->flags[b->rank], 0, bytes), "cudaMemset");
  check_cuda(cudaIpcGetMemHandle(&mine, b->flags[b->rank]), "cudaIpcGetMemHandle");
  MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine), MPI_BYTE, MPI_COMM_WORLD);
  for (int r = 0; r < b->nranks; r++)
    if (r != b->rank)
      check_cuda(cudaIpcOpenMemHandle((void **)&b->flags[r], all[r], cudaIpcMemLazyEnablePeerAccess),
                 "cudaIpcOpenMemHandle");
  for (int r = 0; r < b->nranks; r++) b->wide[r] = b->flags[r] + 1;
}

static void all_reduce(struct bench *b) {
  check_nccl(ncclAllReduce(b->send, b->recv, b->count, ncclFloat, ncclSum, b->comm, b->stream), b->comm,
             "ncclAllReduce");
}

static cudaGraphExec_t capture(struct bench *b, int ops) {
  cudaGraph_t g;
  cudaGraphExec_t exec;
  check_cuda(cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  for (int i = 0; i < ops; i++) all_reduce(b);
  check_cuda(cudaStreamEndCapture(b->stream, &g), "cudaStreamEndCapture");
  check_cuda(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate");
  check_cuda(cudaGraphDestroy(g), "cudaGraphDestroy");
  return exec;
}

/* The host's time per issue of `mode` (AR_ISSUE, EMPTY_ISSUE, FAT_ISSUE) in batches of GRAPH_OPS, each followed
 * by a synchronise that is not counted. */
static double issue_us(struct bench *b, int mode, int n) {
  double issuing = 0;
  for (int done = 0; done + GRAPH_OPS <= n; done += GRAPH_OPS) {
    double start = now_us();
    for (int i = 0; i < GRAPH_OPS; i++) {
      if (mode == AR_ISSUE) all_reduce(b);
      else check_cuda(mode == FAT_ISSUE ? perf_launch_fat(b->stream) : perf_launch_empty(b->stream), "launching");
    }
    issuing += now_us() - start;
    check_cuda(cudaStreamSynchronize(b->stream), "cudaStreamSynchronize");
  }
  return issuing / (n / GRAPH_OPS * GRAPH_OPS);
}

/* Runs `mode` n times; returns this rank's microseconds per operation. */
static double run_mode(struct bench *b, int mode, int n) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now_us();
  switch (mode) {
    case EMPTY:
      for (int i = 0; i < n; i++) {
        check_cuda(perf_launch_empty(b->stream), "launching the empty kernel");
        check_cuda(cudaStreamSynchronize(b->stream), "cudaStreamSynchronize");
      }
      break;
    case EMPTY_B2B:
      for (int i = 0; i < n; i++) check_cuda(perf_launch_empty(b->stream), "launching the empty kernel");
      check_cuda(cudaStreamSynchronize(b->stream), "cudaStreamSynchronize");
      break;
    case FAT_SYNC:
      for (int i = 0; i < n; i++) {
        check_cuda(perf_launch_fat(b->stream), "launching the kernel with a large parameter");
        check_cuda(cudaStreamSynchronize(b->stream), "cudaStreamSynchronize");
      }
      break;
    case SHAPE_SYNC:
      for (int i = 0; i < n; i++) {
        check_cuda(perf_launch_shaped(b->stream), "launching the kernel in DCCL's shape");
        check_cuda(cudaStreamSynchronize(b->stream), "cudaStreamSynchronize");
      }
      break;
    case MEET_SYNC:
      for (int i = 0; i < n; i++) {
        meet(b);
        check_cuda(cudaStreamSynchronize(b->stream), "cudaStreamSynchronize");
      }
      break;
    case MEET_B2B:
      for (int i = 0; i < n; i++) meet(b);
      check_cuda(cudaStreamSynchronize(b->stream), "cudaStreamSynchronize");
      break;
    case WIDE_MEET_B2B:
      for (int i = 0; i < n; i++) wide_meet(b);
      check_cuda(cudaStreamSynchronize(b->stream), "cudaStreamSynchronize");
      break;
    case AR_SYNC:
      for (int i = 0; i < n; i++) {
        all_reduce(b);
        check_cuda(cudaStreamSynchronize(b->stream), "cudaStreamSynchronize");
      }
      break;
    case AR_B2B:
      for (int i = 0; i < n; i++) all_reduce(b);
      check_cuda(cudaStreamSynchronize(b->stream), "cudaStreamSynchronize");
      break;
    case AR_ISSUE:
    case EMPTY_ISSUE:
    case FAT_ISSUE: return issue_us(b, mode, n);
    case PTR_QUERY:
      for (int i = 0; i < n; i++) {
        struct cudaPointerAttributes attr;
        check_cuda(cudaPointerGetAttributes(&attr, i % 2 ? b->recv : b->send), "cudaPointerGetAttributes");
        if (attr.type != cudaMemoryTypeDevice) check_cuda(cudaErrorInvalidValue, "a buffer is not device memory");
      }
      break;
    case GRAPH_SYNC:
      for (int i = 0; i < n; i++) {
        check_cuda(cudaGraphLaunch(b->one, b->stream), "cudaGraphLaunch");
        check_cuda(cudaStreamSynchronize(b->stream), "cudaStreamSynchronize");
      }
      break;
    case GRAPH_B2B:
      for (int i = 0; i < n / GRAPH_OPS; i++) check_cuda(cudaGraphLaunch(b->hundred, b->stream), "cudaGraphLaunch");
      check_cuda(cudaStreamSynchronize(b->stream), "cudaStreamSynchronize");
      n = n / GRAPH_OPS * GRAPH_OPS;
      break;
  }
  return (now_us() - t0) / n;
}

/* The modes a comma-separated list names (all for NULL); 0 when a name is unknown. */
static int pick_modes(const char *list, int on[NMODES]) {
  for (int m = 0; m < NMODES; m++) on[m] = list == NULL;
  for (const char *p = list; p && *p;) {
    size_t len = strcspn(p, ",");
    int found = 0;
    for (int m = 0; m < NMODES; m++)
      if (strlen(mode_names[m]) == len && !strncmp(p, mode_names[m], len)) on[m] = found = 1;
    if (!found) return 0;
    p += len + (p[len] == ',');
  }
  return 1;
}

int main(int argc, char **argv) {
  size_t bytes = 8;
  int iters = 2000, rounds = 7, ctas = 32, on[NMODES], bad_arg = 0;
  const char *modes = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b")) bytes = strtoull(argv[i + 1], NULL, 0);
    else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-r")) rounds = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-m")) modes = argv[i + 1];
    else if (!strcmp(argv[i], "-c")) ctas = atoi(argv[i + 1]);
    else bad_arg = 1;
  }
  bad_arg |= ctas < 1 || ctas > WIDE_MAX_CTAS;
  if (bad_arg || !pick_modes(modes, on)) {
    fprintf(stderr, "usage: dev_latency [-b bytes] [-n iters] [-r rounds] [-m mode,mode...] [-c ctas]  (modes:");
    for (int m = 0; m < NMODES; m++) fprintf(stderr, " %s", mode_names[m]);
    fprintf(stderr, ")\n");
    return 2;
  }
  if (iters < GRAPH_OPS) iters = GRAPH_OPS;
  if (rounds < 1 || rounds > 99) rounds = 7;
  MPI_Init(&argc, &argv);
  int rank, nranks, ndev = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  MPI_Comm local;
  int local_rank;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank);
  int local_size;
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  check_cuda(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
  check_cuda(cudaSetDevice(local_rank % ndev), "cudaSetDevice");

  struct bench b = {0};
  b.count = bytes / sizeof(float) ? bytes / sizeof(float) : 1;
  b.nranks = nranks;
  b.rank = rank;
  b.ctas = ctas;
  if (local_size == nranks && ndev == 1 && nranks <= MEET_MAX_RANKS) map_flags(&b);
  else on[MEET_SYNC] = on[MEET_B2B] = on[WIDE_MEET_B2B] = 0; /* the meetings are on one GPU only */
  check_cuda(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check_cuda(cudaMalloc((void **)&b.send, b.count * sizeof(float)), "cudaMalloc");
  check_cuda(cudaMalloc((void **)&b.recv, b.count * sizeof(float)), "cudaMalloc");
  float *host = malloc(b.count * sizeof(float));
  for (size_t i = 0; i < b.count; i++) host[i] = (float)(rank + 1);
  check_cuda(cudaMemcpy(b.send, host, b.count * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  ncclUniqueId id;
  if (rank == 0) check_nccl(ncclGetUniqueId(&id), NULL, "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  check_nccl(ncclCommInitRank(&b.comm, nranks, id, rank), NULL, "ncclCommInitRank");

  for (int i = 0; i < 200; i++) all_reduce(&b); /* warm-up: links, plans, work blocks */
  check_cuda(cudaStreamSynchronize(b.stream), "cudaStreamSynchronize");
  b.one = capture(&b, 1);
  b.hundred = capture(&b, GRAPH_OPS);
  for (int m = 0; m < NMODES; m++) /* and the graphs' first launches */
    if (on[m]) run_mode(&b, m, GRAPH_OPS);

  double t[NMODES][99];
  for (int r = 0; r < rounds; r++)
    for (int m = 0; m < NMODES; m++) {
      if (!on[m]) continue;
      double mine = run_mode(&b, m, iters), slowest;
      MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      t[m][r] = slowest;
    }

  check_cuda(cudaMemcpy(host, b.recv, b.count * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  float want = (float)nranks * (nranks + 1) / 2;
  int bad = 0;
  for (size_t i = 0; i < b.count; i++) bad += host[i] != want;
  int bad_all = 0;
  MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("# dev_latency: %d ranks, %zu bytes float32 sum, %d operations per round, %d rounds (slowest rank); "
           "fat+sync's parameter %zu bytes, shape+sync's shared memory %zu bytes; wide meet %d CTAs\n",
           nranks, b.count * sizeof(float), iters, rounds, perf_fat_bytes(), perf_shaped_smem(), ctas);
    printf("# %-13s %10s %10s %10s\n", "mode", "median_us", "min_us", "/empty");
    double empty_median = 0;
    for (int m = 0; m < NMODES; m++) {
      if (!on[m]) continue;
      qsort(t[m], rounds, sizeof(double), cmp_double);
      double median = t[m][rounds / 2];
      if (m == EMPTY) empty_median = median;
      printf("  %-13s %10.2f %10.2f %10.2f\n", mode_names[m], median, t[m][0],
             empty_median > 0 ? median / empty_median : 0.0);
    }
    printf("# check: %s (%d wrong elements)\n", bad_all ? "FAILED" : "ok", bad_all);
  }
  cudaGraphExecDestroy(b.one);
  cudaGraphExecDestroy(b.hundred);
  if (b.flags[b.rank]) { /* every rank's meetings are over (the checks' reduction above): unmapped, then freed */
    for (int r = 0; r < b.nranks; r++)
      if (r != b.rank) cudaIpcCloseMemHandle(b.flags[r]);
    MPI_Barrier(MPI_COMM_WORLD);
    cudaFree(b.flags[b.rank]);
  }
  ncclCommDestroy(b.comm);
  free(host);
  MPI_Finalize();
  return bad_all ? 1 : 0;
}
