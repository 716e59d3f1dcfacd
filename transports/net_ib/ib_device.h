/* Finding this process's RDMA device: of the ports that are ACTIVE and pass DCCL_IB_HCA, the one nearest the
 * process's GPU (its current device when first asked), or its CPUs, in hwloc's tree (src/topo/pci_topo.c); logged
 * at INFO with every candidate's distance. Found once per process; the answer goes into every communicator's peer info, so both ends of a link can tell whether
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

const struct dccl_ib_local *dccl_ib_local(void);

/* Does device `name`, port `port` pass the DCCL_IB_HCA filter `spec`? Entries are comma-separated names with an
 * optional ":port"; a name matches as a prefix, or exactly after "="; a leading "^" turns the list into
 * exclusions. An empty spec passes everything. */
int dccl_ib_hca_match(const char *spec, const char *name, int port);

#endif
