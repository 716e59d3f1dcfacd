/* Pretend hosts among the ranks of one process: DCCL_HOSTID=A,B,A gives rank r entry r, and ranks past the list
 * its last entry, so four communicators of one job (ncclCommInitAll) sit on two "hosts", A (ranks 0, 2, 3) and B
 * (rank 1). Checks each rank's host id, that the ring keeps each host's ranks together (two crossings, although
 * the ranks alternate), that links inside a host take shared memory and links between hosts sockets, and that an
 * all-reduce over both is right. (Parameters are read once per process: one setting per run.) */
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
  for (int r = 0; r < NRANKS; r++) ncclCommDestroy(comms[r]);
  printf("test_pretend_hosts: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed != 0;
}
