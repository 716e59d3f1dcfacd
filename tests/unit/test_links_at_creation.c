/* Every link a communicator's collectives use without DCCL_ALGO is made at creation: after ncclCommInitAll, the
 * collectives at every size (which the cost model sends to one-shot, tree or ring) and every kind add no link.
 * Three communicators of one job in one process, driven together in groups from this thread. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/comm.h"
#include "dccl.h"
#include "unit_check.h"

#define NCOMMS 3

static int count_links(ncclComm_t comm) {
  int n = 0;
  for (struct dccl_conn_entry *e = atomic_load(&comm->conns); e; e = e->next) n++;
  return n;
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "FAIL: hung (collectives over three communicators did not complete in 120 s)\n";
  (void)!write(1, msg, sizeof(msg) - 1);
  _exit(1);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGALRM, on_alarm);
  alarm(120);
  ncclComm_t comms[NCOMMS];
  if (ncclCommInitAll(comms, NCOMMS, NULL) != ncclSuccess) {
    printf("FAIL: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  int made[NCOMMS];
  for (int r = 0; r < NCOMMS; r++) made[r] = count_links(comms[r]);
  /* Each rank links to both others for one-shot, so at least 2 sends and 2 receives. */
  check(made[0] >= 2 * (NCOMMS - 1), "rank 0 has %d links after creation", made[0]);

  size_t max_count = (size_t)4 << 20; /* floats: 16 MiB, a ring size */
  float *send = malloc(max_count * NCOMMS * sizeof(float)), *recv = malloc(max_count * NCOMMS * sizeof(float));
  for (size_t i = 0; i < max_count * NCOMMS; i++) send[i] = 1.0f;
  const size_t counts[] = {2, 1000, 65536, (size_t)1 << 20, max_count};
  for (int c = 0; c < 5; c++) {
    size_t n = counts[c];
    ncclGroupStart();
    for (int r = 0; r < NCOMMS; r++) {
      float *s = send + (size_t)r * max_count, *d = recv + (size_t)r * max_count;
      ncclAllReduce(s, d, n, ncclFloat32, ncclSum, comms[r], NULL);
      ncclBroadcast(s, d, n, ncclFloat32, 1, comms[r], NULL);
      ncclReduce(s, d, n, ncclFloat32, ncclSum, 2, comms[r], NULL);
      ncclAllGather(s, d, n / NCOMMS, ncclFloat32, comms[r], NULL);
      ncclReduceScatter(s, d, n / NCOMMS, ncclFloat32, ncclSum, comms[r], NULL);
    }
    ncclResult_t res = ncclGroupEnd();
    check(res == ncclSuccess, "collectives of %zu floats: %s", n, ncclGetLastError(NULL));
    check(recv[0] == (float)NCOMMS || n / NCOMMS == 0, "reduce-scatter of %zu floats gave %g", n, recv[0]);
  }
  for (int r = 0; r < NCOMMS; r++) {
    int now = count_links(comms[r]);
    check(now == made[r], "rank %d: %d links after creation, %d after the collectives", r, made[r], now);
    check(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy %d", r);
  }
  free(send);
  free(recv);
  printf("test_links_at_creation: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
