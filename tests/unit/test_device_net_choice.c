/* Which transport a device link takes (src/core/connect.c), from the peer infos alone, as every rank decides it:
 * two ranks on one GPU of one real machine, as one host and as two pretend hosts (different host ids), with
 * DCCL_DEV_NET unset and set. One host: p2p, no network. Two pretend hosts: p2p and staged stay inside a host, so
 * only sockets reach, and only under DCCL_DEV_NET=1 (else device buffers between them are refused, naming
 * DCCL_DEV_NET). Each setting runs in a forked child, since parameters are read once per process. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/comm.h"
#include "transports/registry.h"
#include "unit_check.h"

static void two_ranks(struct dccl_comm *comm, struct dccl_peer_info peers[2], int pretend_hosts) {
  memset(comm, 0, sizeof(*comm));
  memset(peers, 0, 2 * sizeof(*peers));
  comm->nranks = 2;
  comm->peers = peers;
  for (int r = 0; r < 2; r++) {
    peers[r].rank = r;
    peers[r].has_device = 1;
    peers[r].real_host_hash = 7;
    peers[r].host_hash = pretend_hosts ? 100 + (uint64_t)r : 7;
    memset(peers[r].device_uuid, 0xab, sizeof(peers[r].device_uuid)); /* the same GPU */
  }
}

/* The checks for one DCCL_DEV_NET setting; returns the failures. */
static int run(int dev_net) {
  struct dccl_comm comm;
  struct dccl_peer_info peers[2];
#ifdef DCCL_HAVE_DEVICE_CODE
  two_ranks(&comm, peers, 0);
  check(dccl_comm_device_reachable(&comm, 0, 1) && !dccl_comm_device_net(&comm),
        "DCCL_DEV_NET=%d, one host, one GPU: device links must take p2p, not the network", dev_net);
  two_ranks(&comm, peers, 1);
  check(dccl_comm_device_reachable(&comm, 0, 1) == dev_net && dccl_comm_device_net(&comm) == dev_net,
        "DCCL_DEV_NET=%d, two pretend hosts on one GPU: reachable %d, over the network %d, want %d and %d", dev_net,
        dccl_comm_device_reachable(&comm, 0, 1), dccl_comm_device_net(&comm), dev_net, dev_net);
#else
  (void)comm, (void)peers, (void)two_ranks;
  check(1, "no device code in this build");
#endif
  return checks_failed;
}

int main(void) {
  int failed = 0;
  for (int dev_net = 0; dev_net < 2; dev_net++) {
    pid_t child = fork();
    if (child == 0) {
      setenv("DCCL_DEBUG", "NONE", 1);
      if (dev_net) setenv("DCCL_DEV_NET", "1", 1);
      else unsetenv("DCCL_DEV_NET");
      int bad = run(dev_net);
      fflush(stdout); /* _exit flushes nothing */
      _exit(bad ? 1 : 0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    check(ok, "DCCL_DEV_NET=%d: the checks failed (status %d)", dev_net, status);
    failed += !ok;
  }
  printf("test_device_net_choice: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed != 0 || failed;
}
