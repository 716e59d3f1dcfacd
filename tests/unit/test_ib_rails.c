/* Which RDMA ports a process spreads its links over (transports/net_ib/ib_device.c, dccl_ib_rails_of): the nearest
 * first, then the others as near and of its link layer; all of one link layer where hwloc placed none. And the
 * choice is kept per GPU of the process (an ordinal out of range counts as no GPU), the rails agreeing with it,
 * whatever RDMA devices this machine has. */
#include <infiniband/verbs.h>
#include <string.h>

#include "transports/net_ib/ib_device.h"
#include "unit_check.h"

#define IB IBV_LINK_LAYER_INFINIBAND
#define ETH IBV_LINK_LAYER_ETHERNET

int main(void) {
  int out[DCCL_IB_MAX_RAILS];
  /* A DGX-like GPU: its own NIC 2 hops away, the others further. */
  int hops1[] = {8, 2, 8, 6}, ib4[] = {IB, IB, IB, IB};
  check(dccl_ib_rails_of(hops1, ib4, 4, 1, out, DCCL_IB_MAX_RAILS) == 1 && out[0] == 1, "one nearest NIC: one rail");
  /* Two NICs behind the GPU's switch: both, the nearest found first. */
  int hops2[] = {2, 8, 2, 2}, mixed[] = {IB, IB, ETH, IB};
  int n = dccl_ib_rails_of(hops2, mixed, 4, 0, out, DCCL_IB_MAX_RAILS);
  check(n == 2 && out[0] == 0 && out[1] == 3, "ties of the same link layer: rails 0 and 3 (got %d: %d %d)", n, out[0],
        out[1]);
  n = dccl_ib_rails_of(hops2, mixed, 4, 3, out, DCCL_IB_MAX_RAILS);
  check(n == 2 && out[0] == 3 && out[1] == 0, "the nearest named first even when listed later");
  /* hwloc placed none (soft-RoCE, no hwloc): every port of the first one's link layer. */
  int none[] = {-1, -1, -1}, eth3[] = {ETH, IB, ETH};
  n = dccl_ib_rails_of(none, eth3, 3, -1, out, DCCL_IB_MAX_RAILS);
  check(n == 2 && out[0] == 0 && out[1] == 2, "unplaced: all RoCE ports (got %d)", n);
  /* At most max. */
  int flat[] = {1, 1, 1, 1}, ib[] = {IB, IB, IB, IB};
  check(dccl_ib_rails_of(flat, ib, 4, 0, out, 2) == 2, "capped at max");
  check(dccl_ib_rails_of(flat, ib, 0, -1, out, 2) == 0, "no candidate: no rail");
  const struct dccl_ib_local *cpus = dccl_ib_local(-1), *gpu0 = dccl_ib_local(0), *gpu1 = dccl_ib_local(1);
  check(cpus && gpu0 && gpu1 && cpus != gpu0 && gpu0 != gpu1, "one choice per GPU and one without");
  check(dccl_ib_local(1000) == cpus && dccl_ib_local(-7) == cpus, "an ordinal out of range: no GPU's choice");
  check(dccl_ib_local(0) == gpu0, "made once: the same choice again");
  const struct dccl_ib_local *rails;
  int nrails = dccl_ib_rails(0, &rails);
  check(gpu0->ready ? nrails >= 1 && !strcmp(rails[0].name, gpu0->name) && rails[0].port == gpu0->port : nrails == 0,
        "GPU 0's first rail is its port (%d rails, ready %d)", nrails, gpu0->ready);
  printf("test_ib_rails: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
