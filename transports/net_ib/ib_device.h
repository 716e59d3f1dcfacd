/* Finding a rank's RDMA device: of the ports that are ACTIVE and pass DCCL_IB_HCA, the one nearest the rank's GPU,
 * or the process's CPUs without one, in hwloc's tree (src/topo/pci_topo.c); logged at INFO with every candidate's
 * distance. Found once per GPU of the process (ranks of one process may drive several GPUs, each its own NICs);
 * whether a port is ready goes into every communicator's peer info, so both ends of a link can tell whether
 * net_ib reaches the other. */
#ifndef DCCL_IB_DEVICE_H_
#define DCCL_IB_DEVICE_H_

#include <stddef.h>

struct dccl_ib_local {
  int ready;      /* an active port was found */
  char name[64];  /* device name, e.g. mlx5_0 or rxe0 */
  int port;       /* port number (from 1) */
  int link_layer; /* IBV_LINK_LAYER_INFINIBAND or IBV_LINK_LAYER_ETHERNET (RoCE) */
  char why[256];  /* when not ready: why not */
};

/* The port nearest GPU `ordinal` (-1: no GPU, the process's CPUs). */
const struct dccl_ib_local *dccl_ib_local(int ordinal);

/* The ports the ranks on GPU `ordinal` (-1: none) spread their links over ("rails"): dccl_ib_local()'s first, then
 * the other active ports that pass DCCL_IB_HCA, share its link layer and are as near (every one such port where
 * hwloc cannot place them). A link on lane L uses rail L mod the count, so both ends of a link, listing the same
 * rails, meet on one (a rail-optimised fabric wires NIC k of every host to the same switch). Returns the count
 * (0: none ready). */
#define DCCL_IB_MAX_RAILS 8
int dccl_ib_rails(int ordinal, const struct dccl_ib_local **rails);

/* The rails among n candidates: `best` (the nearest; -1 when hwloc placed none) and every other of its link layer
 * with as few hops (hops[i]: -1 when not placed; all count when best is -1), best first, then in order; at most
 * max. Writes their indices into `rails` and returns how many. */
int dccl_ib_rails_of(const int *hops, const int *link_layer, int n, int best, int *rails, int max);

/* Does device `name`, port `port` pass the DCCL_IB_HCA filter `spec`? Entries are comma-separated names with an
 * optional ":port"; a name matches as a prefix, or exactly after "="; a leading "^" turns the list into
 * exclusions. An empty spec passes everything. */
int dccl_ib_hca_match(const char *spec, const char *name, int port);

#endif
