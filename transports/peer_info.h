/* What every rank learns about every other at creation: core fills and exchanges it, transports choose by it. */
#ifndef DCCL_PEER_INFO_H_
#define DCCL_PEER_INFO_H_

#include <stdint.h>

#define DCCL_HOSTNAME_LEN 64
/* Room each transport has in every rank's peer info for what its peers must know before they choose it (e.g.
 * net_ib: an active RDMA port and its link layer). */
#define DCCL_MAX_TRANSPORTS 8
#define DCCL_TRANSPORT_PEER_BYTES 32

/* What every rank learns about every other at creation (exchanged by the bootstrap). Both ends of a link choose
 * the transport from these alone, so they always agree. */
struct dccl_peer_info {
  int rank;
  int pid;
  uint64_t host_hash;      /* DCCL_HOSTID if set, else hostname + boot id: ranks with equal hashes share a host */
  uint64_t real_host_hash; /* hostname + boot id, always: shared memory needs really the same kernel */
  uint64_t comm_nonce;     /* random per communicator, the same on every rank: names shm segments */
  char hostname[DCCL_HOSTNAME_LEN];
  char host_id[DCCL_HOSTNAME_LEN]; /* the identity behind host_hash, for messages */
  uint16_t net_family; /* AF_INET / AF_INET6: the address other hosts reach this rank at (RoCE GID choice) */
  uint8_t net_addr[16];
  /* The GPU this rank is for, if any: what a CUDA IPC transport needs to tell same-GPU and peer GPUs apart. */
  uint8_t has_device;
  int32_t cuda_device;     /* the ordinal in this process */
  uint8_t device_uuid[16]; /* the same GPU in every process */
  char pci_bus_id[16];     /* "0000:19:00.0" */
  uint8_t deterministic; /* DCCL_DETERMINISTIC as this rank read it: every rank must agree */
  /* Each transport's own part, written by its describe_self and read by its can_connect: opaque to core. */
  uint8_t transport_info[DCCL_MAX_TRANSPORTS][DCCL_TRANSPORT_PEER_BYTES];
};

struct sockaddr_storage;
/* The peer's network address as a socket address (port 0); -1 if it has none. */
int dccl_peer_net_addr(const struct dccl_peer_info *peer, struct sockaddr_storage *out);

#endif
