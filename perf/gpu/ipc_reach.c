/* ipc_reach [--kind legacy|fd|cudamalloc] [--mib S=256] [--reps R=5]
 * Does a kernel's rate through another process's memory depend on how many of its allocations the kernel reaches?
 * The direct all-reduce of 4 rank processes on cudaMalloc buffers (legacy IPC mappings) reaches 55-58% of the HBM
 * floor out of place, where each kernel touches 6 of the other processes' allocations, and 89% in place (3); on
 * cuMem buffers (fd mappings) 94% both ways (docs/performance.md). Process B (the child) allocates 6 regions of S
 * MiB of one kind and sends them; A maps them and allocates 6 of its own, then times, median of R, one kernel
 * copying k regions into k others at once (k = 1, 2, 3; their 2 MiB chunks interleaved): local -> local (the
 * reference), remote -> local, local -> remote and remote -> remote (2k remote allocations). Each line gives the
 * rate copied, the HBM traffic (twice that) and the ratio to local -> local at the same k. Only A runs kernels.
 * Exit status: 0 measured, 2 a call failed or a copy was wrong, 3 the watchdog. */
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

#define REGIONS 6
#define MAX_REPS 32
enum where { LOCAL_LOCAL, REMOTE_LOCAL, LOCAL_REMOTE, REMOTE_REMOTE, NCASES };
static const char *case_name[NCASES] = {"local -> local", "remote -> local", "local -> remote", "remote -> remote"};

static void fail(const char *what) {
  printf("FAILED: %s\n", what);
  exit(2);
}

/* B: allocates, fills (region i with words 0x5a0000i0), sends each region, and holds them until A is done. */
static int run_owner(int sock, enum region_kind kind, size_t bytes) {
  CUdevice dev = gpu_open();
  struct region r[REGIONS];
  for (int i = 0; i < REGIONS; i++) {
    CU_MUST(region_alloc(&r[i], kind, bytes, dev));
    CU_MUST(cuMemsetD32(r[i].ptr, 0x5a000000u + 16u * (unsigned)i, bytes / 4));
  }
  CU_MUST(cuCtxSynchronize());
  for (int i = 0; i < REGIONS; i++) {
    struct region_wire w;
    int fd = -1;
    CU_MUST(region_export(&r[i], r[i].ptr, &w, &fd));
    if (msg_send(sock, &w, sizeof w, fd) != 0) fail("B: sending a region");
    if (fd >= 0) close(fd);
  }
  if (msg_barrier(sock) != 0) fail("B: waiting for A to finish"); /* A has unmapped everything */
  for (int i = 0; i < REGIONS; i++) region_free(&r[i]);
  return 0;
}

/* The first and last words of every destination against its source's, each destination's cleared before the
 * copy: a wrong interleave (a pair or a chunk missed) leaves one of them unwritten. */
static void check_ends(const CUdeviceptr *dst, const CUdeviceptr *src, int k, size_t bytes) {
  for (int i = 0; i < k; i++)
    for (size_t at = 0; at < bytes; at += bytes - 4) {
      uint32_t got = 0, want = 0;
      CU_MUST(cuMemcpyDtoH(&got, dst[i] + at, 4));
      CU_MUST(cuMemcpyDtoH(&want, src[i] + at, 4));
      if (got != want) fail("A: a copied word differs from its source's");
    }
}

/* The copy of k pairs for one case, timed by events and checked (check_ends). */
static double time_case(enum where c, int k, size_t bytes, const CUdeviceptr *local, const CUdeviceptr *remote,
                        int sms, CUstream s, CUevent start, CUevent end) {
  CUdeviceptr src[REACH_MAX_PAIRS], dst[REACH_MAX_PAIRS];
  for (int i = 0; i < k; i++) {
    src[i] = c == REMOTE_LOCAL || c == REMOTE_REMOTE ? remote[i] : local[i];
    dst[i] = c == LOCAL_REMOTE || c == REMOTE_REMOTE ? remote[3 + i] : local[3 + i];
  }
  for (int i = 0; i < k; i++) {
    CU_MUST(cuMemsetD32Async(dst[i], 0, 1, s));
    CU_MUST(cuMemsetD32Async(dst[i] + bytes - 4, 0, 1, s));
  }
  CU_MUST(cuEventRecord(start, s));
  if (multi_copy_launch(dst, src, k, bytes, sms, s) != 0) fail("A: the copy kernel's launch");
  CU_MUST(cuEventRecord(end, s));
  if (stream_wait(s, 30) != CUDA_SUCCESS) fail("A: the copy did not end within 30 s");
  check_ends(dst, src, k, bytes);
  float ms = 0;
  CU_MUST(cuEventElapsedTime(&ms, start, end));
  return (double)k * (double)bytes / (ms * 1e6); /* GB/s copied */
}

/* A: maps B's regions, allocates its own, measures every case at every k, alternating them within each rep. */
static int run_measurer(int sock, enum region_kind kind, size_t mib, int reps) {
  size_t bytes = mib << 20;
  CUdevice dev = gpu_open();
  int sms = gpu_sm_count(dev);
  printf("== ipc_reach: %s, %zu MiB regions, MPS attribute %d, %d SMs, median of %d\n", region_kind_name(kind), mib,
         gpu_mps_enabled(dev), sms, reps);
  struct region own[REGIONS];
  struct mapping theirs[REGIONS];
  CUdeviceptr local[REGIONS], remote[REGIONS];
  for (int i = 0; i < REGIONS; i++) {
    CU_MUST(region_alloc(&own[i], kind, bytes, dev));
    CU_MUST(cuMemsetD32(own[i].ptr, 0x3c000000u + (unsigned)i, bytes / 4));
    local[i] = own[i].ptr;
    struct region_wire w;
    int fd = -1;
    struct open_cost cost;
    if (msg_recv(sock, &w, sizeof w, &fd) != 0) fail("A: receiving a region");
    CU_MUST(mapping_open(&theirs[i], &w, fd, dev, &cost));
    if (fd >= 0) close(fd);
    remote[i] = theirs[i].ptr;
  }
  CUstream s;
  CUevent start, end;
  CU_MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_MUST(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CU_MUST(cuEventCreate(&end, CU_EVENT_DEFAULT));
  CU_MUST(cuCtxSynchronize());
  static const int ks[] = {1, 2, 3};
  enum { NK = sizeof ks / sizeof ks[0] };
  double gbps[NK][NCASES][MAX_REPS];
  for (int kk = 0; kk < NK; kk++) /* a warm-up of every case: first touches map pages */
    for (int c = 0; c < NCASES; c++) time_case((enum where)c, ks[kk], bytes, local, remote, sms, s, start, end);
  for (int r = 0; r < reps; r++)
    for (int kk = 0; kk < NK; kk++)
      for (int c = 0; c < NCASES; c++)
        gbps[kk][c][r] = time_case((enum where)c, ks[kk], bytes, local, remote, sms, s, start, end);
  for (int kk = 0; kk < NK; kk++) {
    double ref = median(gbps[kk][LOCAL_LOCAL], (size_t)reps);
    for (int c = 0; c < NCASES; c++) {
      double m = c == LOCAL_LOCAL ? ref : median(gbps[kk][c], (size_t)reps);
      int reached = (c == REMOTE_LOCAL || c == LOCAL_REMOTE ? 1 : c == REMOTE_REMOTE ? 2 : 0) * ks[kk];
      printf("ipc_reach %s %zu MiB k=%d %-16s (%d remote allocations): %7.1f GB/s copied, %.3f TB/s traffic, "
             "%.2f of local\n",
             region_kind_name(kind), mib, ks[kk], case_name[c], reached, m, 2 * m / 1e3, m / ref);
    }
  }
  for (int i = 0; i < REGIONS; i++) {
    CU_MUST(mapping_close(&theirs[i], NULL));
    region_free(&own[i]);
  }
  if (msg_barrier(sock) != 0) fail("A: telling B it may free");
  return 0;
}

static void usage(void) {
  fprintf(stderr, "usage: ipc_reach [--kind legacy|fd|cudamalloc] [--mib S=256 (a multiple of 2)] "
                  "[--reps R=5 (1-%d)]\n", MAX_REPS);
  exit(2);
}

int main(int argc, char **argv) {
  enum region_kind kind = REGION_LEGACY;
  size_t mib = 256;
  int reps = 5;
  for (int i = 1; i < argc; i += 2)
    if (i + 1 >= argc || region_option(argv[i], argv[i + 1], &kind, &mib, &reps) != 1) usage();
  if (mib == 0 || mib % 2 || reps < 1 || reps > MAX_REPS) usage();
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* Fork before any CUDA call: a CUDA context does not survive fork. */
  int fds[2];
  if (msg_pair(fds, 60) != 0) return perror("socketpair"), 2;
  pid_t child = fork();
  if (child < 0) return perror("fork"), 2;
  int role = child == 0;
  close(fds[!role]);
  if (role == 1) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    watchdog_arm(170, "ipc_reach B");
    return run_owner(fds[1], kind, mib << 20);
  }
  watchdog_arm(170, "ipc_reach A");
  int rc = run_measurer(fds[0], kind, mib, reps);
  int st = 0;
  waitpid(child, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    printf("FAILED: process B ended with status 0x%x\n", st);
    return 2;
  }
  return rc;
}
