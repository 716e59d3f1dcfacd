/* Invalid arguments through the public API: every bad call returns ncclInvalidArgument (ncclInvalidUsage where
 * NCCL documents it) with a non-empty reason from ncclGetLastError, never crashes, and leaves the communicator
 * working: a correct all-reduce succeeds after each bad call, and ncclCommGetAsyncError still reports success.
 *
 * Two ranks, forked from this process, run the same list of calls so they stay in step. Linked to the static
 * library only to clear the last-error text before each call (dccl_clear_error), so a reason left over from an
 * earlier call cannot pass for the reason of this one. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dccl.h"
#include "fault_harness.h"
#include "util/error.h"

#define NRANKS 2
#define COUNT 1024

/* What each rank is doing, so the parent can say where a crashed or stuck rank was. */
struct args_shared {
  ncclUniqueId id;       /* the communicator the ranks use */
  ncclUniqueId spare_id; /* for init calls that must fail before contacting anyone */
  int step[NRANKS];
  char step_name[NRANKS][160];
  int checks[NRANKS];
};

struct rank_ctx {
  struct args_shared *sh;
  int rank;
  ncclComm_t comm;
  float *send, *recv;
  int iter;
};

static void step_begin(struct rank_ctx *c, const char *name) {
  c->sh->step[c->rank]++;
  fh_copy_text(c->sh->step_name[c->rank], sizeof c->sh->step_name[0], name);
}

/* A correct all-reduce must still succeed, with the right result, and the communicator must not be poisoned. */
static void verify_comm(struct rank_ctx *c, const char *after) {
  c->iter++;
  fh_fill(c->send, COUNT, c->rank, c->iter);
  memset(c->recv, 0, COUNT * sizeof(float));
  ncclResult_t rc = ncclAllReduce(c->send, c->recv, COUNT, ncclFloat, ncclSum, c->comm, NULL);
  if (rc != ncclSuccess) {
    FH_FAIL("rank %d: all-reduce after `%s` returned %s (%s)", c->rank, after, ncclGetErrorString(rc),
            ncclGetLastError(NULL));
    return;
  }
  size_t first = 0, bad = fh_check_sum(c->recv, COUNT, NRANKS, c->iter, &first);
  FH_EXPECT(bad == 0, "rank %d: all-reduce after `%s`: %zu wrong elements (first [%zu] = %g)", c->rank, after, bad,
            first, (double)c->recv[first]);
  ncclResult_t async = ncclInProgress;
  rc = ncclCommGetAsyncError(c->comm, &async);
  FH_EXPECT(rc == ncclSuccess && async == ncclSuccess,
            "rank %d: after `%s` ncclCommGetAsyncError returned %s, async error %s", c->rank, after,
            ncclGetErrorString(rc), ncclGetErrorString(async));
}

static void check_result(struct rank_ctx *c, const char *what, ncclResult_t got, ncclResult_t want, int check_text) {
  c->sh->checks[c->rank]++;
  if (got != want) {
    FH_FAIL("rank %d: `%s` returned %s (%d), want %s", c->rank, what, ncclGetErrorString(got), (int)got,
            ncclGetErrorString(want));
    return;
  }
  if (!check_text || want == ncclSuccess) return;
  const char *text = ncclGetLastError(NULL);
  FH_EXPECT(text && text[0], "rank %d: `%s` returned %s but ncclGetLastError(NULL) is empty", c->rank, what,
            ncclGetErrorString(got));
  if (c->comm) {
    const char *comm_text = ncclGetLastError(c->comm);
    FH_EXPECT(comm_text && comm_text[0], "rank %d: `%s` returned %s but ncclGetLastError(comm) is empty", c->rank,
              what, ncclGetErrorString(got));
  }
  if (c->rank == 0) fh_note("ok: %-90s -> %s: %s", what, ncclGetErrorString(got), text ? text : "(null)");
}

/* Runs one call with the error text cleared first, checks its result and reason, then checks the comm. */
#define EXPECT_RC(c, want, call)                         \
  do {                                                   \
    step_begin((c), #call);                              \
    dccl_clear_error();                                  \
    ncclResult_t got_ = (call);                          \
    check_result((c), #call, got_, (want), 1);           \
    verify_comm((c), #call);                             \
  } while (0)

/* NULL-handle calls whose result NCCL defines as a no-op success; DCCL may refuse them instead. Either way they
 * must return at once without crashing. */
#define EXPECT_SUCCESS_OR_INVALID(c, call)                                                                        \
  do {                                                                                                           \
    step_begin((c), #call);                                                                                      \
    ncclResult_t got_ = (call);                                                                                  \
    FH_EXPECT(got_ == ncclSuccess || got_ == ncclInvalidArgument, "rank %d: `%s` returned %s", (c)->rank, #call, \
              ncclGetErrorString(got_));                                                                         \
    verify_comm((c), #call);                                                                                     \
  } while (0)

static void check_premulsum(struct rank_ctx *c) {
  ncclRedOp_t op;
  float scalar = 3.0f;
  step_begin(c, "ncclRedOpCreatePreMulSum");
  ncclResult_t rc = ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, c->comm);
  check_result(c, "ncclRedOpCreatePreMulSum(&op, &3.0f, ncclFloat, host immediate, comm)", rc, ncclSuccess, 0);
  if (rc != ncclSuccess) return;
  /* The op works while it exists: sum of 3 * x over the ranks. */
  step_begin(c, "all-reduce with the premulsum op");
  fh_fill(c->send, COUNT, c->rank, 0);
  rc = ncclAllReduce(c->send, c->recv, COUNT, ncclFloat, op, c->comm, NULL);
  check_result(c, "ncclAllReduce(premulsum op)", rc, ncclSuccess, 0);
  if (rc == ncclSuccess) {
    size_t bad = 0;
    for (size_t i = 0; i < COUNT; i++) {
      float want = 3.0f * (float)(NRANKS * (NRANKS + 1) / 2) * (float)(i % 7 + 1);
      if (c->recv[i] != want) bad++;
    }
    FH_EXPECT(bad == 0, "rank %d: premulsum all-reduce: %zu wrong elements", c->rank, bad);
  }
  step_begin(c, "ncclRedOpDestroy");
  rc = ncclRedOpDestroy(op, c->comm);
  check_result(c, "ncclRedOpDestroy(op, comm)", rc, ncclSuccess, 0);
  EXPECT_RC(c, ncclInvalidArgument, ncclAllReduce(c->send, c->recv, COUNT, ncclFloat, op, c->comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclRedOpDestroy(op, c->comm));
}

static void check_init_args(struct rank_ctx *c) {
  ncclUniqueId id = c->sh->spare_id, zero_id;
  memset(&zero_id, 0, sizeof zero_id);
  ncclComm_t other = NULL;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0x12345678u;
  double t0 = fh_now();
  EXPECT_RC(c, ncclInvalidArgument, ncclCommInitRankConfig(&other, NRANKS, id, c->rank, &config));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommInitRank(NULL, NRANKS, id, c->rank));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommInitRank(&other, NRANKS, id, NRANKS));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommInitRank(&other, NRANKS, id, -1));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommInitRank(&other, 0, id, 0));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommInitRank(&other, NRANKS, zero_id, c->rank));
  EXPECT_RC(c, ncclInvalidArgument, ncclGetUniqueId(NULL));
  double took = fh_now() - t0;
  /* Each refused init must return at once, not after waiting for peers (7 calls plus 7 all-reduces). */
  FH_EXPECT(took < 5.0, "rank %d: the refused init calls took %.2f s", c->rank, took);
}

static int rank_main(void *arg, int rank) {
  struct rank_ctx ctx = {.sh = arg, .rank = rank};
  struct rank_ctx *c = &ctx;
  step_begin(c, "ncclCommInitRank");
  ncclResult_t rc = ncclCommInitRank(&c->comm, NRANKS, c->sh->id, rank);
  if (rc != ncclSuccess) {
    FH_FAIL("rank %d: ncclCommInitRank: %s (%s)", rank, ncclGetErrorString(rc), ncclGetLastError(NULL));
    return 1;
  }
  c->send = calloc(COUNT, sizeof(float));
  c->recv = calloc(COUNT, sizeof(float));
  float *big_send = c->send, *big_recv = c->recv;
  ncclComm_t comm = c->comm;
  verify_comm(c, "ncclCommInitRank");

  /* Buffers. */
  EXPECT_RC(c, ncclInvalidArgument, ncclAllReduce(NULL, big_recv, COUNT, ncclFloat, ncclSum, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclAllReduce(big_send, NULL, COUNT, ncclFloat, ncclSum, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclBroadcast(big_send, NULL, COUNT, ncclFloat, 0, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclAllGather(big_send, NULL, 16, ncclFloat, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclSend(NULL, 16, ncclFloat, 1 - rank, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclRecv(NULL, 16, ncclFloat, 1 - rank, comm, NULL));

  /* Data types. */
  EXPECT_RC(c, ncclInvalidArgument,
            ncclAllReduce(big_send, big_recv, COUNT, (ncclDataType_t)12, ncclSum, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument,
            ncclAllReduce(big_send, big_recv, COUNT, (ncclDataType_t)-1, ncclSum, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclBroadcast(big_send, big_recv, COUNT, (ncclDataType_t)12, 0, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclSend(big_send, 16, (ncclDataType_t)-1, 1 - rank, comm, NULL));

  /* Reduction operators. */
  EXPECT_RC(c, ncclInvalidArgument, ncclAllReduce(big_send, big_recv, COUNT, ncclFloat, (ncclRedOp_t)99, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclAllReduce(big_send, big_recv, COUNT, ncclFloat, ncclNumOps, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclReduce(big_send, big_recv, COUNT, ncclFloat, (ncclRedOp_t)99, 0, comm, NULL));
  check_premulsum(c);
  float scalar = 1.0f;
  ncclRedOp_t op;
  EXPECT_RC(c, ncclInvalidArgument, ncclRedOpDestroy(ncclSum, comm));
  EXPECT_RC(c, ncclInvalidArgument,
            ncclRedOpCreatePreMulSum(NULL, &scalar, ncclFloat, ncclScalarHostImmediate, comm));
  EXPECT_RC(c, ncclInvalidArgument,
            ncclRedOpCreatePreMulSum(&op, &scalar, (ncclDataType_t)12, ncclScalarHostImmediate, comm));
  EXPECT_RC(c, ncclInvalidArgument,
            ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, (ncclScalarResidence_t)7, comm));

  /* Roots. */
  EXPECT_RC(c, ncclInvalidArgument, ncclReduce(big_send, big_recv, COUNT, ncclFloat, ncclSum, -1, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclReduce(big_send, big_recv, COUNT, ncclFloat, ncclSum, NRANKS, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclBroadcast(big_send, big_recv, COUNT, ncclFloat, -1, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclBroadcast(big_send, big_recv, COUNT, ncclFloat, NRANKS, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclBcast(big_recv, COUNT, ncclFloat, NRANKS, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclGather(big_send, big_recv, 16, ncclFloat, -1, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclScatter(big_send, big_recv, 16, ncclFloat, NRANKS, comm, NULL));

  /* Peers. */
  EXPECT_RC(c, ncclInvalidArgument, ncclSend(big_send, 16, ncclFloat, NRANKS, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclSend(big_send, 16, ncclFloat, -1, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclRecv(big_recv, 16, ncclFloat, NRANKS, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclRecv(big_recv, 16, ncclFloat, -1, comm, NULL));

  /* Sizes whose byte count overflows size_t. */
  EXPECT_RC(c, ncclInvalidArgument,
            ncclAllReduce(big_send, big_recv, SIZE_MAX / 2, ncclInt64, ncclSum, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclBroadcast(big_send, big_recv, SIZE_MAX / 4 + 1, ncclFloat, 0, comm, NULL));
  /* The send side fits; the receive side (count * nranks) does not. */
  EXPECT_RC(c, ncclInvalidArgument, ncclAllGather(big_send, big_recv, SIZE_MAX / 2 + 1, ncclInt8, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument,
            ncclReduceScatter(big_send, big_recv, SIZE_MAX / 2 + 1, ncclInt8, ncclSum, comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclSend(big_send, SIZE_MAX / 2, ncclFloat64, 1 - rank, comm, NULL));

  /* The NULL communicator. */
  int value = -7;
  ncclResult_t async;
  ncclComm_t null_comm = NULL;
  EXPECT_RC(c, ncclInvalidArgument, ncclAllReduce(big_send, big_recv, COUNT, ncclFloat, ncclSum, null_comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclBroadcast(big_send, big_recv, COUNT, ncclFloat, 0, null_comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclSend(big_send, 16, ncclFloat, 0, null_comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommCount(null_comm, &value));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommUserRank(null_comm, &value));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommCuDevice(null_comm, &value));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommGetAsyncError(null_comm, &async));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommFinalize(null_comm));
  EXPECT_RC(c, ncclInvalidArgument, ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate,
                                                             null_comm));
  EXPECT_SUCCESS_OR_INVALID(c, ncclCommDestroy(null_comm));
  EXPECT_SUCCESS_OR_INVALID(c, ncclCommAbort(null_comm));
  FH_EXPECT(value == -7, "rank %d: a refused query wrote %d into its output", rank, value);

  /* NULL outputs of queries. */
  EXPECT_RC(c, ncclInvalidArgument, ncclCommCount(comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommUserRank(comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommGetAsyncError(comm, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommSplit(comm, 0, rank, NULL, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclGetVersion(NULL));
  step_begin(c, "ncclGetVersion");
  int version = 0;
  check_result(c, "ncclGetVersion(&version)", ncclGetVersion(&version), ncclSuccess, 0);
  FH_EXPECT(version == NCCL_VERSION_CODE, "ncclGetVersion gave %d, want %d", version, NCCL_VERSION_CODE);

  /* Groups: ncclGroupEnd without ncclGroupStart is a usage error; a bad call inside a group is refused and the
   * group still closes, leaving no group open behind (the next all-reduce runs at once). */
  EXPECT_RC(c, ncclInvalidUsage, ncclGroupEnd());
  step_begin(c, "bad call inside a group");
  check_result(c, "ncclGroupStart()", ncclGroupStart(), ncclSuccess, 0);
  dccl_clear_error();
  check_result(c, "ncclAllReduce(datatype 12) inside a group",
               ncclAllReduce(big_send, big_recv, COUNT, (ncclDataType_t)12, ncclSum, comm, NULL),
               ncclInvalidArgument, 1);
  ncclResult_t end = ncclGroupEnd();
  FH_EXPECT(end == ncclSuccess || end == ncclInvalidArgument,
            "rank %d: ncclGroupEnd after a refused call returned %s", rank, ncclGetErrorString(end));
  verify_comm(c, "a group holding a refused call");

  /* Error strings exist for every code, in range or not. */
  for (int code = 0; code <= ncclNumResults + 1; code++) {
    const char *s = ncclGetErrorString((ncclResult_t)code);
    FH_EXPECT(s && s[0], "ncclGetErrorString(%d) is empty", code);
  }
  FH_EXPECT(ncclGetErrorString((ncclResult_t)-3) != NULL, "ncclGetErrorString(-3) is NULL");

  check_init_args(c);

  /* A made-up handle: the library keeps a registry of live communicators and refuses others without reading
   * them. The bytes are garbage on purpose. */
  uint64_t fake_storage[64];
  memset(fake_storage, 0xa5, sizeof fake_storage);
  ncclComm_t fake = (ncclComm_t)(void *)fake_storage;
  EXPECT_RC(c, ncclInvalidArgument, ncclAllReduce(big_send, big_recv, COUNT, ncclFloat, ncclSum, fake, NULL));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommCount(fake, &value));
  EXPECT_RC(c, ncclInvalidArgument, ncclCommDestroy(fake));

  step_begin(c, "ncclCommDestroy");
  rc = ncclCommDestroy(comm);
  FH_EXPECT(rc == ncclSuccess, "rank %d: ncclCommDestroy: %s (%s)", rank, ncclGetErrorString(rc),
            ncclGetLastError(NULL));

  /* The destroyed handle (safe to pass: the library promises to detect it through its registry without touching
   * the freed memory, see src/core/comm_registry.c; no communicator is created after the destroy, so its address
   * cannot have been reused). There is no communicator left to verify afterwards. */
  c->comm = NULL;
  value = -7;
#define EXPECT_RC_NO_COMM(want, call)              \
  do {                                             \
    step_begin(c, #call);                          \
    dccl_clear_error();                            \
    check_result(c, #call, (call), (want), 1);     \
  } while (0)
  EXPECT_RC_NO_COMM(ncclInvalidArgument, ncclCommCount(comm, &value));
  EXPECT_RC_NO_COMM(ncclInvalidArgument, ncclCommUserRank(comm, &value));
  EXPECT_RC_NO_COMM(ncclInvalidArgument, ncclCommGetAsyncError(comm, &async));
  EXPECT_RC_NO_COMM(ncclInvalidArgument, ncclAllReduce(big_send, big_recv, COUNT, ncclFloat, ncclSum, comm, NULL));
  EXPECT_RC_NO_COMM(ncclInvalidArgument, ncclSend(big_send, 16, ncclFloat, 1 - rank, comm, NULL));
  EXPECT_RC_NO_COMM(ncclInvalidArgument, ncclCommDestroy(comm));
  EXPECT_RC_NO_COMM(ncclInvalidArgument, ncclCommAbort(comm));
#undef EXPECT_RC_NO_COMM
  FH_EXPECT(value == -7, "rank %d: a query on a destroyed communicator wrote %d", rank, value);
  step_begin(c, "done");
  free(big_send);
  free(big_recv);
  return fh_failures ? 1 : 0;
}

int main(void) {
  struct fh_shm_snapshot snap;
  fh_shm_snapshot_take(&snap);
  struct args_shared *sh = fh_shared_alloc(sizeof *sh);
  if (!sh || fh_unique_id(&sh->id) != ncclSuccess || fh_unique_id(&sh->spare_id) != ncclSuccess) return 1;

  double t0 = fh_now();
  pid_t pids[NRANKS];
  for (int r = 0; r < NRANKS; r++) pids[r] = fh_spawn(rank_main, sh, r);
  int status[NRANKS], killed[NRANKS];
  fh_wait_until(pids, NRANKS, t0 + 60.0, status, killed);
  for (int r = 0; r < NRANKS; r++) {
    char buf[96];
    if (killed[r])
      FH_FAIL("rank %d hung for 60 s at step %d: %s", r, sh->step[r], sh->step_name[r]);
    else if (!fh_status_ok(status[r]))
      FH_FAIL("rank %d ended with %s at step %d: %s", r, fh_status_str(status[r], buf, sizeof buf), sh->step[r],
              sh->step_name[r]);
  }
  fh_shm_check_leaks(&snap, "after the invalid-argument test");
  fh_note("invalid arguments: %d checks on rank 0, %d on rank 1, %.2f s, %s", sh->checks[0], sh->checks[1],
          fh_now() - t0, fh_failures ? "FAILED" : "passed");
  return fh_failures ? 1 : 0;
}
