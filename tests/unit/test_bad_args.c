/* Bad input gets a clear error and loses nothing: every collective and point-to-point call with a bad argument is
 * refused at the call with ncclInvalidArgument (ncclInvalidUsage where the call is valid but the state is not),
 * ncclGetLastError names the argument, and the communicators then run correct operations, inside a group that
 * held a refused call too. Two ranks of one process (ncclCommInitAll), host buffers. First, calls with no
 * communicator or a NULL out-parameter. */
#include <stdio.h>
#include <string.h>

#include "dccl.h"
#include "unit_check.h"

#define N 8

static float in[2][2 * N], out[2][2 * N];

/* One refused call: its result and a word its message must hold. */
static void refused(const char *what, ncclResult_t got, ncclResult_t want, const char *word) {
  const char *text = ncclGetLastError(NULL);
  check(got == want && strstr(text, word), "%s: result %d (want %d), message '%s' (want '%s')", what, (int)got,
        (int)want, text, word);
}

static void bad_calls(ncclComm_t c) {
  float s = 2;
  ncclRedOp_t op;
  float *a = in[0], *b = out[0];
  refused("unknown reduction", ncclAllReduce(a, b, N, ncclFloat32, (ncclRedOp_t)99, c, NULL), ncclInvalidArgument,
          "operator 99");
  refused("unknown datatype", ncclAllReduce(a, b, N, (ncclDataType_t)77, ncclSum, c, NULL), ncclInvalidArgument,
          "datatype 77");
  refused("NULL sendbuff", ncclAllReduce(NULL, b, N, ncclFloat32, ncclSum, c, NULL), ncclInvalidArgument,
          "sendbuff is NULL");
  refused("count overflow", ncclAllReduce(a, b, (size_t)-1, ncclFloat32, ncclSum, c, NULL), ncclInvalidArgument,
          "overflows");
  refused("reduce root", ncclReduce(a, b, N, ncclFloat32, ncclSum, 5, c, NULL), ncclInvalidArgument, "root 5");
  refused("broadcast root", ncclBroadcast(a, b, N, ncclFloat32, -1, c, NULL), ncclInvalidArgument, "root -1");
  refused("send peer", ncclSend(a, N, ncclFloat32, 3, c, NULL), ncclInvalidArgument, "peer 3");
  refused("recv peer", ncclRecv(b, N, ncclFloat32, -2, c, NULL), ncclInvalidArgument, "peer -2");
  refused("gather root", ncclGather(a, b, N, ncclFloat32, 9, c, NULL), ncclInvalidArgument, "root 9");
  refused("scatter NULL recvbuff", ncclScatter(a, NULL, N, ncclFloat32, 0, c, NULL), ncclInvalidArgument,
          "ncclScatter: recvbuff is NULL");
  /* A composite call names its own buffer, not the send or receive it would have been made of. */
  refused("all-to-all NULL recvbuff", ncclAlltoAll(a, NULL, N, ncclFloat32, c, NULL), ncclInvalidArgument,
          "ncclAlltoAll: recvbuff is NULL");
  refused("all-gather NULL recvbuff", ncclAllGather(a, NULL, N, ncclFloat32, c, NULL), ncclInvalidArgument,
          "recvbuff is NULL");
  refused("premulsum NULL scalar", ncclRedOpCreatePreMulSum(&op, NULL, ncclFloat32, ncclScalarHostImmediate, c),
          ncclInvalidArgument, "NULL");
  refused("premulsum residence", ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, (ncclScalarResidence_t)9, c),
          ncclInvalidArgument, "residence 9");
  refused("destroy a built-in op", ncclRedOpDestroy(ncclSum, c), ncclInvalidArgument, "not an operator");
  check(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, ncclScalarHostImmediate, c) == ncclSuccess, "premulsum");
  check(ncclRedOpDestroy(op, c) == ncclSuccess, "premulsum destroyed");
  refused("destroyed op used", ncclAllReduce(a, b, N, ncclFloat32, op, c, NULL), ncclInvalidArgument,
          "reduction operator");
  refused("destroyed op destroyed", ncclRedOpDestroy(op, c), ncclInvalidArgument, "not an operator");
  refused("NULL count", ncclCommCount(c, NULL), ncclInvalidArgument, "count is NULL");
  refused("deregister a stranger", ncclCommDeregister(c, (void *)0x1234), ncclInvalidArgument,
          "not a registration");
  refused("window deregister a stranger", ncclCommWindowDeregister(c, (ncclWindow_t)0x1234), ncclInvalidArgument,
          "not a window");
  refused("split color", ncclCommSplit(c, -5, 0, &(ncclComm_t){NULL}, NULL), ncclInvalidArgument, "color -5");
  refused("group end without start", ncclGroupEnd(), ncclInvalidUsage, "without ncclGroupStart");
}

/* Calls with no communicator or a NULL out-parameter: refused under their own names, nothing dereferenced. */
static void null_handles(void) {
  ncclComm_t c = NULL;
  refused("version NULL", ncclGetVersion(NULL), ncclInvalidArgument, "ncclGetVersion: version is NULL");
  refused("unique id NULL", ncclGetUniqueId(NULL), ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  refused("init rank out of range", ncclCommInitRank(&c, 2, (ncclUniqueId){0}, 5), ncclInvalidArgument,
          "rank 5 is outside 0..1");
  refused("init all ndev", ncclCommInitAll(&c, 0, NULL), ncclInvalidArgument, "ndev 0");
  refused("scalable no ids", ncclCommInitRankScalable(&c, 1, 0, 1, NULL, NULL), ncclInvalidArgument,
          "ncclCommInitRankScalable: commIds is NULL");
  refused("all-reduce on no communicator", ncclAllReduce(in[0], out[0], N, ncclFloat32, ncclSum, NULL, NULL),
          ncclInvalidArgument, "ncclAllReduce: communicator is NULL");
  refused("finalize no communicator", ncclCommFinalize(NULL), ncclInvalidArgument, "communicator is NULL");
  refused("async error NULL", ncclCommGetAsyncError(NULL, NULL), ncclInvalidArgument, "asyncError is NULL");
  refused("file load on no communicator", dcclCommFileLoad(NULL, "/dev/null", 0, 0, in[0], NULL),
          ncclInvalidArgument, "dcclCommFileLoad: communicator is NULL");
  refused("file load NULL handle", dcclFileLoad("/dev/null", 0, 0, in[0], NULL, NULL), ncclInvalidArgument,
          "dcclFileLoad: load is NULL");
  check(c == NULL, "no communicator came from the refused creations");
  check(ncclCommDestroy(NULL) == ncclSuccess && ncclCommAbort(NULL) == ncclSuccess, "destroy/abort of NULL: no-ops");
}

static void fill(void) {
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 2 * N; i++) in[r][i] = (float)((r + 1) * (i + 1)), out[r][i] = -1;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  null_handles();
  ncclComm_t comms[2];
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) {
    printf("FAIL: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  for (int r = 0; r < 2; r++) bad_calls(comms[r]);

  /* A group whose all-reduces are valid and whose all-to-all is refused: the all-reduces still run, right. */
  fill();
  check(ncclGroupStart() == ncclSuccess, "group start");
  for (int r = 0; r < 2; r++) {
    check(ncclAllReduce(in[r], out[r], N, ncclFloat32, ncclSum, comms[r], NULL) == ncclSuccess, "grouped all-reduce");
    refused("grouped all-to-all NULL sendbuff", ncclAlltoAll(NULL, out[r] + N, N / 2, ncclFloat32, comms[r], NULL),
            ncclInvalidArgument, "ncclAlltoAll: sendbuff is NULL");
  }
  check(ncclGroupEnd() == ncclSuccess, "group end: %s", ncclGetLastError(NULL));
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < N; i++)
      check(out[r][i] == (float)(3 * (i + 1)), "rank %d all-reduce[%d] = %g after refused calls", r, i, out[r][i]);

  /* And an all-to-all of both ranks after it all. */
  fill();
  check(ncclGroupStart() == ncclSuccess, "group start");
  for (int r = 0; r < 2; r++)
    check(ncclAlltoAll(in[r], out[r], N, ncclFloat32, comms[r], NULL) == ncclSuccess, "all-to-all");
  check(ncclGroupEnd() == ncclSuccess, "group end: %s", ncclGetLastError(NULL));
  for (int r = 0; r < 2; r++)
    for (int p = 0; p < 2; p++)
      for (int i = 0; i < N; i++)
        check(out[r][p * N + i] == in[p][r * N + i], "rank %d all-to-all from %d [%d] = %g", r, p, i,
              out[r][p * N + i]);
  for (int r = 0; r < 2; r++) check(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy");
  printf("test_bad_args: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
