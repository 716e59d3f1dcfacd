/* A rank process killed while its peers' kernels wait for it. Three rank processes on GPU 0 (forked by the
 * parent before anyone touches CUDA) run one device all-reduce together, then a second one: rank 0 launches it and
 * its kernel spins for the others; the victim, rank 2, either launches it too and is killed while its kernel spins
 * (`mid`: only without MPS, where a client's death leaves the others' contexts alone; under MPS it takes every
 * client down, docs/gpu.md) or is killed before it launches (`idle`); rank 1 launches only after the death.
 * Checked: rank 0's kernel was still spinning at the kill and ends within 5 s of it; rank 1's call ends within 5 s;
 * both ranks' ncclCommGetAsyncError report an error naming rank 2; ncclCommAbort returns; the survivors exit 0.
 * mid and idle keep buffers outside windows off the meetings (DCCL_LAZY_MAP_BYTES=-1), so the kernels wait;
 * `meeting` (idle with DCCL_LAZY_MAP_BYTES=0): rank 0's host call waits in the meeting of buffers mapped on first
 * use for ranks 1 and 2, and the death ends it, with the same checks.
 * Usage: gpu_peer_death mid|idle|meeting   (run under tests/cuda/with_mps.sh [--off])
 * Exit codes: 0 all passed, 1 a failure, 77 no usable GPU. */
#include <cuda_runtime.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dccl.h"
#include "fault_harness.h"
#include "gpu_rank.h"

#define NRANKS 3
#define VICTIM 2
#define COUNT ((size_t)1 << 20)
#define BOUND_S 5.0

struct shared {
  ncclUniqueId id;
  int mid;                       /* the victim launches before it is killed */
  volatile int ready[NRANKS];    /* 1: first all-reduce done and checked; -1: failed */
  volatile int calling[NRANKS];  /* the second all-reduce is being called */
  volatile int launched[NRANKS]; /* the second all-reduce was called (the victim: or skipped, in idle mode) */
  volatile int late_go;          /* the parent lets rank 1 launch */
  volatile double launch_at[NRANKS], done_at[NRANKS], abort_s[NRANKS];
  volatile int async_error[NRANKS];
  char text[NRANKS][512];
  char cuda_text[NRANKS][128];
};

static int wait_flag(volatile int *flag, double timeout_s) {
  double end = fh_now() + timeout_s;
  while (*flag == 0 && fh_now() < end) usleep(1000);
  return *flag;
}

static int rank_main(void *arg, int rank) {
  struct shared *sh = arg;
  ncclComm_t comm;
  int setup = gpu_rank_comm(&comm, NRANKS, sh->id, rank);
  if (setup) return setup;
  float *buf, *host = malloc(COUNT * sizeof(float));
  cudaStream_t s;
  if (!host || cudaMalloc((void **)&buf, COUNT * sizeof(float)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
    return 3;
  fh_fill(host, COUNT, rank, 0);
  cudaMemcpy(buf, host, COUNT * sizeof(float), cudaMemcpyHostToDevice);
  int ok = ncclAllReduce(buf, buf, COUNT, ncclFloat32, ncclSum, comm, s) == ncclSuccess &&
           cudaStreamSynchronize(s) == cudaSuccess &&
           cudaMemcpy(host, buf, COUNT * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess &&
           fh_check_sum(host, COUNT, NRANKS, 0, NULL) == 0;
  sh->ready[rank] = ok ? 1 : -1;
  if (!ok) return 4;
  for (int r = 0; r < NRANKS; r++)
    if (wait_flag(&sh->ready[r], 60) != 1) return 4;

  if (rank == VICTIM) {
    if (sh->mid) ncclAllReduce(buf, buf, COUNT, ncclFloat32, ncclSum, comm, s);
    sh->launched[rank] = 1;
    for (;;) pause(); /* until the parent kills it */
  }
  if (rank == 1 && !wait_flag(&sh->late_go, 60)) return 5;
  sh->launch_at[rank] = fh_now();
  sh->calling[rank] = 1;
  ncclResult_t call = ncclAllReduce(buf, buf, COUNT, ncclFloat32, ncclSum, comm, s);
  sh->launched[rank] = 1;
  cudaError_t e = cudaErrorNotReady;
  while (call == ncclSuccess && (e = cudaStreamQuery(s)) == cudaErrorNotReady && fh_now() < sh->launch_at[rank] + 60)
    usleep(200);
  sh->done_at[rank] = fh_now();
  snprintf(sh->cuda_text[rank], sizeof(sh->cuda_text[rank]), "%s",
           call != ncclSuccess ? "the call returned an error" : cudaGetErrorString(e));
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  sh->async_error[rank] = (int)async;
  fh_copy_text(sh->text[rank], sizeof(sh->text[rank]), ncclGetLastError(comm));
  double t0 = fh_now();
  ncclCommAbort(comm);
  sh->abort_s[rank] = fh_now() - t0;
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc != 2 || (strcmp(argv[1], "mid") && strcmp(argv[1], "idle") && strcmp(argv[1], "meeting"))) {
    fprintf(stderr, "usage: gpu_peer_death mid|idle|meeting\n");
    return 2;
  }
  /* No CUDA in the parent: its children fork from it. The driver's device list answers without a context. */
  if (system("nvidia-smi -L > /dev/null 2>&1") != 0) {
    printf("SKIP: no usable GPU\n");
    return 77;
  }
  struct shared *sh = fh_shared_alloc(sizeof(*sh));
  sh->mid = !strcmp(argv[1], "mid");
  setenv("DCCL_LAZY_MAP_BYTES", strcmp(argv[1], "meeting") ? "-1" : "0", 1); /* before the ranks start */
  if (fh_unique_id(&sh->id) != ncclSuccess) return 1;
  pid_t pids[NRANKS];
  for (int r = 0; r < NRANKS; r++) pids[r] = fh_spawn(rank_main, sh, r);
  /* Rank 0's call returns at once, or (meeting) waits in it for the others. */
  int launched = wait_flag(&sh->calling[0], 120) && wait_flag(&sh->launched[VICTIM], 10);
  FH_EXPECT(launched, "ranks 0 and %d did not reach the second all-reduce", VICTIM);
  if (launched) {
    fh_sleep(0.5); /* rank 0's kernel (and the victim's, mid) spin by now */
    FH_EXPECT(sh->done_at[0] == 0, "rank 0's all-reduce ended before rank %d died (%s)", VICTIM, sh->cuda_text[0]);
    double kill_at = fh_now();
    kill(pids[VICTIM], SIGKILL);
    fh_sleep(0.5);
    sh->late_go = 1;
    int status[NRANKS];
    fh_wait_until(pids, NRANKS, fh_now() + 90, status, NULL);
    for (int r = 0; r < NRANKS; r++) {
      if (r == VICTIM) continue;
      char sbuf[64];
      double start = r == 0 ? kill_at : sh->launch_at[r], took = sh->done_at[r] - start;
      FH_EXPECT(fh_status_ok(status[r]), "rank %d: %s", r, fh_status_str(status[r], sbuf, sizeof(sbuf)));
      FH_EXPECT(sh->done_at[r] > 0 && took <= BOUND_S, "rank %d's all-reduce took %.2f s after %s (bound %.0f s)", r,
                took, r == 0 ? "the kill" : "its call", BOUND_S);
      FH_EXPECT(sh->async_error[r] != ncclSuccess && fh_text_names_rank(sh->text[r], VICTIM),
                "rank %d: ncclCommGetAsyncError %d, \"%s\" does not name rank %d", r, sh->async_error[r], sh->text[r],
                VICTIM);
      printf("rank %d: the all-reduce ended %.3f s after %s (stream: %s); async error %d: %s; abort took %.3f s\n", r,
             took, r == 0 ? "the kill" : "its call", sh->cuda_text[r], sh->async_error[r], sh->text[r], sh->abort_s[r]);
    }
  } else {
    int status[NRANKS];
    for (int r = 0; r < NRANKS; r++) kill(pids[r], SIGKILL);
    fh_wait_until(pids, NRANKS, fh_now() + 10, status, NULL);
  }
  printf("gpu_peer_death %s: %s\n", argv[1], fh_failures ? "FAILED" : "passed");
  return fh_failures ? 1 : 0;
}
