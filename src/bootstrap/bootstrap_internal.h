/* Private to src/bootstrap: wire formats and the bootstrap object. Every rank of a job runs the same build, so wire
 * structs use fixed-size fields in host byte order. */
#ifndef DCCL_BOOTSTRAP_INTERNAL_H_
#define DCCL_BOOTSTRAP_INTERNAL_H_

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "bootstrap/bootstrap.h"
#include "util/clock.h"
#include "util/deadline.h"
#include "util/net_addr.h"
#include "util/socket.h"

#define DCCL_BOOTSTRAP_MAGIC 0x6463636c626f6f74ull /* "dcclboot" */
#define DCCL_SECRET_BYTES 16
/* How long an accepted connection may take to present its handshake before it is dropped. */
#define DCCL_HANDSHAKE_TIMEOUT_MS 5000
/* Largest frame a peer may announce; bootstrap messages are small, a bigger size means a corrupt stream. */
#define DCCL_MAX_FRAME_BYTES (1ull << 31)

/* An IPv4 or IPv6 address in a fixed 24 bytes (a sockaddr_storage does not fit in the id next to the rest). */
struct dccl_wire_addr {
  uint16_t family; /* AF_INET or AF_INET6 */
  uint16_t port;   /* network byte order */
  uint32_t scope_id;
  uint8_t addr[16];
};

/* The 128-byte ncclUniqueId. */
struct dccl_id_layout {
  uint64_t magic;
  uint8_t secret[DCCL_SECRET_BYTES];
  struct dccl_wire_addr root;
};

/* Rank -> rendezvous. */
struct dccl_register_msg {
  uint64_t magic;
  uint8_t secret[DCCL_SECRET_BYTES];
  int32_t nranks;
  int32_t rank;
  struct dccl_wire_addr listen_addr;
};

/* Rendezvous -> rank, followed by nranks dccl_wire_addr. */
struct dccl_table_header {
  uint64_t magic;
  int32_t nranks;
  int32_t pad;
};

/* Sent by the connecting side of every connection between ranks. */
enum dccl_conn_kind { DCCL_CONN_P2P = 1, DCCL_CONN_MONITOR = 2 };
struct dccl_peer_hello {
  uint64_t magic;
  uint8_t secret[DCCL_SECRET_BYTES];
  int32_t rank;
  uint32_t kind;
};

/* Every point-to-point message. Internal messages (all-gather, split) use their own channel so a user tag never
 * collides with them. */
enum dccl_channel { DCCL_CHANNEL_USER = 0, DCCL_CHANNEL_INTERNAL = 1 };
enum dccl_internal_tag { DCCL_TAG_ALLGATHER = 1, DCCL_TAG_SPLIT_SECRET = 2, DCCL_TAG_SPLIT_ADDR = 3 };
struct dccl_frame_header {
  uint32_t channel;
  uint32_t tag;
  uint64_t size;
};

/* Monitor connection messages. A stall report: a rank asks rank 0 (ASK), rank 0 asks everyone (STATUS_REQ),
 * each answers (STATUS, in st[0]), and rank 0 sends a contradiction to everyone (VERDICT, the pair in st). */
enum dccl_monitor_msg_type {
  DCCL_MON_GOODBYE = 1,
  DCCL_MON_DEATH = 2,
  DCCL_MON_STALL_ASK = 3,
  DCCL_MON_STATUS_REQ = 4,
  DCCL_MON_STATUS = 5,
  DCCL_MON_VERDICT = 6,
  DCCL_MON_VERDICT_UP = 7 /* a rank's verdict, for rank 0 to send to everyone */
};
struct dccl_monitor_msg {
  uint32_t type;
  int32_t rank;
  struct dccl_stall_status st[2];
};

/* A message that arrived before anyone asked for it. */
struct dccl_stashed_msg {
  int peer;
  uint32_t channel, tag;
  size_t size;
  void *data;
  struct dccl_stashed_msg *next;
};

/* An accepted connection that has not presented its hello yet. */
struct dccl_pending_conn {
  int fd;
  int64_t accepted_ns;
  struct sockaddr_storage addr;
  size_t have; /* bytes of hello received so far */
  struct dccl_peer_hello hello;
};

/* A frame being received from one peer, piece by piece. */
struct dccl_incoming {
  struct dccl_frame_header header;
  size_t header_have;
  struct dccl_stashed_msg *msg; /* allocated once the header is complete */
  size_t have;                  /* payload bytes received */
};

/* send_fds value of a connection that failed mid-message. */
#define DCCL_FD_BROKEN (-2)

struct dccl_bootstrap {
  int rank, nranks;
  pid_t creator_pid; /* a forked child must not touch the monitor thread or talk for the parent */
  _Atomic int *abort_flag;
  uint8_t secret[DCCL_SECRET_BYTES];
  int listen_fd;
  struct sockaddr_storage listen_addr;
  struct sockaddr_storage *peer_addrs; /* every rank's listener */
  int *send_fds;                       /* connections this rank opened to send; -1 until first send */
  int *recv_fds;                       /* connections peers opened to send to us; -1 until accepted */
  struct dccl_incoming *incoming;      /* per peer: the frame arriving on recv_fds */
  char *peer_closed;                   /* the peer's sending connection reached EOF or broke */
  struct dccl_pending_conn *pending;
  int npending, pending_cap;
  struct dccl_stashed_msg *stash_head, *stash_tail;
  struct pollfd *scratch_pfds; /* reused by every wait, so waiting allocates nothing */
  int *scratch_peers;
  int scratch_cap;
  int64_t op_timeout_ns; /* DCCL_TIMEOUT for send/recv/collectives; 0: none */

  /* Liveness: on rank 0, monitor_fds[r] is rank r's monitor connection; elsewhere monitor_fds[0] is ours to 0. */
  int *monitor_fds;
  int nmonitor;
  int stop_fd; /* eventfd that wakes the monitor thread to stop */
  pthread_t monitor_thread;
  int monitor_running;
  pthread_mutex_t monitor_send_lock; /* goodbye (user thread) and death notices (monitor thread) share fds */
  void (*on_death)(void *arg, int dead_rank);
  void *on_death_arg;
  _Atomic int death_reported;
  _Atomic int said_goodbye;
  /* Stall reports (bootstrap_monitor.c). */
  struct dccl_stall_hooks stall;
  int ask_fd;  /* eventfd: a waiting thread asks its monitor thread for a report */
  int wake_fd; /* eventfd: the monitor thread calls the stall hooks' tick */
};

/* Wire helpers (bootstrap_wire.c). */
void dccl_wire_addr_from_sockaddr(struct dccl_wire_addr *wire, const struct sockaddr_storage *addr);
ncclResult_t dccl_wire_addr_to_sockaddr(const struct dccl_wire_addr *wire, struct sockaddr_storage *addr);
/* Fills buf with random bytes from the kernel. */
ncclResult_t dccl_random_bytes(void *buf, size_t len);
/* Constant-time compare of two secrets: nonzero if equal. */
int dccl_secret_equal(const uint8_t *a, const uint8_t *b);

/* Point to point (bootstrap_p2p.c). */
ncclResult_t dccl_bootstrap_send_msg(struct dccl_bootstrap *b, int peer, uint32_t channel, uint32_t tag,
                                     const void *data, size_t size, int64_t deadline_ns);
ncclResult_t dccl_bootstrap_recv_msg(struct dccl_bootstrap *b, int peer, uint32_t channel, uint32_t tag, void *data,
                                     size_t size, int64_t deadline_ns);
/* Opens a connection to peer's listener and says hello as `kind`. */
ncclResult_t dccl_bootstrap_connect_peer(struct dccl_bootstrap *b, int peer, int kind, int64_t deadline_ns, int *fd);
/* One round of waiting: serves the listener, pending connections and incoming frames for up to one poll slice.
 * If out_fd >= 0 it is watched for writability too and *out_ready says whether it became writable. */
ncclResult_t dccl_bootstrap_progress(struct dccl_bootstrap *b, int out_fd, int *out_ready, int64_t deadline_ns);
/* Deadline for communicator creation (DCCL_BOOTSTRAP_TIMEOUT). */
int64_t dccl_bootstrap_creation_deadline(void);
/* Deadline for one send/recv/collective (DCCL_TIMEOUT; 0: none). */
int64_t dccl_bootstrap_op_deadline(const struct dccl_bootstrap *b);

/* Rank 0 waits for every other rank's monitor connection; the others open theirs (bootstrap_tcp.c). */
ncclResult_t dccl_bootstrap_connect_monitor(struct dccl_bootstrap *b, int64_t deadline_ns);

/* Stops and joins the monitor thread if this process started it (bootstrap_monitor.c). */
void dccl_bootstrap_stop_monitor(struct dccl_bootstrap *b);

#endif
