/* Pretend hosts among the ranks of one process: DCCL_HOSTID=A,B,A gives rank r entry r, and ranks past the list
 * its last entry, so four communicators of one job (ncclCommInitAll) sit on two "hosts", A (ranks 0, 2, 3) and B
 * (rank 1). Checks each rank's host id, that the ring keeps each host's ranks together (two crossings, although
 * the ranks alternate), that links inside a host take shared memory and links between hosts sockets, and that an
 * all-reduce over both is right, and that a split keeps each rank on its pretend host. (Parameters are read once
 * per process: one setting per run.) */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/coll_comm.h"
#include "core/comm.h"
#include "dccl.h"
#include "topo/ring_order.h"
#include "unit_check.h"

#define NRANKS 4
#define COUNT 1000

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "FAIL: hung (an all-reduce over pretend hosts did not complete in 120 s)\n";
  (void)!write(1, msg, sizeof(msg) - 1);
  _exit(1);
}

static void check_links(ncclComm_t comm) {
  for (struct dccl_conn_entry *e = atomic_load(&comm->conns); e; e = e->next) {
    int same_host = comm->peers[e->peer].host_hash == comm->peers[comm->rank].host_hash;
    const char *want = same_host ? "shm" : "socket";
    check(!strcmp(e->conn.transport->name, want), "rank %d -> rank %d (hosts %s, %s): %s, want %s", comm->rank, e->peer,
          comm->peers[comm->rank].host_id, comm->peers[e->peer].host_id, e->conn.transport->name, want);
  }
}

static void check_allreduce(ncclComm_t *comms) {
  static float buf[NRANKS][COUNT];
  for (int r = 0; r < NRANKS; r++)
    for (int i = 0; i < COUNT; i++) buf[r][i] = (float)(r + 1) * (float)(i % 13);
  ncclGroupStart();
  for (int r = 0; r < NRANKS; r++) ncclAllReduce(buf[r], buf[r], COUNT, ncclFloat32, ncclSum, comms[r], NULL);
  ncclResult_t res = ncclGroupEnd();
  check(res == ncclSuccess, "all-reduce over pretend hosts: %s", ncclGetLastError(NULL));
  int wrong = 0;
  for (int r = 0; r < NRANKS; r++)
    for (int i = 0; i < COUNT; i++) wrong += buf[r][i] != 10.0f * (float)(i % 13); /* 1 + 2 + 3 + 4 */
  check(wrong == 0, "all-reduce over pretend hosts: %d elements wrong", wrong);
}

/* Ranks 1-3 split off (child ranks 0-2): each keeps its pretend host, B, A, A, though the list's entries for
 * ranks 0-2 are A, B, A. */
struct split_arg {
  ncclComm_t parent, child;
  int rank;
  ncclResult_t res;
};
static void *split_one(void *p) { /* a split is collective and blocking: a thread per rank */
  struct split_arg *a = p;
  a->res = ncclCommSplit(a->parent, a->rank == 0 ? NCCL_SPLIT_NOCOLOR : 1, a->rank, &a->child, NULL);
  return NULL;
}
static void check_split(ncclComm_t *comms) {
  struct split_arg args[NRANKS];
  pthread_t threads[NRANKS];
  for (int r = 0; r < NRANKS; r++) {
    args[r] = (struct split_arg){comms[r], NULL, r, ncclInternalError};
    pthread_create(&threads[r], NULL, split_one, &args[r]);
  }
  int ok = 1;
  for (int r = 0; r < NRANKS; r++) {
    pthread_join(threads[r], NULL);
    ok &= args[r].res == ncclSuccess && (r == 0) == (args[r].child == NULL);
  }
  check(ok, "split of ranks 1-3: %s", ncclGetLastError(NULL));
  if (!ok) return;
  ncclComm_t child[NRANKS];
  for (int r = 0; r < NRANKS; r++) child[r] = args[r].child;
  static const char *const want[3] = {"B", "A", "A"};
  for (int c = 0; c < 3; c++)
    check(!strcmp(child[1]->peers[c].host_id, want[c]), "child rank %d (parent rank %d) has host id \"%s\", want %s",
          c, c + 1, child[1]->peers[c].host_id, want[c]);
  for (int r = 1; r < NRANKS; r++) ncclCommDestroy(child[r]);
}

int main(void) {
  signal(SIGALRM, on_alarm);
  alarm(120);
  setenv("DCCL_HOSTID", "A,B,A", 1);
  ncclComm_t comms[NRANKS];
  ncclResult_t res = ncclCommInitAll(comms, NRANKS, NULL);
  check(res == ncclSuccess, "init: %s", ncclGetLastError(NULL));
  if (res != ncclSuccess) return 1;
  static const char *const want_id[NRANKS] = {"A", "B", "A", "A"};
  for (int r = 0; r < NRANKS; r++) {
    check(!strcmp(comms[r]->peers[r].host_id, want_id[r]), "rank %d has host id \"%s\", want %s", r,
          comms[r]->peers[r].host_id, want_id[r]);
    check(comms[r]->nhosts == 2, "rank %d sees %d hosts, want 2", r, comms[r]->nhosts);
  }
  uint64_t hosts[NRANKS];
  for (int r = 0; r < NRANKS; r++) hosts[r] = comms[0]->peers[r].host_hash;
  int crossings = dccl_ring_host_crossings(hosts, comms[0]->coll.rings[0].order, NRANKS);
  check(crossings == 2, "the ring crosses between the hosts %d times, want 2", crossings);
  check_allreduce(comms);
  for (int r = 0; r < NRANKS; r++) check_links(comms[r]);
  check_split(comms);
  for (int r = 0; r < NRANKS; r++) ncclCommDestroy(comms[r]);
  printf("test_pretend_hosts: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed != 0;
}
