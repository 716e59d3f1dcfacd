/* Every link a communicator's collectives use is made at creation: after ncclCommInitAll, collectives of every kind
 * at every size (which the cost model sends to one-shot, tree or ring) and broadcast/reduce from every root add no
 * link. NRANKS communicators of one job in one process (argument; default 3), driven together in groups from this
 * thread. Run also under DCCL_ALGO=tree with 10 ranks (rooted trees at creation; one-shot, which links every
 * pair, stops at 9 ranks) and under DCCL_RUNTIME_CONNECT=0 (point-to-point links at creation too). An all-to-all
 * then adds point-to-point links only when they are made at first use (DCCL_RUNTIME_CONNECT=1, the default). */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "collectives/coll_comm.h"
#include "core/comm.h"
#include "dccl.h"
#include "unit_check.h"

#define MAX_RANKS 16

/* Links of collective lanes (p2p = 0) or point-to-point lanes (p2p = 1). */
static int count_links(ncclComm_t comm, int p2p) {
  int n = 0;
  for (struct dccl_conn_entry *e = atomic_load(&comm->conns); e; e = e->next) n += (e->lane >= DCCL_LANE_P2P) == p2p;
  return n;
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "FAIL: hung (collectives over the communicators did not complete in 240 s)\n";
  (void)!write(1, msg, sizeof(msg) - 1);
  _exit(1);
}

/* Broadcast and reduce of n floats from `root` on every communicator, in one group. */
static ncclResult_t rooted(ncclComm_t *comms, int nranks, float *send, float *recv, size_t stride, size_t n, int root) {
  ncclGroupStart();
  for (int r = 0; r < nranks; r++) {
    ncclBroadcast(send + (size_t)r * stride, recv + (size_t)r * stride, n, ncclFloat32, root, comms[r], NULL);
    ncclReduce(send + (size_t)r * stride, recv + (size_t)r * stride, n, ncclFloat32, ncclSum, root, comms[r], NULL);
  }
  return ncclGroupEnd();
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGALRM, on_alarm);
  alarm(240);
  int nranks = argc > 1 ? atoi(argv[1]) : 3;
  if (nranks < 2 || nranks > MAX_RANKS) {
    printf("usage: %s [ranks 2..%d]\n", argv[0], MAX_RANKS);
    return 2;
  }
  const char *algo = getenv("DCCL_ALGO"), *runtime = getenv("DCCL_RUNTIME_CONNECT");
  int p2p_at_creation = runtime && atoi(runtime) == 0;
  printf("%d ranks, DCCL_ALGO=%s, DCCL_RUNTIME_CONNECT=%s\n", nranks, algo ? algo : "", runtime ? runtime : "");
  ncclComm_t comms[MAX_RANKS];
  if (ncclCommInitAll(comms, nranks, NULL) != ncclSuccess) {
    printf("FAIL: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  int made[MAX_RANKS], made_p2p[MAX_RANKS];
  for (int r = 0; r < nranks; r++) {
    made[r] = count_links(comms[r], 0);
    made_p2p[r] = count_links(comms[r], 1);
  }
  /* Each rank links to its ring neighbours at least; to every other rank point-to-point when asked. */
  check(made[0] >= 2, "rank 0 has %d links after creation", made[0]);
  check(made_p2p[0] == (p2p_at_creation ? 2 * (nranks - 1) : 0), "rank 0 has %d point-to-point links after creation",
        made_p2p[0]);

  size_t max_count = (size_t)4 << 20; /* floats: 16 MiB, a ring size */
  float *send = malloc(max_count * (size_t)nranks * sizeof(float)), *recv = malloc(max_count * (size_t)nranks * sizeof(float));
  for (size_t i = 0; i < max_count * (size_t)nranks; i++) send[i] = 1.0f;
  const size_t counts[] = {2, 1000, 65536, (size_t)1 << 20, max_count};
  for (int c = 0; c < 5; c++) {
    size_t n = counts[c];
    ncclGroupStart();
    for (int r = 0; r < nranks; r++) {
      float *s = send + (size_t)r * max_count, *d = recv + (size_t)r * max_count;
      ncclAllReduce(s, d, n, ncclFloat32, ncclSum, comms[r], NULL);
      ncclBroadcast(s, d, n, ncclFloat32, (c + 1) % nranks, comms[r], NULL);
      ncclReduce(s, d, n, ncclFloat32, ncclSum, (c + 2) % nranks, comms[r], NULL);
      ncclAllGather(s, d, n / (size_t)nranks, ncclFloat32, comms[r], NULL);
      ncclReduceScatter(s, d, n / (size_t)nranks, ncclFloat32, ncclSum, comms[r], NULL);
    }
    ncclResult_t res = ncclGroupEnd();
    check(res == ncclSuccess, "collectives of %zu floats: %s", n, ncclGetLastError(NULL));
    check(recv[0] == (float)nranks || n / (size_t)nranks == 0, "reduce-scatter of %zu floats gave %g", n, recv[0]);
  }
  /* A rooted tree's shape depends on its root only: every root, at one size. */
  for (int root = 0; root < nranks; root++) {
    ncclResult_t res = rooted(comms, nranks, send, recv, max_count, 1000, root);
    check(res == ncclSuccess, "broadcast/reduce from root %d: %s", root, ncclGetLastError(NULL));
    check(recv[(size_t)root * max_count] == (float)nranks, "reduce to root %d gave %g", root,
          recv[(size_t)root * max_count]);
  }
  for (int r = 0; r < nranks; r++) {
    int now = count_links(comms[r], 0);
    check(now == made[r], "rank %d: %d links after creation, %d after the collectives", r, made[r], now);
  }

  ncclGroupStart();
  for (int r = 0; r < nranks; r++)
    ncclAlltoAll(send + (size_t)r * max_count, recv + (size_t)r * max_count, 1000, ncclFloat32, comms[r], NULL);
  ncclResult_t res = ncclGroupEnd();
  check(res == ncclSuccess, "all-to-all: %s", ncclGetLastError(NULL));
  for (int r = 0; r < nranks; r++) {
    int now = count_links(comms[r], 1);
    check(now == 2 * (nranks - 1), "rank %d: %d point-to-point links after an all-to-all, want %d", r, now,
          2 * (nranks - 1));
    check(p2p_at_creation ? now == made_p2p[r] : made_p2p[r] == 0,
          "rank %d: %d point-to-point links after creation, %d after the all-to-all", r, made_p2p[r], now);
    check(count_links(comms[r], 0) == made[r], "rank %d: the all-to-all added a collective link", r);
    check(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy %d", r);
  }
  free(send);
  free(recv);
  printf("test_links_at_creation: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
