/* The socket transport's internals, shared by its files and its unit test.
 *
 * Wire format, per connection of S streams: slot k of the FIFO travels whole on stream k % S as its 64-byte
 * header followed by header.bytes payload bytes; each stream carries its slots in order, so the receiver knows
 * which slot the next bytes of every stream belong to, and up to S slots move at once. A header whose `bytes` is
 * DCCL_SOCKET_GOODBYE says the sender closed the link on purpose (its communicator ended), so the EOF after it is
 * not a death. */
#ifndef DCCL_SOCKET_PRIVATE_H_
#define DCCL_SOCKET_PRIVATE_H_

#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include "dccl.h"
#include "transports/host_fifo_device.h"
#include "transports/transport.h"

#define DCCL_SOCKET_MAX_STREAMS 64
#define DCCL_SOCKET_GOODBYE UINT64_MAX
#define DCCL_SOCKET_HANDSHAKE_MAGIC 0x3173736c63636464ull /* "ddcclss1" */
/* An accepted connection that has not sent a whole handshake by then is closed. */
#define DCCL_SOCKET_HANDSHAKE_DEADLINE_S 10.0

/* The first bytes on every stream, sender to receiver. */
struct dccl_socket_handshake {
  uint64_t magic;
  uint64_t token;  /* the receive side's random link token, from its connection info */
  uint32_t stream; /* index of this stream in the link */
  int32_t sender_rank;
};

/* An accepted connection not yet claimed by its receive side. */
struct dccl_socket_pending {
  int fd;
  uint32_t got; /* handshake bytes read so far */
  struct dccl_socket_handshake hs;
  double accepted_at;
};

/* Per communicator (ctx->transport_state[index]): one listener for every receive side, and the stash. */
struct dccl_socket_comm_state {
  pthread_mutex_t lock;
  int listen_fd;
  struct sockaddr_storage addr;
  struct dccl_socket_pending *stash;
  int nstash, stash_cap;
  uint64_t *tokens; /* tokens of receive sides not yet complete: a handshake with any other token is dropped */
  int ntokens, tokens_cap;
};

struct dccl_socket_stream {
  int fd;
  uint64_t slot;    /* the slot this stream moves now; stream i moves slots i, i+S, i+2S, ... */
  uint64_t done;    /* bytes of that slot's header + payload moved so far */
  int said_goodbye; /* receive side: the sender closed this stream on purpose */
  int broken;       /* receive side: EOF without goodbye, or a socket error (broken_errno; 0 for EOF) */
  int broken_errno;
};

struct dccl_socket_conn {
  void *fifo; /* the FIFO's one region, private to this process */
  uint64_t fifo_bytes; /* its size, a whole number of pages */
  struct dccl_host_fifo_device device; /* a device link's GPU mapping of the FIFO */
  uint32_t nslots, nstreams;
  uint64_t slot_bytes;
  uint64_t token; /* receive side */
  int connected, aborted;
  struct dccl_socket_stream streams[DCCL_SOCKET_MAX_STREAMS];
};

/* The communicator's state, made on first use (with its listener). */
ncclResult_t dccl_socket_comm_state(struct dccl_conn *conn, struct dccl_socket_comm_state **out);
/* A fresh token, registered as expected by `state`. */
ncclResult_t dccl_socket_register_token(struct dccl_socket_comm_state *state, uint64_t *token);
/* Forgets a token and closes any stashed connection that carries it. */
void dccl_socket_forget_token(struct dccl_socket_comm_state *state, uint64_t token);
/* Receive side: accepts (and stashes for other links) until all of this link's streams have arrived. */
ncclResult_t dccl_socket_accept_streams(struct dccl_conn *conn, struct dccl_socket_comm_state *state);
void dccl_socket_comm_state_free(struct dccl_socket_comm_state *state);

/* Makes a stream ready for the data path: non-blocking, no Nagle, large buffers. */
ncclResult_t dccl_socket_tune_stream(int fd);

/* The data path (socket_stream.c). */
ncclResult_t dccl_socket_progress_send(struct dccl_conn *conn);
ncclResult_t dccl_socket_progress_recv(struct dccl_conn *conn);
/* The error for a stream that broke: peer gone (EOF, reset) or another socket failure `err` (0: EOF). */
ncclResult_t dccl_socket_stream_error(struct dccl_conn *conn, int err);

/* setup() with explicit geometry (the ops' setup reads DCCL_NSLOTS / DCCL_CHUNK_SIZE / DCCL_SOCKET_NSTREAMS). */
ncclResult_t dccl_socket_setup_geometry(struct dccl_conn *conn, void *info, uint32_t nslots, uint64_t slot_bytes,
                                        uint32_t nstreams);

#endif
