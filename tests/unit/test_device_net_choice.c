/* Which transport a device link takes (src/core/connect.c), from the peer infos alone, as every rank decides it:
 * two ranks on one GPU of one real machine, as one host and as two pretend hosts (different host ids), with
 * DCCL_DEV_NET unset (the default, 1), 1 and 0. One host: p2p, no network. Two pretend hosts: p2p and staged stay
 * inside a host, so only sockets reach, and not under DCCL_DEV_NET=0 (device buffers between them are then refused,
 * naming DCCL_DEV_NET); DCCL_TRANSPORT=socket forces device links onto sockets unless DCCL_DEV_NET=0. Each setting
 * runs in a forked child, since parameters are read once per process. */
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

/* The checks for one DCCL_DEV_NET setting (and DCCL_TRANSPORT=socket or not); returns the failures. */
static int run(int dev_net, int socket) {
  struct dccl_comm comm;
  struct dccl_peer_info peers[2];
#ifdef DCCL_HAVE_DEVICE_CODE
  /* One host: p2p; DCCL_TRANSPORT=socket takes device links too, but only where DCCL_DEV_NET lets sockets carry
   * them (under 0 it leaves them to the default order). */
  two_ranks(&comm, peers, 0);
  int want_net = socket && dev_net;
  int net = -1, linked = dccl_comm_device_links(&comm, &net);
  check(linked && net == want_net,
        "DCCL_DEV_NET=%d, DCCL_TRANSPORT=%s, one host, one GPU: linked %d, over the "
        "network %d, want 1 and %d",
        dev_net, socket ? "socket" : "", linked, net, want_net);
  two_ranks(&comm, peers, 1);
  net = -1;
  linked = dccl_comm_device_links(&comm, &net);
  check(linked == dev_net && (!linked || net == 1),
        "DCCL_DEV_NET=%d, two pretend hosts on one GPU: linked %d, over the network %d, want %d and 1", dev_net, linked,
        net, dev_net);
#else
  (void)comm, (void)peers, (void)two_ranks, (void)socket;
  check(1, "no device code in this build");
#endif
  return checks_failed;
}

int main(void) {
  int failed = 0;
  static const char *settings[] = {NULL, "1", "0"}; /* unset: the default, on */
  for (int config = 0; config < 6; config++) {
    const char *setting = settings[config % 3];
    int dev_net = !setting || setting[0] == '1', socket = config / 3;
    pid_t child = fork();
    if (child == 0) {
      setenv("DCCL_DEBUG", "NONE", 1);
      if (setting)
        setenv("DCCL_DEV_NET", setting, 1);
      else
        unsetenv("DCCL_DEV_NET");
      if (socket)
        setenv("DCCL_TRANSPORT", "socket", 1);
      else
        unsetenv("DCCL_TRANSPORT");
      int bad = run(dev_net, socket);
      fflush(stdout); /* _exit flushes nothing */
      _exit(bad ? 1 : 0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    check(ok, "DCCL_DEV_NET=%s DCCL_TRANSPORT=%s: the checks failed (status %d)", setting ? setting : "(unset)",
          socket ? "socket" : "", status);
    failed += !ok;
  }
  printf("test_device_net_choice: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed != 0 || failed;
}
