/* Point-to-point links ahead of use (src/core/p2p_links.c). Three communicators of one job in one process:
 *   - a first send/recv whose link does not exist is refused under CUDA stream capture with ncclInvalidUsage,
 *     naming the peer and dcclCommConnectPeers (the capture query is replaced by a stand-in that says
 *     "capturing": ncclSend reaches this check only where a GPU can capture, and host buffers are refused under
 *     capture before it); without capture it passes (the link is made at first use);
 *   - dcclCommConnectPeers, called by each rank from its own thread naming its partners, makes those links and
 *     only those: the check then passes under capture for them, still refuses the others, and sends and
 *     receives over them add no link;
 *   - bad arguments are refused with ncclInvalidArgument; self, repeats and no peers are no-ops. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "collectives/coll_comm.h"
#include "core/comm.h"
#include "dccl.h"
#include "unit_check.h"

#define NRANKS 3

static int capturing(cudaStream_t s) { return 1; }
static int not_capturing(cudaStream_t s) { return 0; }

static int p2p_links(ncclComm_t comm) {
  int n = 0;
  for (struct dccl_conn_entry *e = atomic_load(&comm->conns); e; e = e->next) n += e->lane >= DCCL_LANE_P2P;
  return n;
}

static int refused_naming(ncclComm_t comm, int kind, int peer) {
  ncclResult_t r = dccl_p2p_check_first_use(comm, kind, peer, 0, 8, NULL, capturing);
  char rank[32];
  snprintf(rank, sizeof(rank), "rank %d", peer);
  const char *text = ncclGetLastError(NULL);
  return r == ncclInvalidUsage && strstr(text, rank) && strstr(text, "dcclCommConnectPeers") &&
         strstr(text, "DCCL_RUNTIME_CONNECT=0");
}

struct connect_arg {
  ncclComm_t comm;
  int peers[4], npeers;
  ncclResult_t res;
};
static void *connect_thread(void *p) {
  struct connect_arg *a = p;
  a->res = dcclCommConnectPeers(a->comm, a->peers, a->npeers);
  return NULL;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  ncclComm_t c[NRANKS];
  if (ncclCommInitAll(c, NRANKS, NULL) != ncclSuccess) {
    printf("FAIL: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  check(refused_naming(c[0], DCCL_OP_SEND, 1), "send 0->1 under capture, no link: %s", ncclGetLastError(NULL));
  check(refused_naming(c[0], DCCL_OP_RECV, 2), "recv 0<-2 under capture, no link: %s", ncclGetLastError(NULL));
  check(dccl_p2p_check_first_use(c[0], DCCL_OP_SEND, 1, 0, 8, NULL, not_capturing) == ncclSuccess,
        "send 0->1 outside capture must be allowed (made at first use)");
  check(dccl_p2p_check_first_use(c[0], DCCL_OP_SEND, 0, 0, 8, NULL, capturing) == ncclSuccess,
        "send to self needs no link, also under capture");

  /* Rank 0 pairs with 1 and 2 (0 itself and a repeat are ignored); 1 and 2 name only 0. */
  struct connect_arg args[NRANKS] = {{c[0], {1, 2, 0, 2}, 4, ncclSuccess},
                                     {c[1], {0}, 1, ncclSuccess},
                                     {c[2], {0}, 1, ncclSuccess}};
  pthread_t t[NRANKS];
  for (int r = 0; r < NRANKS; r++) pthread_create(&t[r], NULL, connect_thread, &args[r]);
  for (int r = 0; r < NRANKS; r++) pthread_join(t[r], NULL);
  for (int r = 0; r < NRANKS; r++) check(args[r].res == ncclSuccess, "dcclCommConnectPeers on rank %d", r);
  check(p2p_links(c[0]) == 4 && p2p_links(c[1]) == 2 && p2p_links(c[2]) == 2,
        "point-to-point links %d %d %d, want 4 2 2", p2p_links(c[0]), p2p_links(c[1]), p2p_links(c[2]));
  check(dccl_p2p_check_first_use(c[0], DCCL_OP_SEND, 1, 0, 8, NULL, capturing) == ncclSuccess &&
            dccl_p2p_check_first_use(c[0], DCCL_OP_RECV, 2, 0, 8, NULL, capturing) == ncclSuccess &&
            dccl_p2p_check_first_use(c[2], DCCL_OP_SEND, 0, 0, 8, NULL, capturing) == ncclSuccess,
        "connected links refused under capture: %s", ncclGetLastError(NULL));
  check(refused_naming(c[1], DCCL_OP_SEND, 2), "send 1->2 was not connected, but passed under capture");

  /* Sends and receives over the made links make none. */
  float a[NRANKS][64], b[NRANKS][64], back[NRANKS][64]; /* b[p]: rank p's from 0; back[p]: rank 0's from p */
  for (int r = 0; r < NRANKS; r++)
    for (int i = 0; i < 64; i++) a[r][i] = (float)(r * 100 + i);
  ncclGroupStart();
  for (int p = 1; p < NRANKS; p++) {
    ncclSend(a[0], 64, ncclFloat32, p, c[0], NULL);
    ncclRecv(b[p], 64, ncclFloat32, 0, c[p], NULL);
    ncclSend(a[p], 64, ncclFloat32, 0, c[p], NULL);
    ncclRecv(back[p], 64, ncclFloat32, p, c[0], NULL);
  }
  ncclResult_t res = ncclGroupEnd();
  check(res == ncclSuccess, "send/recv over prepared links: %s", ncclGetLastError(NULL));
  check(b[1][5] == 5.0f && b[2][63] == 63.0f && back[2][1] == 201.0f, "received %g %g %g, want 5 63 201", b[1][5],
        b[2][63], back[2][1]);
  check(p2p_links(c[0]) == 4 && p2p_links(c[1]) == 2, "send/recv made links: %d %d", p2p_links(c[0]),
        p2p_links(c[1]));

  int bad[] = {NRANKS};
  check(dcclCommConnectPeers(c[0], bad, 1) == ncclInvalidArgument, "peer %d out of range accepted", NRANKS);
  check(strstr(ncclGetLastError(NULL), "outside 0..2") != NULL, "the error does not give the range: %s",
        ncclGetLastError(NULL));
  check(dcclCommConnectPeers(c[0], NULL, 1) == ncclInvalidArgument, "NULL peers accepted");
  check(dcclCommConnectPeers(c[0], bad, -1) == ncclInvalidArgument, "negative count accepted");
  check(dcclCommConnectPeers(NULL, bad, 0) == ncclInvalidArgument, "NULL communicator accepted");
  int self[] = {0, 1};
  check(dcclCommConnectPeers(c[0], NULL, 0) == ncclSuccess && dcclCommConnectPeers(c[0], self, 2) == ncclSuccess,
        "no peers, self and made links must be no-ops: %s", ncclGetLastError(NULL));
  for (int r = 0; r < NRANKS; r++) check(ncclCommDestroy(c[r]) == ncclSuccess, "destroy %d", r);
  printf("test_p2p_links: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
