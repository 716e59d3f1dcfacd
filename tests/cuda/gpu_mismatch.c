/* Mismatched calls that no kernel sees whole. Two rank processes on GPU 0 (forked before anyone touches CUDA) call
 * one collective each that differs between them. On the copy-engine path (DCCL_CE=1, ce_collectives.h) each fits
 * one round, so both streams run to the end: `count`, an all-reduce of 1000 floats on rank 0 and 1003 on rank 1;
 * `root`, a broadcast of 1000 floats from root 0 on rank 0 and from root 1 on rank 1 (each thinks itself the root).
 * `meeting` (MPS, no copy engines): an all-reduce of 100000 floats on rank 0, large enough that its host call waits
 * in the meeting of buffers mapped on first use, and of 1000 on rank 1, whose kernel waits for rank 0's: only the
 * stall report (DCCL_STALL_REPORT_MS=1000) sees both. Checked: both calls end (the stream done, or the call
 * returned an error) within 10 s, and each rank's ncclCommGetAsyncError reports ncclInvalidUsage with "mismatched
 * calls" naming the other rank and both calls' differing part; ncclCommAbort returns.
 * `registered` (MPS, no copy engines): both ranks register their buffer (ncclCommRegister) and all-reduce 1000
 * floats, which meets though small and must give the sum; then rank 1 deregisters and both call again: rank 0's
 * host call waits in the meeting, rank 1's kernel for rank 0's, the same call on both, and the stall report must
 * fail both with "mismatched buffers" naming the other rank (NCCL's rule: registered buffers on every rank or none).
 * `protocols` (MPS, no copy engines): an all-reduce of 1000 floats on rank 0 (one LL step, 4000 bytes) and of 1100
 * on rank 1 (bulk): rank 0's kernel polls LL lines that never come while a bulk slot sits beside them, rank 1's finds
 * `tail` moved and no bulk slot; each must name the mismatch from the other's slot, neither wait.
 * `sends` (MPS, no copy engines): rank 0 sends 500 floats to rank 1, which receives 1000, both one LL step each: rank
 * 1's kernel polls lines rank 0 never writes, and must see from the slot's header that it ended and report the
 * counts; rank 0's send completes and nothing is asked of it.
 * `tiny`, `tinyll`, `tinybulk` (MPS, no copy engines): an all-reduce of 20 floats on rank 0, which runs on the LL
 * kernel's tiny path (dev_tiny.cuh), against 30 on rank 1 (the tiny path too), 100 (the LL path) or 1100 (bulk):
 * each must name the mismatch from the other's slot, neither wait.
 * Usage: gpu_mismatch count|root|meeting|registered|protocols|sends|tiny|tinyll|tinybulk
 *        (count, root: with DCCL_CE=1; under tests/cuda/with_mps.sh [--off])
 * Exit codes: 0 passed, 1 a failure, 77 no usable GPU. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dccl.h"
#include "fault_harness.h"
#include "gpu_rank.h"

#define NRANKS 2
#define BOUND_S 10.0

struct shared {
  ncclUniqueId id;
  int roots;      /* the `root` case */
  int meeting;    /* the `meeting` case */
  int registered; /* the `registered` case */
  int protocols;  /* the `protocols` case */
  int sends;      /* the `sends` case */
  size_t tiny[NRANKS]; /* the tiny cases: each rank's count */
  volatile int first_ok[NRANKS];
  volatile double took[NRANKS];
  volatile int async_error[NRANKS];
  char text[NRANKS][512];
};

static int rank_main(void *arg, int rank) {
  struct shared *sh = arg;
  ncclComm_t comm;
  int setup = gpu_rank_comm(&comm, NRANKS, sh->id, rank);
  if (setup) return setup;
  size_t count = sh->tiny[0]     ? sh->tiny[rank]
                 : sh->meeting   ? (rank == 0 ? 100000 : 1000)
                 : sh->protocols ? (rank == 0 ? 1000 : 1100)
                 : rank == 0 || sh->roots || sh->registered ? 1000
                                                            : 1003;
  float *buf;
  cudaStream_t s;
  if (cudaMalloc((void **)&buf, 100000 * sizeof(float)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
    return 3;
  if (sh->registered) { /* first every rank registered: the sum of 1 and 2 */
    void *reg;
    float host[1000];
    for (int i = 0; i < 1000; i++) host[i] = (float)(rank + 1);
    int ok = ncclCommRegister(comm, buf, 100000 * sizeof(float), &reg) == ncclSuccess &&
             cudaMemcpy(buf, host, sizeof(host), cudaMemcpyHostToDevice) == cudaSuccess &&
             ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, comm, s) == ncclSuccess &&
             cudaStreamSynchronize(s) == cudaSuccess &&
             cudaMemcpy(host, buf, sizeof(host), cudaMemcpyDeviceToHost) == cudaSuccess;
    for (int i = 0; ok && i < 1000; i++) ok = host[i] == 3.0f;
    sh->first_ok[rank] = ok;
    if (rank == 1 && ncclCommDeregister(comm, reg) != ncclSuccess) sh->first_ok[rank] = 0;
  }
  double t0 = fh_now();
  ncclResult_t call = sh->sends   ? (rank == 0 ? ncclSend(buf, 500, ncclFloat32, 1, comm, s)
                                                : ncclRecv(buf, 1000, ncclFloat32, 0, comm, s))
                      : sh->roots ? ncclBroadcast(buf, buf, count, ncclFloat32, rank, comm, s)
                                  : ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, s);
  cudaError_t e = cudaErrorNotReady;
  while (call == ncclSuccess && (e = cudaStreamQuery(s)) == cudaErrorNotReady && fh_now() < t0 + 60) usleep(200);
  ncclResult_t async = ncclSuccess;
  for (double end = fh_now() + 5; async == ncclSuccess && fh_now() < end; usleep(1000))
    ncclCommGetAsyncError(comm, &async); /* the kernel's record may be read a moment after the stream ends */
  sh->took[rank] = e == cudaSuccess || call != ncclSuccess ? fh_now() - t0 : -1;
  sh->async_error[rank] = (int)async;
  fh_copy_text(sh->text[rank], sizeof(sh->text[rank]), ncclGetLastError(comm));
  ncclCommAbort(comm);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  static const char *tiny_cases[] = {"tiny", "tinyll", "tinybulk"};
  static const size_t tiny_theirs[] = {30, 100, 1100};
  int tiny = -1;
  for (int i = 0; i < 3; i++)
    if (argc == 2 && !strcmp(argv[1], tiny_cases[i])) tiny = i;
  if (argc != 2 || (strcmp(argv[1], "count") && strcmp(argv[1], "root") && strcmp(argv[1], "meeting") &&
                    strcmp(argv[1], "registered") && strcmp(argv[1], "protocols") && strcmp(argv[1], "sends") &&
                    tiny < 0)) {
    fprintf(stderr, "usage: gpu_mismatch count|root|meeting|registered|protocols|sends|tiny|tinyll|tinybulk\n");
    return 2;
  }
  if (system("nvidia-smi -L > /dev/null 2>&1") != 0) {
    printf("SKIP: no usable GPU\n");
    return 77;
  }
  struct shared *sh = fh_shared_alloc(sizeof(*sh));
  if (fh_unique_id(&sh->id) != ncclSuccess) return 1;
  sh->roots = !strcmp(argv[1], "root");
  sh->meeting = !strcmp(argv[1], "meeting");
  sh->registered = !strcmp(argv[1], "registered");
  sh->protocols = !strcmp(argv[1], "protocols");
  sh->sends = !strcmp(argv[1], "sends");
  char tiny_theirs_text[16];
  if (tiny >= 0) {
    sh->tiny[0] = 20;
    sh->tiny[1] = tiny_theirs[tiny];
    snprintf(tiny_theirs_text, sizeof(tiny_theirs_text), "%zu ", sh->tiny[1]);
  }
  const char *ours = tiny >= 0     ? "20 "
                     : sh->roots   ? "root 0"
                     : sh->meeting ? "100000"
                     : sh->protocols ? "1000 "
                     : sh->sends     ? "4000 bytes"
                                     : "1000";
  const char *theirs = tiny >= 0        ? tiny_theirs_text
                       : sh->roots      ? "root 1"
                       : sh->meeting    ? "1000 "
                       : sh->registered ? "1000"
                       : sh->protocols  ? "1100 "
                       : sh->sends      ? "2000 bytes"
                                        : "1003";
  const char *what = sh->registered ? "mismatched buffers" : "mismatched calls";
  int status[NRANKS], killed[NRANKS];
  fh_run_ranks(rank_main, sh, NRANKS, 120, status, killed);
  for (int r = 0; r < NRANKS; r++) {
    char sbuf[64];
    FH_EXPECT(fh_status_ok(status[r]), "rank %d: %s", r, fh_status_str(status[r], sbuf, sizeof(sbuf)));
    FH_EXPECT(sh->took[r] >= 0 && sh->took[r] <= BOUND_S, "rank %d: its stream took %.2f s (bound %.0f s)", r,
              sh->took[r], BOUND_S);
    FH_EXPECT(!sh->registered || sh->first_ok[r], "rank %d: the all-reduce on registered buffers (1000 floats)", r);
    if (sh->sends && r == 0) { /* the sender: its send completed; the receiver's report is what counts */
      printf("rank 0: stream done %.3f s after the call; async error %d\n", sh->took[r], sh->async_error[r]);
      continue;
    }
    FH_EXPECT(sh->async_error[r] == ncclInvalidUsage && strstr(sh->text[r], what) &&
                  fh_text_names_rank(sh->text[r], 1 - r) && strstr(sh->text[r], ours) && strstr(sh->text[r], theirs),
              "rank %d: ncclCommGetAsyncError %d, \"%s\": want ncclInvalidUsage, \"%s\"", r, sh->async_error[r],
              sh->text[r], what);
    printf("rank %d: stream done %.3f s after the call; async error %d: %s\n", r, sh->took[r], sh->async_error[r],
           sh->text[r]);
  }
  printf("gpu_mismatch %s: %s\n", argv[1], fh_failures ? "FAILED" : "passed");
  return fh_failures ? 1 : 0;
}
