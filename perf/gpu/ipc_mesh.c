/* ipc_mesh [--ranks N=4] [--kind legacy|fd|cudamalloc] [--mib S=1024] [--reps R=5] [--guard B=0]
 * The direct two-shot all-reduce's memory pattern without DCCL: N processes on the GPU (run it under MPS, or the
 * kernels take turns), each with an input and an output of S MiB, every one mapped by every other process; each
 * process's kernel sums its 1/N slice of every input and stores it into every output, all N kernels at once.
 * DCCL's all-reduce of 4 ranks on cudaMalloc buffers (legacy IPC) reaches 55-58% of the HBM floor out of place and
 * 89% in place, on cuMem buffers (fd) 94% both ways, where one kernel reaching up to 6 of one other process's
 * legacy allocations loses nothing (ipc_reach; docs/performance.md): does this pattern lose the same way?
 * And would the same work in two kernels, each reaching fewer of the others' allocations, win it back (enum mode)?
 * (2026-12-07: nothing loses here, legacy or fd, so mode PIECES lays the work out as DCCL did: each CTA on 2 MiB
 * pieces of its own, far apart, where the plain modes' CTAs stride together through the rank's slice.) --guard B
 * allocates each buffer with B bytes more either side, as DCCL's perf tools did (256), so an allocation is no whole
 * number of 2 MiB pages: that is the loss (2026-12-07: out of place 63% of the floor against 102%, docs/gpu.md).
 * Process 0 is the parent, which passes every region to every rank. Each rep times the modes in turn; a time is
 * the slowest rank's (events), and each line gives the floor (2 N S bytes of HBM traffic at rank 0's local copy
 * rate, measured alone first) against it.
 * Exit status: 0 measured, 2 a call failed or a sum was wrong, 3 the watchdog. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_common.h"
#include "ipc_region.h"
#include "kernels.h"
#include "unix_msg.h"

#define MAX_REPS 32
enum { IN, OUT, NBUF };

static int rank, nranks;
static size_t guard; /* bytes before and after each buffer in its allocation */
static int socks[MESH_MAX_RANKS]; /* the parent: one per child (index = rank); a child: socks[0] */

static void fail(const char *what) {
  printf("FAILED: rank %d: %s\n", rank, what);
  exit(2);
}

/* Every rank returns once all have called it: the parent hears from every child, then releases them all. */
static void barrier(void) {
  char c = 1;
  if (rank != 0) {
    if (msg_send(socks[0], &c, 1, -1) != 0 || msg_recv(socks[0], &c, 1, NULL) != 0) fail("barrier");
    return;
  }
  for (int r = 1; r < nranks; r++)
    if (msg_recv(socks[r], &c, 1, NULL) != 0) fail("barrier");
  for (int r = 1; r < nranks; r++)
    if (msg_send(socks[r], &c, 1, -1) != 0) fail("barrier");
}

/* Every rank's regions to every rank: children send theirs to the parent, which sends all N ranks' to each. The
 * fd kind's descriptors travel beside; the ones of other ranks left in fds are the caller's to close. */
static void exchange(struct region own[NBUF], struct region_wire wires[][NBUF], int fds[][NBUF]) {
  for (int b = 0; b < NBUF; b++)
    CU_MUST(region_export(&own[b], own[b].ptr + guard, &wires[rank][b], &fds[rank][b]));
  if (rank != 0) {
    for (int b = 0; b < NBUF; b++) {
      if (msg_send(socks[0], &wires[rank][b], sizeof wires[rank][b], fds[rank][b]) != 0) fail("sending a region");
      if (fds[rank][b] >= 0) close(fds[rank][b]);
    }
    for (int r = 0; r < nranks; r++)
      for (int b = 0; b < NBUF && r != rank; b++)
        if (msg_recv(socks[0], &wires[r][b], sizeof wires[r][b], &fds[r][b]) != 0) fail("receiving a region");
    return;
  }
  for (int r = 1; r < nranks; r++)
    for (int b = 0; b < NBUF; b++)
      if (msg_recv(socks[r], &wires[r][b], sizeof wires[r][b], &fds[r][b]) != 0) fail("receiving a region");
  for (int to = 1; to < nranks; to++)
    for (int r = 0; r < nranks; r++)
      for (int b = 0; b < NBUF && r != to; b++)
        if (msg_send(socks[to], &wires[r][b], sizeof wires[r][b], fds[r][b]) != 0) fail("passing a region on");
  for (int b = 0; b < NBUF; b++)
    if (fds[0][b] >= 0) close(fds[0][b]);
}

/* The three ways of one all-reduce: the two-shot out of place (inputs -> every output: 2 N allocations reached by
 * each kernel), in place (on the outputs: N), and in two kernels (each rank's slice of every input summed into its
 * own output, then, after a barrier, the other ranks' slices pulled from their outputs into its own: N - 1 remote
 * allocations per kernel, for (1 + (2 N - 1) / N) S bytes of traffic per rank against 2 S). */
enum mode { OUT_OF_PLACE, IN_PLACE, PIECES, TWO_KERNELS, NMODES };
static const char *mode_name[NMODES] = {"out of place", "in place", "out of place in DCCL's 2 MiB pieces",
                                        "two kernels"};
#define DCCL_PIECE_BYTES (2u << 20) /* DCCL_DIRECT_PIECE_BYTES's default until 2026-12-07 */

/* One all-reduce in `mode`, all ranks started together; returns this rank's time in ms (from its first kernel's
 * start to its last one's end), after checking its output's first and last floats (rank 0's and rank N-1's
 * slices) against `want` once every rank is done. */
static float mesh_once(enum mode mode, CUdeviceptr ptr[NBUF][MESH_MAX_RANKS], size_t bytes, int ctas, CUstream s,
                       CUevent start, CUevent end, float want) {
  size_t slice = bytes / (size_t)nranks / 16 * 16; /* the last rank's slice takes the rest */
  size_t first = slice * (size_t)rank, last = rank == nranks - 1 ? bytes : first + slice;
  CUdeviceptr *in = ptr[IN], *out = ptr[OUT], mine = out[rank];
  barrier();
  CU_MUST(cuEventRecord(start, s));
  int err = mode == OUT_OF_PLACE ? slice_sum_launch(out, nranks, in, nranks, first, last, 0, 0, 0, ctas, s)
            : mode == IN_PLACE ? slice_sum_launch(out, nranks, out, nranks, first, last, 0, 0, 0, ctas, s)
            : mode == PIECES
                ? slice_sum_launch(out, nranks, in, nranks, 0, bytes, DCCL_PIECE_BYTES, rank, nranks, ctas, s)
                               : slice_sum_launch(&mine, 1, in, nranks, first, last, 0, 0, 0, ctas, s);
  if (err != 0) fail("the kernel's launch");
  if (mode == TWO_KERNELS) {
    if (stream_wait(s, 30) != CUDA_SUCCESS) fail("the first kernel did not end within 30 s");
    barrier(); /* every rank's slice is in its output */
    CUdeviceptr dsts[MESH_MAX_RANKS], srcs[MESH_MAX_RANKS];
    int n = 0;
    for (int q = 0; q < nranks; q++)
      if (q != rank) dsts[n] = mine + slice * (size_t)q, srcs[n++] = out[q] + slice * (size_t)q;
    if (multi_copy_launch(dsts, srcs, n, slice, (ctas + 3) / 4, s) != 0) fail("the copy's launch"); /* 4 per unit */
  }
  CU_MUST(cuEventRecord(end, s));
  if (stream_wait(s, 30) != CUDA_SUCCESS) fail("the kernel did not end within 30 s");
  barrier();
  float got[2];
  CU_MUST(cuMemcpyDtoH(&got[0], mine, 4));
  CU_MUST(cuMemcpyDtoH(&got[1], mine + bytes - 4, 4));
  if (got[0] != want || got[1] != want) fail("a sum differs from the expected one");
  float ms = 0;
  CU_MUST(cuEventElapsedTime(&ms, start, end));
  return ms;
}

/* The slowest rank's time of each rep, gathered at the parent (children send theirs). */
static void slowest(float *ms, int reps) {
  if (rank != 0) {
    if (msg_send(socks[0], ms, sizeof(float) * (size_t)reps, -1) != 0) fail("sending times");
    return;
  }
  for (int r = 1; r < nranks; r++) {
    float theirs[MAX_REPS];
    if (msg_recv(socks[r], theirs, sizeof(float) * (size_t)reps, NULL) != 0) fail("receiving times");
    for (int i = 0; i < reps; i++)
      if (theirs[i] > ms[i]) ms[i] = theirs[i];
  }
}

static int run_rank(enum region_kind kind, size_t mib, int reps) {
  size_t bytes = mib << 20;
  CUdevice dev = gpu_open();
  int sms = gpu_sm_count(dev);
  int ctas = 2 * sms / nranks > 0 ? 2 * sms / nranks : 1; /* the GPU shared by the N kernels */
  struct region own[NBUF];
  for (int b = 0; b < NBUF; b++) CU_MUST(region_alloc(&own[b], kind, bytes + 2 * guard, dev));
  float one = (float)(rank + 1);
  uint32_t bits;
  memcpy(&bits, &one, 4);
  CU_MUST(cuMemsetD32(own[IN].ptr + guard, bits, bytes / 4));
  CU_MUST(cuCtxSynchronize());
  static struct region_wire wires[MESH_MAX_RANKS][NBUF];
  static int fds[MESH_MAX_RANKS][NBUF];
  exchange(own, wires, fds);
  struct mapping theirs[MESH_MAX_RANKS][NBUF];
  CUdeviceptr ptr[NBUF][MESH_MAX_RANKS];
  for (int r = 0; r < nranks; r++)
    for (int b = 0; b < NBUF; b++) {
      struct open_cost cost;
      if (r == rank) {
        ptr[b][r] = own[b].ptr + guard;
        continue;
      }
      CU_MUST(mapping_open(&theirs[r][b], &wires[r][b], fds[r][b], dev, &cost));
      if (fds[r][b] >= 0) close(fds[r][b]);
      ptr[b][r] = theirs[r][b].ptr;
    }
  CUstream s;
  CUevent start, end;
  CU_MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_MUST(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CU_MUST(cuEventCreate(&end, CU_EVENT_DEFAULT));

  /* Rank 0's local copy alone: the rate the floor is counted at. */
  float copy_ms[MAX_REPS];
  for (int i = 0; i < reps && rank == 0; i++) {
    CU_MUST(cuEventRecord(start, s));
    if (copy_launch(ptr[OUT][rank], ptr[IN][rank], bytes, sms, s) != 0) fail("the copy's launch");
    CU_MUST(cuEventRecord(end, s));
    if (stream_wait(s, 30) != CUDA_SUCCESS) fail("the copy did not end within 30 s");
    CU_MUST(cuEventElapsedTime(&copy_ms[i], start, end));
  }
  /* The inputs never change, so out of place (and in two kernels) every output gets sum(1..N); in place on the
   * outputs then multiplies that by N. Two kernels need equal slices of whole 2 MiB chunks (multi_copy). */
  float sum = (float)(nranks * (nranks + 1) / 2), want[NMODES] = {sum, sum * (float)nranks, sum, sum};
  int nmodes = bytes % ((size_t)nranks * REACH_CHUNK_BYTES) == 0 ? NMODES : TWO_KERNELS;
  float ms[NMODES][MAX_REPS];
  for (int m = 0; m < nmodes; m++) /* warm-up: first touches */
    mesh_once((enum mode)m, ptr, bytes, ctas, s, start, end, want[m]);
  for (int i = 0; i < reps; i++)
    for (int m = 0; m < nmodes; m++) ms[m][i] = mesh_once((enum mode)m, ptr, bytes, ctas, s, start, end, want[m]);
  for (int m = 0; m < nmodes; m++) slowest(ms[m], reps);
  if (rank == 0) {
    double copy[MAX_REPS], t[MAX_REPS];
    for (int i = 0; i < reps; i++) copy[i] = copy_ms[i];
    double rate = 2.0 * (double)bytes / (median(copy, (size_t)reps) * 1e9); /* TB/s of traffic */
    double floor_ms = 2.0 * nranks * (double)bytes / (rate * 1e9);
    printf("ipc_mesh %s %d ranks %zu MiB (allocations %zu bytes more), MPS attribute %d, %d CTAs each: local copy "
           "%.3f TB/s of traffic, medians of %d", region_kind_name(kind), nranks, mib, 2 * guard, gpu_mps_enabled(dev),
           ctas, rate, reps);
    for (int m = 0; m < nmodes; m++) {
      for (int i = 0; i < reps; i++) t[i] = ms[m][i];
      double med = median(t, (size_t)reps);
      printf("; %s %.3f ms (%.0f%% of the floor)", mode_name[m], med, 100 * floor_ms / med);
    }
    printf("\n");
  }
  barrier(); /* nobody unmaps while another's kernel may still read */
  for (int r = 0; r < nranks; r++)
    for (int b = 0; b < NBUF && r != rank; b++) CU_MUST(mapping_close(&theirs[r][b], NULL));
  barrier(); /* every mapping closed before the owners free */
  for (int b = 0; b < NBUF; b++) region_free(&own[b]);
  return 0;
}

static void usage(void) {
  fprintf(stderr, "usage: ipc_mesh [--ranks N=4 (2-%d)] [--kind legacy|fd|cudamalloc] [--mib S=1024 (a multiple of "
                  "2)] [--reps R=5 (1-%d)] [--guard B=0 (a multiple of 16)]\n", MESH_MAX_RANKS, MAX_REPS);
  exit(2);
}

int main(int argc, char **argv) {
  enum region_kind kind = REGION_LEGACY;
  size_t mib = 1024;
  int reps = 5;
  nranks = 4;
  for (int i = 1; i < argc; i += 2) {
    int took = i + 1 < argc ? region_option(argv[i], argv[i + 1], &kind, &mib, &reps) : -1;
    if (took == 0 && !strcmp(argv[i], "--ranks")) nranks = atoi(argv[i + 1]);
    else if (took == 0 && !strcmp(argv[i], "--guard")) guard = strtoull(argv[i + 1], NULL, 10);
    else if (took != 1) usage();
  }
  if (nranks < 2 || nranks > MESH_MAX_RANKS || mib == 0 || mib % 2 || reps < 1 || reps > MAX_REPS || guard % 16 ||
      guard > (64u << 20))
    usage();
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* Fork before any CUDA call: a CUDA context does not survive fork. */
  pid_t children[MESH_MAX_RANKS];
  for (int r = 1; r < nranks; r++) {
    int fds[2];
    if (msg_pair(fds, 60) != 0) return perror("socketpair"), 2;
    children[r] = fork();
    if (children[r] < 0) return perror("fork"), 2;
    if (children[r] == 0) {
      for (int q = 1; q < r; q++) close(socks[q]); /* the parent's ends to earlier children */
      close(fds[0]);
      socks[0] = fds[1];
      rank = r;
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      watchdog_arm(170, "ipc_mesh child");
      return run_rank(kind, mib, reps);
    }
    close(fds[1]);
    socks[r] = fds[0];
  }
  watchdog_arm(170, "ipc_mesh parent");
  int rc = run_rank(kind, mib, reps);
  for (int r = 1; r < nranks; r++) {
    int st = 0;
    waitpid(children[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      printf("FAILED: rank %d ended with status 0x%x\n", r, st);
      rc = 2;
    }
  }
  return rc;
}
