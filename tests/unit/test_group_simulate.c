/* ncclGroupSimulateEnd: ends the group without running it and estimates its time from the cost model. Two ranks
 * of one process: the outputs stay untouched, a bigger all-reduce is estimated longer, bad arguments are refused,
 * and the communicators work normally after. */
#include <stdio.h>
#include <string.h>

#include "dccl.h"
#include "unit_check.h"

#define BIG (1 << 20)

static float in[2][BIG], out[2][BIG];

static float simulate(ncclComm_t *comms, size_t count, ncclResult_t *res) {
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  ncclGroupStart();
  for (int r = 0; r < 2; r++) ncclAllReduce(in[r], out[r], count, ncclFloat32, ncclSum, comms[r], NULL);
  *res = ncclGroupSimulateEnd(&info);
  return info.estimatedTime;
}

int main(void) {
  ncclComm_t comms[2];
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) {
    printf("FAIL: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < BIG; i++) in[r][i] = (float)(r + 1), out[r][i] = -1.0f;
  ncclResult_t res_small, res_big;
  float small = simulate(comms, 2, &res_small), big = simulate(comms, BIG, &res_big);
  check(res_small == ncclSuccess && res_big == ncclSuccess, "ncclGroupSimulateEnd succeeds: %s",
        ncclGetLastError(NULL));
  check(small > 0 && big > small, "estimates: 8 B %.3f us, 4 MiB %.3f us (bigger is longer)", small, big);
  int touched = 0;
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < BIG; i++) touched += out[r][i] != -1.0f;
  check(touched == 0, "a simulated group runs nothing (%d outputs written)", touched);

  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  check(ncclGroupSimulateEnd(&info) == ncclInvalidUsage, "without ncclGroupStart: refused");
  check(ncclGroupSimulateEnd(NULL) == ncclInvalidArgument, "a NULL simInfo is refused");
  ncclSimInfo_t junk;
  memset(&junk, 0, sizeof junk);
  ncclGroupStart();
  check(ncclGroupSimulateEnd(&junk) == ncclInvalidArgument, "an uninitialised simInfo is refused");
  ncclGroupEnd(); /* the refusal left the group open */

  ncclGroupStart();
  for (int r = 0; r < 2; r++) ncclAllReduce(in[r], out[r], BIG, ncclFloat32, ncclSum, comms[r], NULL);
  check(ncclGroupEnd() == ncclSuccess, "a real group after the simulated ones");
  int wrong = 0;
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < BIG; i++) wrong += out[r][i] != 3.0f;
  check(wrong == 0, "its all-reduce is right (%d wrong)", wrong);
  for (int r = 0; r < 2; r++) ncclCommDestroy(comms[r]);
  printf("test_group_simulate: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
