/* Point-to-point messages between ranks of one bootstrap.
 *
 * Each rank opens one connection to a peer the first time it sends to it and keeps it; the peer accepts it the
 * next time it waits for anything. Every wait (a recv, or a send whose socket is full) serves the listener and
 * all incoming connections, stashing messages meant for other (peer, tag) pairs, so a rank never waits on one
 * peer while another peer waits on it. Messages are framed {channel, tag, size, payload}. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "util/error.h"

/* ---- Incoming connections and messages ---- */

static void close_pending(struct dccl_bootstrap *b, int i) {
  close(b->pending[i].fd);
  b->pending[i] = b->pending[--b->npending];
}

static void add_pending(struct dccl_bootstrap *b, int fd, const struct sockaddr_storage *addr) {
  if (b->npending == b->pending_cap) {
    int cap = b->pending_cap ? 2 * b->pending_cap : 8;
    struct dccl_pending_conn *grown = realloc(b->pending, (size_t)cap * sizeof(*grown));
    if (!grown) {
      close(fd);
      return;
    }
    b->pending = grown;
    b->pending_cap = cap;
  }
  b->pending[b->npending++] = (struct dccl_pending_conn){.fd = fd, .accepted_ns = dccl_now_ns(), .addr = *addr};
}

/* Reads what a pending connection has sent of its hello (never waiting for the rest) and, once complete, files it
 * as a peer or monitor connection or drops it. */
static void admit_pending(struct dccl_bootstrap *b, int i) {
  struct dccl_pending_conn *p = &b->pending[i];
  char buf[80];
  ssize_t n;
  do n = recv(p->fd, (char *)&p->hello + p->have, sizeof(p->hello) - p->have, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) {
    DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rank %d: dropping connection from %s: closed before a complete hello", b->rank,
              dccl_socket_addr_str(&p->addr, buf, sizeof(buf)));
    close_pending(b, i);
    return;
  }
  p->have += (size_t)n;
  if (p->have < sizeof(p->hello)) return;
  const struct dccl_peer_hello *hello = &p->hello;
  int ok = hello->magic == DCCL_BOOTSTRAP_MAGIC && dccl_secret_equal(hello->secret, b->secret) && hello->rank >= 0 &&
           hello->rank < b->nranks && hello->rank != b->rank;
  int *slot = NULL;
  if (ok && hello->kind == DCCL_CONN_P2P)
    slot = &b->recv_fds[hello->rank];
  else if (ok && hello->kind == DCCL_CONN_MONITOR && b->rank == 0)
    slot = &b->monitor_fds[hello->rank];
  if (!slot || *slot >= 0) {
    DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rank %d: dropping connection from %s: bad or duplicate hello", b->rank,
              dccl_socket_addr_str(&p->addr, buf, sizeof(buf)));
    close_pending(b, i);
    return;
  }
  *slot = p->fd;
  b->pending[i] = b->pending[--b->npending];
}

static void stash_push(struct dccl_bootstrap *b, struct dccl_stashed_msg *m) {
  m->next = NULL;
  if (b->stash_tail)
    b->stash_tail->next = m;
  else
    b->stash_head = m;
  b->stash_tail = m;
}

/* Takes the oldest stashed message for (peer, channel, tag) into data. Returns 1 if found. */
static int stash_take(struct dccl_bootstrap *b, int peer, uint32_t channel, uint32_t tag, void *data, size_t size,
                      ncclResult_t *res) {
  struct dccl_stashed_msg *prev = NULL;
  for (struct dccl_stashed_msg *m = b->stash_head; m; prev = m, m = m->next) {
    if (m->peer != peer || m->channel != channel || m->tag != tag) continue;
    if (prev)
      prev->next = m->next;
    else
      b->stash_head = m->next;
    if (b->stash_tail == m) b->stash_tail = prev;
    if (m->size != size)
      *res = dccl_error(ncclInvalidUsage, "bootstrap rank %d: message from rank %d tag %u has %zu bytes, expected %zu",
                        b->rank, peer, tag, m->size, size);
    else {
      if (size) memcpy(data, m->data, size);
      *res = ncclSuccess;
    }
    free(m->data);
    free(m);
    return 1;
  }
  return 0;
}

/* The connection from `peer` is done (EOF, error or a corrupt frame): waits for that peer now fail. */
static void incoming_broken(struct dccl_bootstrap *b, int peer) {
  struct dccl_incoming *in = &b->incoming[peer];
  DCCL_TRACE(DCCL_BOOTSTRAP, "bootstrap rank %d: connection from rank %d closed", b->rank, peer);
  close(b->recv_fds[peer]);
  b->recv_fds[peer] = -1;
  b->peer_closed[peer] = 1;
  if (in->msg) free(in->msg->data);
  free(in->msg);
  memset(in, 0, sizeof(*in));
}

/* Reads what has arrived from peer without waiting for more: a frame may come in many pieces, and blocking on
 * one sender while it waits on someone else could close a cycle of waits. Stashes each completed frame. */
static ncclResult_t read_available(struct dccl_bootstrap *b, int peer) {
  struct dccl_incoming *in = &b->incoming[peer];
  int fd = b->recv_fds[peer];
  for (;;) {
    char *dst;
    size_t want;
    if (in->header_have < sizeof(in->header)) {
      dst = (char *)&in->header + in->header_have;
      want = sizeof(in->header) - in->header_have;
    } else {
      dst = (char *)in->msg->data + in->have;
      want = in->msg->size - in->have;
    }
    ssize_t n = recv(fd, dst, want, MSG_DONTWAIT); /* want > 0: an empty payload is stashed as soon as known */
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
    if (n <= 0) {
      incoming_broken(b, peer);
      return ncclSuccess;
    }
    if (in->header_have < sizeof(in->header)) {
      in->header_have += (size_t)n;
      if (in->header_have < sizeof(in->header)) continue;
      if (in->header.size > DCCL_MAX_FRAME_BYTES) {
        DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rank %d: rank %d sent a frame of %llu bytes; closing", b->rank, peer,
                  (unsigned long long)in->header.size);
        incoming_broken(b, peer);
        return ncclSuccess;
      }
      in->msg = calloc(1, sizeof(*in->msg));
      if (!in->msg || (in->header.size && !(in->msg->data = malloc(in->header.size)))) {
        free(in->msg);
        in->msg = NULL;
        incoming_broken(b, peer);
        return dccl_error(ncclSystemError, "out of memory for a %llu-byte bootstrap message",
                          (unsigned long long)in->header.size);
      }
      in->msg->peer = peer;
      in->msg->channel = in->header.channel;
      in->msg->tag = in->header.tag;
      in->msg->size = in->header.size;
      in->have = 0;
    } else {
      in->have += (size_t)n;
    }
    if (in->have == in->msg->size) {
      stash_push(b, in->msg);
      memset(in, 0, sizeof(*in));
      return ncclSuccess; /* one frame per call keeps every connection served in turn */
    }
  }
}

/* One round of waiting: serves the listener, pending connections and incoming frames for up to one poll slice.
 * If out_fd >= 0 it is watched for writability too and *out_ready says whether it became writable. */
ncclResult_t dccl_bootstrap_progress(struct dccl_bootstrap *b, int out_fd, int *out_ready, int64_t deadline_ns) {
  int cap = 2 + b->npending + b->nranks;
  if (cap > b->scratch_cap) {
    struct pollfd *grown_pfds = realloc(b->scratch_pfds, (size_t)cap * sizeof(*grown_pfds));
    if (grown_pfds) b->scratch_pfds = grown_pfds;
    int *grown_peers = realloc(b->scratch_peers, (size_t)cap * sizeof(*grown_peers));
    if (grown_peers) b->scratch_peers = grown_peers;
    if (!grown_pfds || !grown_peers) return dccl_error(ncclSystemError, "out of memory");
    b->scratch_cap = cap;
  }
  struct pollfd *pfds = b->scratch_pfds;
  int *peer_of = b->scratch_peers;
  int n = 0;
  pfds[n++] = (struct pollfd){.fd = b->listen_fd, .events = POLLIN};
  int first_pending = n;
  int npending = b->npending;
  for (int i = 0; i < npending; i++) pfds[n++] = (struct pollfd){.fd = b->pending[i].fd, .events = POLLIN};
  int first_peer = n;
  for (int r = 0; r < b->nranks; r++) {
    if (b->recv_fds[r] < 0) continue;
    peer_of[n] = r;
    pfds[n++] = (struct pollfd){.fd = b->recv_fds[r], .events = POLLIN};
  }
  int end_peer = n;
  if (out_fd >= 0) pfds[n++] = (struct pollfd){.fd = out_fd, .events = POLLOUT};
  if (out_ready) *out_ready = 0;

  ncclResult_t res = ncclSuccess;
  int ready = poll(pfds, (nfds_t)n, dccl_poll_slice_ms(deadline_ns));
  if (ready < 0 && errno != EINTR) res = dccl_error(ncclSystemError, "poll failed: %s", strerror(errno));
  if (ready > 0) {
    for (int i = first_peer; i < end_peer && res == ncclSuccess; i++)
      if (pfds[i].revents) res = read_available(b, peer_of[i]);
    /* Backwards: admitting or dropping entry i moves the last entry into its place. */
    for (int i = npending - 1; i >= 0; i--)
      if (pfds[first_pending + i].revents) admit_pending(b, i);
    if (out_fd >= 0 && out_ready) *out_ready = pfds[n - 1].revents != 0;
    if (pfds[0].revents & POLLIN) {
      for (;;) {
        int fd;
        struct sockaddr_storage peer;
        if (dccl_socket_accept(b->listen_fd, &fd, &peer) != ncclSuccess || fd < 0) break;
        add_pending(b, fd, &peer);
      }
    }
  }
  /* Connections that never said hello are dropped so they cannot pile up. */
  int64_t now = dccl_now_ns();
  for (int i = b->npending - 1; i >= 0; i--) {
    if (now - b->pending[i].accepted_ns > (int64_t)DCCL_HANDSHAKE_TIMEOUT_MS * 1000000) {
      char buf[80];
      DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rank %d: dropping connection from %s: no hello within %d ms", b->rank,
                dccl_socket_addr_str(&b->pending[i].addr, buf, sizeof(buf)), DCCL_HANDSHAKE_TIMEOUT_MS);
      close_pending(b, i);
    }
  }
  return res;
}

/* ---- Point to point ---- */

/* Sends bytes on out_fd, serving incoming traffic whenever the socket is full (so two ranks sending large
 * messages to each other cannot deadlock). */
static ncclResult_t send_serving(struct dccl_bootstrap *b, int out_fd, const void *data, size_t size,
                                 int64_t deadline_ns, int peer) {
  const char *p = data;
  while (size > 0) {
    ssize_t n = send(out_fd, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      return dccl_error(ncclRemoteError, "bootstrap rank %d: sending to rank %d failed: %s", b->rank, peer,
                        strerror(errno));
    int state = dccl_wait_state(b->abort_flag, deadline_ns);
    if (state != DCCL_WAIT_OK)
      return dccl_error(ncclRemoteError, "bootstrap rank %d: %s while sending to rank %d", b->rank,
                        state == DCCL_WAIT_ABORTED ? "aborted" : "timed out", peer);
    int writable;
    DCCLCHECK(dccl_bootstrap_progress(b, out_fd, &writable, deadline_ns));
  }
  return ncclSuccess;
}

ncclResult_t dccl_bootstrap_connect_peer(struct dccl_bootstrap *b, int peer, int kind, int64_t deadline_ns, int *fd) {
  DCCLCHECK(dccl_socket_connect_wait(&b->peer_addrs[peer], deadline_ns, b->abort_flag, fd));
  struct dccl_peer_hello hello = {.magic = DCCL_BOOTSTRAP_MAGIC, .rank = b->rank, .kind = (uint32_t)kind};
  memcpy(hello.secret, b->secret, sizeof(hello.secret));
  ncclResult_t res = send_serving(b, *fd, &hello, sizeof(hello), deadline_ns, peer);
  if (res != ncclSuccess) {
    close(*fd);
    *fd = -1;
  }
  return res;
}

static ncclResult_t check_peer(const struct dccl_bootstrap *b, int peer, const char *what) {
  if (peer < 0 || peer >= b->nranks)
    return dccl_error(ncclInvalidArgument, "bootstrap %s: peer %d is not a rank of %d", what, peer, b->nranks);
  return ncclSuccess;
}

ncclResult_t dccl_bootstrap_send_msg(struct dccl_bootstrap *b, int peer, uint32_t channel, uint32_t tag,
                                     const void *data, size_t size, int64_t deadline_ns) {
  DCCLCHECK(check_peer(b, peer, "send"));
  if (size && !data) return dccl_error(ncclInvalidArgument, "bootstrap send: data is NULL");
  if (peer == b->rank) {
    struct dccl_stashed_msg *m = calloc(1, sizeof(*m));
    if (!m || (size && !(m->data = malloc(size)))) {
      free(m);
      return dccl_error(ncclSystemError, "out of memory");
    }
    if (size) memcpy(m->data, data, size);
    m->peer = peer;
    m->channel = channel;
    m->tag = tag;
    m->size = size;
    stash_push(b, m);
    return ncclSuccess;
  }
  if (b->send_fds[peer] == DCCL_FD_BROKEN)
    return dccl_error(ncclRemoteError, "bootstrap rank %d: the connection to rank %d failed earlier", b->rank, peer);
  if (b->send_fds[peer] < 0) {
    /* The peer's listener exists since before the addresses were exchanged; if it stays unreachable the peer is
     * gone, so connecting gives up at the creation timeout even when the operation itself has none. */
    int64_t connect_deadline = dccl_bootstrap_creation_deadline();
    if (deadline_ns && deadline_ns < connect_deadline) connect_deadline = deadline_ns;
    DCCLCHECK(dccl_bootstrap_connect_peer(b, peer, DCCL_CONN_P2P, connect_deadline, &b->send_fds[peer]));
  }
  struct dccl_frame_header h = {.channel = channel, .tag = tag, .size = size};
  ncclResult_t res = send_serving(b, b->send_fds[peer], &h, sizeof(h), deadline_ns, peer);
  if (res == ncclSuccess) res = send_serving(b, b->send_fds[peer], data, size, deadline_ns, peer);
  if (res != ncclSuccess) {
    /* Part of a frame may be out: the stream cannot carry another message, so later sends fail at once. */
    close(b->send_fds[peer]);
    b->send_fds[peer] = DCCL_FD_BROKEN;
  }
  return res;
}

/* Waits for the message; with `timed_out`, a deadline passing is not an error: *timed_out says so, nothing was
 * taken, and the caller may wait again. */
static ncclResult_t recv_wait(struct dccl_bootstrap *b, int peer, uint32_t channel, uint32_t tag, void *data,
                              size_t size, int64_t deadline_ns, int *timed_out) {
  DCCLCHECK(check_peer(b, peer, "recv"));
  if (size && !data) return dccl_error(ncclInvalidArgument, "bootstrap recv: data is NULL");
  for (;;) {
    ncclResult_t res;
    if (stash_take(b, peer, channel, tag, data, size, &res)) return res;
    if (b->peer_closed[peer])
      return dccl_error(ncclRemoteError, "bootstrap rank %d: rank %d closed its connection before sending tag %u",
                        b->rank, peer, tag);
    int state = dccl_wait_state(b->abort_flag, deadline_ns);
    if (state == DCCL_WAIT_TIMED_OUT && timed_out) {
      *timed_out = 1;
      return ncclSuccess;
    }
    if (state != DCCL_WAIT_OK)
      return dccl_error(ncclRemoteError, "bootstrap rank %d: %s while waiting for tag %u from rank %d", b->rank,
                        state == DCCL_WAIT_ABORTED ? "aborted" : "timed out", tag, peer);
    DCCLCHECK(dccl_bootstrap_progress(b, -1, NULL, deadline_ns));
  }
}

ncclResult_t dccl_bootstrap_recv_msg(struct dccl_bootstrap *b, int peer, uint32_t channel, uint32_t tag, void *data,
                                     size_t size, int64_t deadline_ns) {
  return recv_wait(b, peer, channel, tag, data, size, deadline_ns, NULL);
}

ncclResult_t dccl_bootstrap_recv_by(struct dccl_bootstrap *b, int peer, uint32_t tag, void *data, size_t size,
                                    int64_t deadline_ns, int *timed_out) {
  *timed_out = 0;
  int64_t op = dccl_bootstrap_op_deadline(b); /* DCCL_TIMEOUT still ends the wait, as an error */
  if (op && op < deadline_ns) return recv_wait(b, peer, DCCL_CHANNEL_USER, tag, data, size, op, NULL);
  return recv_wait(b, peer, DCCL_CHANNEL_USER, tag, data, size, deadline_ns, timed_out);
}

ncclResult_t dccl_bootstrap_send(struct dccl_bootstrap *b, int peer, uint32_t tag, const void *data, size_t size) {
  return dccl_bootstrap_send_msg(b, peer, DCCL_CHANNEL_USER, tag, data, size, dccl_bootstrap_op_deadline(b));
}

ncclResult_t dccl_bootstrap_recv(struct dccl_bootstrap *b, int peer, uint32_t tag, void *data, size_t size) {
  return dccl_bootstrap_recv_msg(b, peer, DCCL_CHANNEL_USER, tag, data, size, dccl_bootstrap_op_deadline(b));
}
