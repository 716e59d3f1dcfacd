/* One thread drives several communicators of one job in a group (the single-process pattern of NCCL programs:
 * ncclCommInitAll, then ncclGroupStart, one call per communicator, ncclGroupEnd). Send/receive links are made
 * lazily, on first use, and each communicator's link waits for its peer communicator's half: the group must make
 * them together instead of one communicator at a time (which would wait forever). A watchdog turns a hang into a
 * failure. Checked: a ring of sends, then an all-to-all, with every received byte verified. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dccl.h"
#include "unit_check.h"

#define NCOMMS 3
#define COUNT 100003

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "FAIL: hung (a group over several communicators did not complete in 60 s)\n";
  (void)!write(1, msg, sizeof(msg) - 1);
  _exit(1);
}

static int value(int from, int to, size_t i) {
  return (int)(from * 1000003 + to * 7919 + (int)i);
}

static void ring_of_sends(ncclComm_t *comms, int **send, int **recv) {
  ncclGroupStart();
  for (int r = 0; r < NCOMMS; r++) {
    ncclSend(send[r], COUNT, ncclInt32, (r + 1) % NCOMMS, comms[r], NULL);
    ncclRecv(recv[r], COUNT, ncclInt32, (r + NCOMMS - 1) % NCOMMS, comms[r], NULL);
  }
  ncclResult_t res = ncclGroupEnd();
  check(res == ncclSuccess, "ring of sends: %s", ncclGetLastError(NULL));
  for (int r = 0; r < NCOMMS; r++) {
    int from = (r + NCOMMS - 1) % NCOMMS, bad = 0;
    for (size_t i = 0; i < COUNT && !bad; i++) bad = recv[r][i] != value(from, 0, i);
    check(!bad, "comm %d received wrong data from comm %d", r, from);
  }
}

static void all_to_all(ncclComm_t *comms, int **send, int **recv) {
  ncclGroupStart();
  for (int r = 0; r < NCOMMS; r++)
    for (int p = 0; p < NCOMMS; p++) {
      ncclSend(send[r] + (size_t)p * COUNT, COUNT, ncclInt32, p, comms[r], NULL);
      ncclRecv(recv[r] + (size_t)p * COUNT, COUNT, ncclInt32, p, comms[r], NULL);
    }
  ncclResult_t res = ncclGroupEnd();
  check(res == ncclSuccess, "all-to-all: %s", ncclGetLastError(NULL));
  for (int r = 0; r < NCOMMS; r++)
    for (int p = 0; p < NCOMMS; p++) {
      int bad = 0;
      for (size_t i = 0; i < COUNT && !bad; i++) bad = recv[r][(size_t)p * COUNT + i] != value(p, r, i);
      check(!bad, "all-to-all: comm %d received wrong data from comm %d", r, p);
    }
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGALRM, on_alarm);
  alarm(60);
  ncclComm_t comms[NCOMMS];
  if (ncclCommInitAll(comms, NCOMMS, NULL) != ncclSuccess) {
    printf("FAIL: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  int *send[NCOMMS], *recv[NCOMMS];
  for (int r = 0; r < NCOMMS; r++) {
    send[r] = malloc((size_t)NCOMMS * COUNT * sizeof(int));
    recv[r] = malloc((size_t)NCOMMS * COUNT * sizeof(int));
    for (int p = 0; p < NCOMMS; p++)
      for (size_t i = 0; i < COUNT; i++) send[r][(size_t)p * COUNT + i] = value(r, p, i);
  }
  ring_of_sends(comms, send, recv);
  all_to_all(comms, send, recv);
  for (int r = 0; r < NCOMMS; r++) {
    check(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy %d", r);
    free(send[r]);
    free(recv[r]);
  }
  printf("test_group_many_comms: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
