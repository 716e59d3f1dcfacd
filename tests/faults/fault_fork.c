/* fork() with a live communicator. Two rank processes share a communicator A; each forks a child while A is in
 * use. In the child every call on A returns ncclInvalidUsage with a reason (the child must neither use nor tear
 * down its parent's links); the child then builds a communicator of its own with the other rank's child, from a
 * unique id the top process made before any fork, checks an all-reduce on it, and exits. Meanwhile and afterwards
 * the parents' communicator A keeps working.
 *
 * Usage: fault_fork shm|socket */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dccl.h"
#include "fault_harness.h"

#define NRANKS 2
#define COUNT 2048
#define CONCURRENT_ALLREDUCES 20 /* the parents' all-reduces while their children run */

struct fork_shared {
  ncclUniqueId id_parents;  /* communicator A */
  ncclUniqueId id_children; /* the children's own communicator */
  int child_checks[NRANKS];
  int parent_allreduces[NRANKS];
  char parent_step[NRANKS][128];
  char child_step[NRANKS][128];
};

static int allreduce_ok(ncclComm_t comm, int rank, int nranks, int iter, size_t count, const char *who) {
  float *send = malloc(count * sizeof(float)), *recv = calloc(count, sizeof(float));
  if (!send || !recv) return 0;
  fh_fill(send, count, rank, iter);
  ncclResult_t rc = ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, NULL);
  size_t first = 0, bad = rc == ncclSuccess ? fh_check_sum(recv, count, nranks, iter, &first) : 0;
  if (rc != ncclSuccess)
    FH_FAIL("%s rank %d: all-reduce #%d returned %s: %s", who, rank, iter, ncclGetErrorString(rc),
            ncclGetLastError(NULL));
  else if (bad)
    FH_FAIL("%s rank %d: all-reduce #%d: %zu wrong elements (first [%zu] = %g)", who, rank, iter, bad, first,
            (double)recv[first]);
  free(send);
  free(recv);
  return rc == ncclSuccess && bad == 0;
}

/* Checks that `call` on the parent's communicator is refused with ncclInvalidUsage and a reason. */
#define EXPECT_REFUSED(sh, rank, call)                                                                         \
  do {                                                                                                         \
    fh_copy_text((sh)->child_step[rank], sizeof (sh)->child_step[0], #call);                                   \
    ncclResult_t got_ = (call);                                                                                \
    const char *text_ = ncclGetLastError(NULL);                                                                \
    (sh)->child_checks[rank]++;                                                                                \
    FH_EXPECT(got_ == ncclInvalidUsage, "forked child of rank %d: `%s` on the parent's communicator returned %s", \
              rank, #call, ncclGetErrorString(got_));                                                          \
    FH_EXPECT(got_ == ncclSuccess || (text_ && text_[0]), "forked child of rank %d: `%s`: empty reason", rank,    \
              #call);                                                                                          \
  } while (0)

static ncclComm_t parent_comm; /* A, as the child inherits it */

static int child_main(void *arg, int rank) {
  struct fork_shared *sh = arg;
  ncclComm_t old = parent_comm;
  float buf[64] = {0}, out[64];
  int value = -1;
  ncclResult_t async;
  EXPECT_REFUSED(sh, rank, ncclAllReduce(buf, out, 64, ncclFloat, ncclSum, old, NULL));
  EXPECT_REFUSED(sh, rank, ncclBroadcast(buf, out, 64, ncclFloat, 0, old, NULL));
  EXPECT_REFUSED(sh, rank, ncclSend(buf, 64, ncclFloat, 1 - rank, old, NULL));
  EXPECT_REFUSED(sh, rank, ncclRecv(out, 64, ncclFloat, 1 - rank, old, NULL));
  EXPECT_REFUSED(sh, rank, ncclCommCount(old, &value));
  EXPECT_REFUSED(sh, rank, ncclCommUserRank(old, &value));
  EXPECT_REFUSED(sh, rank, ncclCommGetAsyncError(old, &async));
  ncclRedOp_t op;
  float scalar = 2.0f;
  EXPECT_REFUSED(sh, rank, ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, old));
  ncclComm_t split = NULL;
  EXPECT_REFUSED(sh, rank, ncclCommSplit(old, 0, rank, &split, NULL));
  /* Inside a group the refusal comes at the call or at ncclGroupEnd; either way nothing reaches the peers. */
  fh_copy_text(sh->child_step[rank], sizeof sh->child_step[0], "group with an all-reduce on the old comm");
  ncclResult_t start = ncclGroupStart();
  ncclResult_t in_group = ncclAllReduce(buf, out, 64, ncclFloat, ncclSum, old, NULL);
  ncclResult_t end = ncclGroupEnd();
  FH_EXPECT(start == ncclSuccess, "forked child: ncclGroupStart returned %s", ncclGetErrorString(start));
  FH_EXPECT(in_group == ncclInvalidUsage || end == ncclInvalidUsage,
            "forked child of rank %d: all-reduce on the parent's communicator inside a group returned %s, "
            "ncclGroupEnd %s", rank, ncclGetErrorString(in_group), ncclGetErrorString(end));
  EXPECT_REFUSED(sh, rank, ncclCommFinalize(old));
  EXPECT_REFUSED(sh, rank, ncclCommDestroy(old));
  EXPECT_REFUSED(sh, rank, ncclCommAbort(old));
  FH_EXPECT(value == -1, "forked child: a refused query wrote %d", value);

  /* A communicator of the child's own, with the other rank's child. */
  fh_copy_text(sh->child_step[rank], sizeof sh->child_step[0], "ncclCommInitRank (children)");
  ncclComm_t mine;
  ncclResult_t rc = ncclCommInitRank(&mine, NRANKS, sh->id_children, rank);
  if (rc != ncclSuccess) {
    FH_FAIL("forked child of rank %d: ncclCommInitRank with the pre-fork id: %s (%s)", rank, ncclGetErrorString(rc),
            ncclGetLastError(NULL));
    return 1;
  }
  int count = 0;
  rc = ncclCommCount(mine, &count);
  FH_EXPECT(rc == ncclSuccess && count == NRANKS, "forked child: ncclCommCount gave %s, %d", ncclGetErrorString(rc),
            count);
  fh_copy_text(sh->child_step[rank], sizeof sh->child_step[0], "all-reduce (children)");
  allreduce_ok(mine, rank, NRANKS, 7, COUNT, "forked child of");
  allreduce_ok(mine, rank, NRANKS, 8, 100000, "forked child of");
  fh_copy_text(sh->child_step[rank], sizeof sh->child_step[0], "ncclCommDestroy (children)");
  rc = ncclCommDestroy(mine);
  FH_EXPECT(rc == ncclSuccess, "forked child: ncclCommDestroy: %s", ncclGetErrorString(rc));
  fh_copy_text(sh->child_step[rank], sizeof sh->child_step[0], "exit");
  return fh_failures ? 1 : 0; /* exit(): atexit handlers run, as in a real program */
}

static int rank_main(void *arg, int rank) {
  struct fork_shared *sh = arg;
  fh_copy_text(sh->parent_step[rank], sizeof sh->parent_step[0], "ncclCommInitRank");
  ncclResult_t rc = ncclCommInitRank(&parent_comm, NRANKS, sh->id_parents, rank);
  if (rc != ncclSuccess) {
    FH_FAIL("rank %d: ncclCommInitRank: %s (%s)", rank, ncclGetErrorString(rc), ncclGetLastError(NULL));
    return 1;
  }
  int iter = 0;
  fh_copy_text(sh->parent_step[rank], sizeof sh->parent_step[0], "all-reduce before fork");
  allreduce_ok(parent_comm, rank, NRANKS, iter++, COUNT, "parent");

  pid_t child = fh_spawn(child_main, sh, rank);
  if (child < 0) return 1;
  /* Keep using A while the child pokes at its copy. */
  fh_copy_text(sh->parent_step[rank], sizeof sh->parent_step[0], "all-reduces while the child runs");
  for (int i = 0; i < CONCURRENT_ALLREDUCES; i++) {
    if (!allreduce_ok(parent_comm, rank, NRANKS, iter++, (size_t)(1 + i * 997), "parent")) break;
    sh->parent_allreduces[rank]++;
  }
  fh_copy_text(sh->parent_step[rank], sizeof sh->parent_step[0], "waiting for the child");
  int status;
  char buf[96];
  if (fh_wait_one(child, fh_now() + 30.0, &status))
    FH_FAIL("rank %d: forked child hung for 30 s at: %s", rank, sh->child_step[rank]);
  else
    FH_EXPECT(fh_status_ok(status), "rank %d: forked child ended with %s at: %s", rank,
              fh_status_str(status, buf, sizeof buf), sh->child_step[rank]);

  /* The child has exited: nothing it did (or its exit) may have broken A. */
  fh_copy_text(sh->parent_step[rank], sizeof sh->parent_step[0], "all-reduces after the child exited");
  allreduce_ok(parent_comm, rank, NRANKS, iter++, COUNT, "parent (after child exit)");
  allreduce_ok(parent_comm, rank, NRANKS, iter++, 100000, "parent (after child exit)");
  int count = 0;
  rc = ncclCommCount(parent_comm, &count);
  FH_EXPECT(rc == ncclSuccess && count == NRANKS, "rank %d: ncclCommCount after the child: %s, %d", rank,
            ncclGetErrorString(rc), count);
  ncclResult_t async = ncclInProgress;
  rc = ncclCommGetAsyncError(parent_comm, &async);
  FH_EXPECT(rc == ncclSuccess && async == ncclSuccess, "rank %d: async error after the child: %s / %s", rank,
            ncclGetErrorString(rc), ncclGetErrorString(async));
  fh_copy_text(sh->parent_step[rank], sizeof sh->parent_step[0], "ncclCommDestroy");
  rc = ncclCommDestroy(parent_comm);
  FH_EXPECT(rc == ncclSuccess, "rank %d: ncclCommDestroy: %s (%s)", rank, ncclGetErrorString(rc),
            ncclGetLastError(NULL));
  fh_copy_text(sh->parent_step[rank], sizeof sh->parent_step[0], "done");
  return fh_failures ? 1 : 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "shm";
  if (strcmp(mode, "shm") != 0 && strcmp(mode, "socket") != 0) {
    fprintf(stderr, "usage: %s shm|socket\n", argv[0]);
    return 2;
  }
  setenv("DCCL_TRANSPORT", mode, 1); /* before the library reads its parameters */
  struct fh_shm_snapshot snap;
  fh_shm_snapshot_take(&snap);
  struct fork_shared *sh = fh_shared_alloc(sizeof *sh);
  if (!sh || fh_unique_id(&sh->id_parents) != ncclSuccess || fh_unique_id(&sh->id_children) != ncclSuccess)
    return 1;
  double t0 = fh_now();
  pid_t pids[NRANKS];
  for (int r = 0; r < NRANKS; r++) pids[r] = fh_spawn(rank_main, sh, r);
  int status[NRANKS], killed[NRANKS];
  fh_wait_until(pids, NRANKS, t0 + 60.0, status, killed);
  for (int r = 0; r < NRANKS; r++) {
    char buf[96];
    if (killed[r])
      FH_FAIL("rank %d hung for 60 s at: %s (its child at: %s)", r, sh->parent_step[r], sh->child_step[r]);
    else if (!fh_status_ok(status[r]))
      FH_FAIL("rank %d ended with %s at: %s", r, fh_status_str(status[r], buf, sizeof buf), sh->parent_step[r]);
  }
  fh_shm_check_leaks(&snap, "after the fork test");
  fh_note("fork, %s: children made %d and %d refused calls; parents ran %d and %d all-reduces meanwhile; %.2f s, %s",
          mode, sh->child_checks[0], sh->child_checks[1], sh->parent_allreduces[0], sh->parent_allreduces[1],
          fh_now() - t0, fh_failures ? "FAILED" : "passed");
  return fh_failures ? 1 : 0;
}
