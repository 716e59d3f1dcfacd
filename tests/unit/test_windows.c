/* ncclCommWindowRegister / ncclCommWindowDeregister: a window is a registered range (docs/nccl-compat.md); two
 * ranks of one process register one each, inside a group as nccl-tests -R 2 does, run an all-reduce on them,
 * and deregister; bad arguments are refused and a window is freed once. */
#include <stdio.h>
#include <string.h>

#include "dccl.h"
#include "unit_check.h"

#define N 4096

int main(void) {
  ncclComm_t comms[2];
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) {
    printf("FAIL: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  static float buf[2][N], out[2][N];
  ncclWindow_t win[2] = {NULL, NULL};
  check(ncclGroupStart() == ncclSuccess, "ncclGroupStart");
  for (int r = 0; r < 2; r++)
    check(ncclCommWindowRegister(comms[r], buf[r], sizeof buf[r], &win[r], NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess &&
              win[r] != NULL,
          "rank %d: ncclCommWindowRegister inside a group: %s", r, ncclGetLastError(comms[r]));
  check(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd after the registrations");
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < N; i++) buf[r][i] = (float)(r + 1) * (float)i;
  check(ncclGroupStart() == ncclSuccess, "ncclGroupStart");
  for (int r = 0; r < 2; r++) ncclAllReduce(buf[r], out[r], N, ncclFloat32, ncclSum, comms[r], NULL);
  check(ncclGroupEnd() == ncclSuccess, "an all-reduce from the windows: %s", ncclGetLastError(NULL));
  int wrong = 0;
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < N; i++) wrong += out[r][i] != 3.0f * (float)i;
  check(wrong == 0, "the all-reduce's result (%d wrong)", wrong);

  ncclWindow_t bad = NULL;
  check(ncclCommWindowRegister(comms[0], buf[0], sizeof buf[0], NULL, 0) == ncclInvalidArgument,
        "a NULL window pointer is refused");
  check(ncclCommWindowRegister(comms[0], buf[0], sizeof buf[0], &bad, 0x80) == ncclInvalidArgument,
        "unknown flags are refused");
  check(ncclCommWindowDeregister(comms[0], win[1]) == ncclInvalidArgument &&
            strstr(ncclGetLastError(comms[0]), "not a window of this communicator") != NULL,
        "another communicator's window is refused: %s", ncclGetLastError(comms[0]));
  for (int r = 0; r < 2; r++)
    check(ncclCommWindowDeregister(comms[r], win[r]) == ncclSuccess, "rank %d: ncclCommWindowDeregister", r);
  /* A window left registered is freed with its communicator (ASan runs see no leak). */
  ncclWindow_t kept = NULL;
  check(ncclCommWindowRegister(comms[1], buf[1], sizeof buf[1], &kept, 0) == ncclSuccess && kept != NULL,
        "a window registered again: %s", ncclGetLastError(comms[1]));
  check(ncclCommWindowDeregister(comms[0], win[0]) == ncclInvalidArgument, "a window is deregistered once");
  check(ncclCommWindowDeregister(comms[0], NULL) == ncclInvalidArgument, "a NULL window is refused");
  for (int r = 0; r < 2; r++) ncclCommDestroy(comms[r]);
  printf("test_windows: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
