/* ab_inproc: two builds of libdccl compared inside one process pair, so both see the same machine. This machine
 * drifts between fast and slow spells lasting seconds (DCCL and MPI alike: docs/performance.md), which makes runs
 * of one build against runs of the other differ by more than the builds do. Here each rank loads both libraries
 * (dlopen, RTLD_LOCAL | RTLD_DEEPBIND: two independent copies), makes a communicator with each, and times
 * float32-sum all-reduces of host buffers in short alternating blocks (library A, library B, MPI_Allreduce, then
 * again), the slowest rank's time per block. It prints, per size, the medians over blocks and the median of the
 * per-round ratios B/A and B/MPI (a round's three blocks run within milliseconds of each other).
 * Usage: mpirun -np 2 ab_inproc LIB_A LIB_B [rounds=41] [sizes in bytes...]  (default sizes: 8, 1M, 16M, 64M) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dccl.h"

struct lib {
  const char *path;
  __typeof__(&ncclGetUniqueId) get_id;
  __typeof__(&ncclCommInitRank) init;
  __typeof__(&ncclAllReduce) all_reduce;
  __typeof__(&ncclCommDestroy) destroy;
  __typeof__(&ncclGetLastError) last_error;
  ncclComm_t comm;
};

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, n, sizeof(*v), cmp);
  return v[n / 2];
}

static void load(struct lib *l, int rank, int nranks) {
  void *h = dlopen(l->path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!h) {
    fprintf(stderr, "ab_inproc: %s\n", dlerror());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  l->get_id = (__typeof__(l->get_id))dlsym(h, "ncclGetUniqueId");
  l->init = (__typeof__(l->init))dlsym(h, "ncclCommInitRank");
  l->all_reduce = (__typeof__(l->all_reduce))dlsym(h, "ncclAllReduce");
  l->destroy = (__typeof__(l->destroy))dlsym(h, "ncclCommDestroy");
  l->last_error = (__typeof__(l->last_error))dlsym(h, "ncclGetLastError");
  ncclUniqueId id;
  if (rank == 0 && l->get_id(&id) != ncclSuccess) MPI_Abort(MPI_COMM_WORLD, 2);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (l->init(&l->comm, nranks, id, rank) != ncclSuccess) {
    fprintf(stderr, "ab_inproc: %s: %s\n", l->path, l->last_error(NULL));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

/* One block: iters operations on library l (NULL: MPI), the slowest rank's microseconds per operation. */
static double block(struct lib *l, float *in, float *out, size_t count, int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now_us();
  for (int i = 0; i < iters; i++) {
    if (l) {
      if (l->all_reduce(in, out, count, ncclFloat32, ncclSum, l->comm, NULL) != ncclSuccess) {
        fprintf(stderr, "ab_inproc: %s: %s\n", l->path, l->last_error(l->comm));
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
    } else {
      MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
  }
  double mine = (now_us() - t0) / iters, slowest;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (argc < 3) {
    if (rank == 0) fprintf(stderr, "usage: ab_inproc LIB_A LIB_B [rounds] [sizes...]\n");
    MPI_Finalize();
    return 2;
  }
  struct lib libs[2] = {{.path = argv[1]}, {.path = argv[2]}};
  int rounds = argc > 3 ? atoi(argv[3]) : 41;
  if (rounds < 1) rounds = 41;
  size_t sizes[16] = {8, 1 << 20, 16 << 20, 64 << 20};
  int nsizes = 4;
  if (argc > 4) {
    nsizes = 0;
    for (int i = 4; i < argc && nsizes < 16; i++) sizes[nsizes++] = strtoull(argv[i], NULL, 0);
  }
  for (int k = 0; k < 2; k++) load(&libs[k], rank, nranks);
  size_t max = 0;
  for (int s = 0; s < nsizes; s++) max = sizes[s] > max ? sizes[s] : max;
  float *in = calloc(max / 4 + 1, 4), *out = calloc(max / 4 + 1, 4);
  double *t[3], *ratio_ab = malloc(rounds * sizeof(double)), *ratio_bm = malloc(rounds * sizeof(double));
  for (int k = 0; k < 3; k++) t[k] = malloc(rounds * sizeof(double));
  if (rank == 0)
    printf("# ab_inproc: A %s, B %s, %d ranks, %d rounds (A, B, MPI blocks alternating), slowest rank\n"
           "# %10s %10s %10s %10s %10s %10s\n",
           libs[0].path, libs[1].path, nranks, rounds, "bytes", "A_us", "B_us", "MPI_us", "B/A", "B/MPI");
  for (int s = 0; s < nsizes; s++) {
    size_t count = sizes[s] / 4 ? sizes[s] / 4 : 1;
    /* A block lasts about 20 ms: short against the machine's spells. */
    int iters = sizes[s] <= 4096 ? 20000 : sizes[s] <= (1 << 20) ? 100 : sizes[s] <= (16 << 20) ? 4 : 1;
    for (int k = 0; k < 2; k++) block(&libs[k], in, out, count, iters); /* warm-up */
    for (int r = 0; r < rounds; r++) {
      for (int k = 0; k < 3; k++) t[k][r] = block(k < 2 ? &libs[k] : NULL, in, out, count, iters);
      ratio_ab[r] = t[1][r] / t[0][r];
      ratio_bm[r] = t[1][r] / t[2][r];
    }
    double a = median(t[0], rounds), b = median(t[1], rounds), m = median(t[2], rounds);
    double rab = median(ratio_ab, rounds), rbm = median(ratio_bm, rounds);
    if (rank == 0) printf("  %10zu %10.3f %10.3f %10.3f %10.3f %10.3f\n", count * 4, a, b, m, rab, rbm);
  }
  for (int k = 0; k < 2; k++) libs[k].destroy(libs[k].comm);
  MPI_Finalize();
  return 0;
}
