/* The communicator. */
#ifndef DCCL_COMM_H_
#define DCCL_COMM_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "dccl.h"
#include "transports/transport.h"

#define DCCL_COMM_MAGIC 0x6463636c636f6d6dull /* "dcclcomm" */
#define DCCL_MAX_CHANNELS 16
#define DCCL_HOSTNAME_LEN 64

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
  /* The GPU current at creation, if any (what a CUDA IPC transport needs to tell same-GPU and peer GPUs). */
  uint8_t has_device;
  int32_t cuda_device;     /* the ordinal in this process */
  uint8_t device_uuid[16]; /* the same GPU in every process */
  char pci_bus_id[16];     /* "0000:19:00.0" */
  /* Each transport's own part, written by its describe_self and read by its can_connect: opaque to core. */
  uint8_t transport_info[DCCL_MAX_TRANSPORTS][DCCL_TRANSPORT_PEER_BYTES];
};

struct sockaddr_storage;
/* The peer's network address as a socket address (port 0); -1 if it has none. */
int dccl_peer_net_addr(const struct dccl_peer_info *peer, struct sockaddr_storage *out);

/* One ring channel: the rank order, and where this rank sits. */
struct dccl_ring {
  int *order; /* nranks ranks; hosts kept together */
  int pos;    /* index of this rank in order */
  int prev, next;
};

/* A cached connection: (peer, direction, lane) -> conn. Lanes 0..nchannels-1 serve collectives; lanes from
 * DCCL_LANE_P2P serve send/recv, so a group may run a collective and point-to-point at once. */
#define DCCL_LANE_P2P 64
struct dccl_conn_entry {
  int peer, is_send, lane;
  struct dccl_conn conn;
  struct dccl_conn_entry *next;
};

struct dccl_redop_entry {
  int in_use;
  ncclDataType_t type;
  unsigned char raw[8]; /* the premultiplier, stored in the op's type */
};
#define DCCL_MAX_USER_OPS 64

struct dccl_comm {
  uint64_t magic;
  int rank, nranks;
  pid_t creator_pid; /* a forked child sees another pid and refuses the communicator */
  struct dccl_bootstrap *bootstrap;
  struct dccl_peer_info *peers; /* nranks entries */
  int nhosts;                   /* distinct host_hash values */

  int nchannels;
  struct dccl_ring rings[DCCL_MAX_CHANNELS];

  /* Lazily made connection cache: a list that only grows until destroy. Lookups are lock-free (the head is
   * published with release after the entry is complete); conn_lock orders insertions against an abort from
   * another thread walking the list. */
  _Atomic(struct dccl_conn_entry *) conns;
  pthread_mutex_t conn_lock;

  uint64_t coll_seq; /* collectives issued so far: every rank issues the same sequence */
  uint64_t *p2p_send_seq, *p2p_recv_seq; /* per peer */

  struct dccl_redop_entry user_ops[DCCL_MAX_USER_OPS];

  /* More ranks on this host than processing units: waits yield at once instead of spinning. */
  int oversubscribed;

  /* Plans of recent collectives, reused by identical calls (collectives/plan_cache.c). */
  struct dccl_plan_cache *plan_cache;

  /* Cost model constants, measured at creation (src/tune). */
  double alpha_ns;  /* per pipeline step latency */
  double bw_bytes_per_ns;

  /* Failure state. async_error is what ncclCommGetAsyncError reports; readable from any thread. */
  _Atomic int async_error;
  _Atomic int abort_flag;    /* nonzero: every wait stops */
  _Atomic int dead_rank;    /* -1, or the rank whose death was reported */
  char error_text[512];
  pthread_mutex_t error_lock;

  /* Per-communicator state a transport keeps (e.g. the socket transport's listener), by registry index; opaque to
   * core, freed by the transport's comm_free. */
  void *transport_state[DCCL_MAX_TRANSPORTS];

  /* Ranges the user registered (ncclCommRegister): transports may read them in place (zero-copy). */
  pthread_mutex_t reg_lock;
  struct dccl_reg_handle *regs;
  _Atomic int nregs; /* lets the per-step lookup skip the lock when nothing is registered */

  int finalized, destroyed;
};

/* 1 when [ptr, ptr+bytes) lies inside one range registered on comm (src/core/comm_register.c). */
int dccl_comm_is_registered(struct dccl_comm *comm, const void *ptr, uint64_t bytes);
/* Frees the handles the user did not deregister (at destroy). */
void dccl_comm_free_registrations(struct dccl_comm *comm);

/* Validates a user's handle: NULL, destroyed, or used in a forked child are refused with a reason. */
ncclResult_t dccl_comm_check(struct dccl_comm *comm, const char *call);

/* The connection for (peer, direction, lane), or NULL if not connected yet. */
struct dccl_conn *dccl_comm_find_conn(struct dccl_comm *comm, int peer, int is_send, int lane);

/* One wanted link. */
struct dccl_conn_req {
  int peer, is_send, lane;
};
/* Connects every link in reqs that is not connected yet. Every rank named must call it with the mirror request
 * (its own is_send flipped) in the same batch; it exchanges setup info over the bootstrap. */
ncclResult_t dccl_comm_connect(struct dccl_comm *comm, const struct dccl_conn_req *reqs, int n);
/* The links several communicators need, made together (one thread may drive communicators of one job). */
struct dccl_conn_batch {
  struct dccl_comm *comm;
  const struct dccl_conn_req *reqs;
  int n;
};
ncclResult_t dccl_connect_many(const struct dccl_conn_batch *batches, int nbatches);

/* Rewrites the last error of a failed `what` (e.g. "ncclAllReduce #41") so it names the rank that died, when the
 * monitor reports one within a short grace period, else the peer waited for (-1: none). Returns r. */
ncclResult_t dccl_comm_explain_failure(struct dccl_comm *comm, ncclResult_t r, const char *what, int peer);

/* Records a failure on the communicator (first one wins), sets the abort flag, and tells the peers' FIFOs. */
void dccl_comm_set_failed(struct dccl_comm *comm, ncclResult_t code, const char *text);

#endif
