/* The rank side of the TCP bootstrap: joining through the rendezvous, point-to-point messages over direct
 * connections between rank listeners, all-gather, barrier, split and close.
 *
 * Each rank opens one connection to a peer the first time it sends to it and keeps it; the peer accepts it the
 * next time it waits for anything. Every wait (recv, a send whose socket is full) serves the listener and all
 * incoming connections, stashing messages meant for other (peer, tag) pairs, so a rank never waits on one peer
 * while another peer waits on it. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "core/debug.h"
#include "core/params.h"

int dccl_bootstrap_rank(const struct dccl_bootstrap *b) { return b->rank; }
int dccl_bootstrap_nranks(const struct dccl_bootstrap *b) { return b->nranks; }

void dccl_bootstrap_set_abort_flag(struct dccl_bootstrap *b, volatile int *abort_flag) { b->abort_flag = abort_flag; }

static int64_t creation_deadline(void) {
  int64_t s = dccl_param_int(DCCL_PARAM_BOOTSTRAP_TIMEOUT);
  return dccl_deadline_after_s(s > 0 ? s : 300);
}

static int64_t op_deadline(const struct dccl_bootstrap *b) {
  return b->op_timeout_ns ? dccl_now_ns() + b->op_timeout_ns : 0;
}

/* An empty bootstrap for `rank` of `nranks` owning `listen_fd`. */
static ncclResult_t bootstrap_alloc(int rank, int nranks, volatile int *abort_flag, struct dccl_bootstrap **out) {
  struct dccl_bootstrap *b = calloc(1, sizeof(*b));
  if (!b) return dccl_error(ncclSystemError, "out of memory");
  b->rank = rank;
  b->nranks = nranks;
  b->creator_pid = getpid();
  b->abort_flag = abort_flag;
  b->listen_fd = -1;
  b->stop_fd = -1;
  b->nmonitor = rank == 0 ? nranks : 1;
  int64_t timeout_s = dccl_param_int(DCCL_PARAM_TIMEOUT);
  b->op_timeout_ns = timeout_s > 0 ? timeout_s * 1000000000ll : 0;
  pthread_mutex_init(&b->monitor_send_lock, NULL);
  b->peer_addrs = calloc((size_t)nranks, sizeof(*b->peer_addrs));
  b->send_fds = malloc((size_t)nranks * sizeof(int));
  b->recv_fds = malloc((size_t)nranks * sizeof(int));
  b->peer_closed = calloc((size_t)nranks, 1);
  b->monitor_fds = malloc((size_t)b->nmonitor * sizeof(int));
  if (!b->peer_addrs || !b->send_fds || !b->recv_fds || !b->peer_closed || !b->monitor_fds) {
    free(b->peer_addrs);
    free(b->send_fds);
    free(b->recv_fds);
    free(b->peer_closed);
    free(b->monitor_fds);
    pthread_mutex_destroy(&b->monitor_send_lock);
    free(b);
    return dccl_error(ncclSystemError, "out of memory");
  }
  for (int r = 0; r < nranks; r++) b->send_fds[r] = b->recv_fds[r] = -1;
  for (int i = 0; i < b->nmonitor; i++) b->monitor_fds[i] = -1;
  *out = b;
  return ncclSuccess;
}

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

/* Reads the hello of a pending connection that became readable and files it as a peer or monitor connection. */
static void admit_pending(struct dccl_bootstrap *b, int i) {
  struct dccl_pending_conn *p = &b->pending[i];
  struct dccl_peer_hello hello;
  char buf[80];
  const char *who = dccl_socket_addr_str(&p->addr, buf, sizeof(buf));
  int64_t deadline = dccl_now_ns() + (int64_t)DCCL_HANDSHAKE_TIMEOUT_MS * 1000000;
  /* The hello is sent in one piece right after connect, so once readable the rest follows at once. */
  if (dccl_socket_recv_wait(p->fd, &hello, sizeof(hello), b->abort_flag, deadline) != ncclSuccess) {
    DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rank %d: dropping connection from %s: no complete hello", b->rank, who);
    close_pending(b, i);
    return;
  }
  int ok = hello.magic == DCCL_BOOTSTRAP_MAGIC && dccl_secret_equal(hello.secret, b->secret) && hello.rank >= 0 &&
           hello.rank < b->nranks && hello.rank != b->rank;
  int *slot = NULL;
  if (ok && hello.kind == DCCL_CONN_P2P) slot = &b->recv_fds[hello.rank];
  else if (ok && hello.kind == DCCL_CONN_MONITOR && b->rank == 0) slot = &b->monitor_fds[hello.rank];
  if (!slot || *slot >= 0) {
    DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rank %d: dropping connection from %s: bad or duplicate hello", b->rank, who);
    close_pending(b, i);
    return;
  }
  *slot = p->fd;
  b->pending[i] = b->pending[--b->npending];
}

static void stash_push(struct dccl_bootstrap *b, struct dccl_stashed_msg *m) {
  m->next = NULL;
  if (b->stash_tail) b->stash_tail->next = m;
  else b->stash_head = m;
  b->stash_tail = m;
}

/* Takes the oldest stashed message for (peer, channel, tag) into data. Returns 1 if found. */
static int stash_take(struct dccl_bootstrap *b, int peer, uint32_t channel, uint32_t tag, void *data, size_t size,
                      ncclResult_t *res) {
  struct dccl_stashed_msg *prev = NULL;
  for (struct dccl_stashed_msg *m = b->stash_head; m; prev = m, m = m->next) {
    if (m->peer != peer || m->channel != channel || m->tag != tag) continue;
    if (prev) prev->next = m->next;
    else b->stash_head = m->next;
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

/* Reads one frame from peer's connection into the stash. A broken connection marks the peer closed. */
static ncclResult_t read_frame(struct dccl_bootstrap *b, int peer, int64_t deadline_ns) {
  int fd = b->recv_fds[peer];
  struct dccl_frame_header h;
  ncclResult_t res = ncclSuccess;
  struct dccl_stashed_msg *m = NULL;
  char probe;
  ssize_t n = recv(fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return ncclSuccess;
  if (n <= 0) goto broken;
  res = dccl_socket_recv_wait(fd, &h, sizeof(h), b->abort_flag, deadline_ns);
  if (res != ncclSuccess) goto fail;
  if (h.size > DCCL_MAX_FRAME_BYTES) {
    DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rank %d: rank %d sent a frame of %llu bytes; closing", b->rank, peer,
              (unsigned long long)h.size);
    goto broken;
  }
  m = calloc(1, sizeof(*m));
  if (!m || (h.size && !(m->data = malloc(h.size)))) {
    free(m);
    return dccl_error(ncclSystemError, "out of memory for a %llu-byte bootstrap message",
                      (unsigned long long)h.size);
  }
  res = dccl_socket_recv_wait(fd, m->data, h.size, b->abort_flag, deadline_ns);
  if (res != ncclSuccess) goto fail;
  m->peer = peer;
  m->channel = h.channel;
  m->tag = h.tag;
  m->size = h.size;
  stash_push(b, m);
  return ncclSuccess;
fail:
  if (m) free(m->data);
  free(m);
broken:
  /* Part of a frame may have been consumed, so the stream cannot be resumed: the connection is done. */
  DCCL_TRACE(DCCL_BOOTSTRAP, "bootstrap rank %d: connection from rank %d closed", b->rank, peer);
  close(fd);
  b->recv_fds[peer] = -1;
  b->peer_closed[peer] = 1;
  /* An abort or timeout fails the caller's wait; a peer that went away fails only waits for that peer. */
  return dccl_wait_state(b->abort_flag, deadline_ns) != DCCL_WAIT_OK ? res : ncclSuccess;
}

/* One round of waiting: serves the listener, pending connections and incoming frames for up to one poll slice.
 * If out_fd >= 0 it is watched for writability too and *out_ready says whether it became writable. */
static ncclResult_t progress(struct dccl_bootstrap *b, int out_fd, int *out_ready, int64_t deadline_ns) {
  int cap = 2 + b->npending + b->nranks;
  struct pollfd stack_pfds[64];
  struct pollfd *pfds = cap <= 64 ? stack_pfds : malloc((size_t)cap * sizeof(*pfds));
  int *peer_of = malloc((size_t)cap * sizeof(int));
  if (!pfds || !peer_of) {
    if (pfds != stack_pfds) free(pfds);
    free(peer_of);
    return dccl_error(ncclSystemError, "out of memory");
  }
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
      if (pfds[i].revents) res = read_frame(b, peer_of[i], deadline_ns);
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
  if (pfds != stack_pfds) free(pfds);
  free(peer_of);
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
    DCCLCHECK(progress(b, out_fd, &writable, deadline_ns));
  }
  return ncclSuccess;
}

static ncclResult_t connect_peer(struct dccl_bootstrap *b, int peer, int kind, int64_t deadline_ns, int *fd) {
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

static ncclResult_t send_msg(struct dccl_bootstrap *b, int peer, uint32_t channel, uint32_t tag, const void *data,
                             size_t size, int64_t deadline_ns) {
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
  if (b->send_fds[peer] < 0) DCCLCHECK(connect_peer(b, peer, DCCL_CONN_P2P, deadline_ns, &b->send_fds[peer]));
  struct dccl_frame_header h = {.channel = channel, .tag = tag, .size = size};
  DCCLCHECK(send_serving(b, b->send_fds[peer], &h, sizeof(h), deadline_ns, peer));
  DCCLCHECK(send_serving(b, b->send_fds[peer], data, size, deadline_ns, peer));
  return ncclSuccess;
}

static ncclResult_t recv_msg(struct dccl_bootstrap *b, int peer, uint32_t channel, uint32_t tag, void *data,
                             size_t size, int64_t deadline_ns) {
  DCCLCHECK(check_peer(b, peer, "recv"));
  if (size && !data) return dccl_error(ncclInvalidArgument, "bootstrap recv: data is NULL");
  for (;;) {
    ncclResult_t res;
    if (stash_take(b, peer, channel, tag, data, size, &res)) return res;
    if (b->peer_closed[peer])
      return dccl_error(ncclRemoteError, "bootstrap rank %d: rank %d closed its connection before sending tag %u",
                        b->rank, peer, tag);
    int state = dccl_wait_state(b->abort_flag, deadline_ns);
    if (state != DCCL_WAIT_OK)
      return dccl_error(ncclRemoteError, "bootstrap rank %d: %s while waiting for tag %u from rank %d", b->rank,
                        state == DCCL_WAIT_ABORTED ? "aborted" : "timed out", tag, peer);
    DCCLCHECK(progress(b, -1, NULL, deadline_ns));
  }
}

ncclResult_t dccl_bootstrap_send(struct dccl_bootstrap *b, int peer, uint32_t tag, const void *data, size_t size) {
  return send_msg(b, peer, DCCL_CHANNEL_USER, tag, data, size, op_deadline(b));
}

ncclResult_t dccl_bootstrap_recv(struct dccl_bootstrap *b, int peer, uint32_t tag, void *data, size_t size) {
  return recv_msg(b, peer, DCCL_CHANNEL_USER, tag, data, size, op_deadline(b));
}

/* ---- Collectives ---- */

/* Ring all-gather among `members` (parent ranks; NULL: all ranks), `me` being this rank's index there. */
static ncclResult_t ring_allgather(struct dccl_bootstrap *b, const int *members, int nmembers, int me, uint32_t tag,
                                   void *data, size_t size, int64_t deadline_ns) {
  int next = (me + 1) % nmembers, prev = (me + nmembers - 1) % nmembers;
  int next_rank = members ? members[next] : next, prev_rank = members ? members[prev] : prev;
  char *blocks = data;
  for (int step = 0; step < nmembers - 1; step++) {
    int send_block = (me - step + nmembers) % nmembers;
    int recv_block = (me - step - 1 + nmembers) % nmembers;
    DCCLCHECK(send_msg(b, next_rank, DCCL_CHANNEL_INTERNAL, tag, blocks + (size_t)send_block * size, size,
                       deadline_ns));
    DCCLCHECK(recv_msg(b, prev_rank, DCCL_CHANNEL_INTERNAL, tag, blocks + (size_t)recv_block * size, size,
                       deadline_ns));
  }
  return ncclSuccess;
}

ncclResult_t dccl_bootstrap_allgather(struct dccl_bootstrap *b, void *data, size_t size) {
  if (!data && size) return dccl_error(ncclInvalidArgument, "bootstrap allgather: data is NULL");
  return ring_allgather(b, NULL, b->nranks, b->rank, DCCL_TAG_ALLGATHER, data, size, op_deadline(b));
}

ncclResult_t dccl_bootstrap_barrier(struct dccl_bootstrap *b) {
  char *bytes = calloc((size_t)b->nranks, 1);
  if (!bytes) return dccl_error(ncclSystemError, "out of memory");
  ncclResult_t res = dccl_bootstrap_allgather(b, bytes, 1);
  free(bytes);
  return res;
}

/* ---- Creation ---- */

ncclResult_t dccl_bootstrap_connect_monitor(struct dccl_bootstrap *b, int64_t deadline_ns) {
  if (b->nranks == 1) return ncclSuccess;
  if (b->rank != 0) return connect_peer(b, 0, DCCL_CONN_MONITOR, deadline_ns, &b->monitor_fds[0]);
  for (;;) {
    int missing = -1;
    for (int r = 1; r < b->nranks && missing < 0; r++)
      if (b->monitor_fds[r] < 0) missing = r;
    if (missing < 0) return ncclSuccess;
    int state = dccl_wait_state(b->abort_flag, deadline_ns);
    if (state != DCCL_WAIT_OK)
      return dccl_error(ncclRemoteError, "bootstrap rank 0: %s waiting for rank %d to connect",
                        state == DCCL_WAIT_ABORTED ? "aborted" : "timed out", missing);
    DCCLCHECK(progress(b, -1, NULL, deadline_ns));
  }
}

/* Opens this rank's listener on the same interface as `like` (any port). */
static ncclResult_t open_listener(struct dccl_bootstrap *b, const struct sockaddr_storage *like) {
  b->listen_addr = *like;
  if (like->ss_family == AF_INET) ((struct sockaddr_in *)&b->listen_addr)->sin_port = 0;
  else ((struct sockaddr_in6 *)&b->listen_addr)->sin6_port = 0;
  return dccl_socket_listen(&b->listen_addr, &b->listen_fd);
}

/* Registers with the rendezvous and reads back every rank's listener address. */
static ncclResult_t join_rendezvous(struct dccl_bootstrap *b, const struct dccl_id_layout *id, int64_t deadline) {
  struct sockaddr_storage root;
  DCCLCHECK(dccl_wire_addr_to_sockaddr(&id->root, &root));
  int fd;
  DCCLCHECK(dccl_socket_connect_wait(&root, deadline, b->abort_flag, &fd));
  struct dccl_register_msg reg = {.magic = DCCL_BOOTSTRAP_MAGIC, .nranks = b->nranks, .rank = b->rank};
  memcpy(reg.secret, id->secret, sizeof(reg.secret));
  dccl_wire_addr_from_sockaddr(&reg.listen_addr, &b->listen_addr);
  struct dccl_table_header header;
  struct dccl_wire_addr *table = malloc((size_t)b->nranks * sizeof(*table));
  ncclResult_t res = table ? ncclSuccess : dccl_error(ncclSystemError, "out of memory");
  if (res == ncclSuccess) res = dccl_socket_send_wait(fd, &reg, sizeof(reg), b->abort_flag, deadline);
  if (res == ncclSuccess) res = dccl_socket_recv_wait(fd, &header, sizeof(header), b->abort_flag, deadline);
  if (res == ncclSuccess && (header.magic != DCCL_BOOTSTRAP_MAGIC || header.nranks != b->nranks))
    res = dccl_error(ncclInternalError, "bootstrap rank %d: the rendezvous sent a bad table header", b->rank);
  if (res == ncclSuccess)
    res = dccl_socket_recv_wait(fd, table, (size_t)b->nranks * sizeof(*table), b->abort_flag, deadline);
  for (int r = 0; r < b->nranks && res == ncclSuccess; r++)
    res = dccl_wire_addr_to_sockaddr(&table[r], &b->peer_addrs[r]);
  close(fd);
  free(table);
  return res;
}

ncclResult_t dccl_bootstrap_init(const ncclUniqueId *id, int rank, int nranks, volatile int *abort_flag,
                                 struct dccl_bootstrap **out) {
  if (!out) return dccl_error(ncclInvalidArgument, "bootstrap init: out is NULL");
  *out = NULL;
  DCCLCHECK(dccl_bootstrap_check_id(id));
  if (nranks <= 0 || rank < 0 || rank >= nranks)
    return dccl_error(ncclInvalidArgument, "bootstrap init: rank %d of %d ranks is out of range", rank, nranks);
  int64_t deadline = creation_deadline();
  if (dccl_wait_state(abort_flag, 0) == DCCL_WAIT_ABORTED)
    return dccl_error(ncclRemoteError, "bootstrap init: aborted before joining");
  struct dccl_id_layout layout;
  memcpy(&layout, id->internal, sizeof(layout));
  struct dccl_bootstrap *b;
  DCCLCHECK(bootstrap_alloc(rank, nranks, abort_flag, &b));
  memcpy(b->secret, layout.secret, sizeof(b->secret));
  ncclResult_t res;
  struct sockaddr_storage local;
  DCCLCHECKGOTO(dccl_socket_local_addr(&local), res, fail);
  DCCLCHECKGOTO(open_listener(b, &local), res, fail);
  DCCLCHECKGOTO(join_rendezvous(b, &layout, deadline), res, fail);
  DCCLCHECKGOTO(dccl_bootstrap_connect_monitor(b, deadline), res, fail);
  char buf[80];
  DCCL_INFO(DCCL_BOOTSTRAP | DCCL_INIT, "bootstrap: rank %d of %d joined, listening on %s", rank, nranks,
            dccl_socket_addr_str(&b->listen_addr, buf, sizeof(buf)));
  *out = b;
  return ncclSuccess;
fail:
  dccl_bootstrap_close(b);
  return res;
}

ncclResult_t dccl_bootstrap_split(struct dccl_bootstrap *parent, int new_rank, int new_nranks, const int *members,
                                  struct dccl_bootstrap **out) {
  if (!parent || !members || !out) return dccl_error(ncclInvalidArgument, "bootstrap split: NULL argument");
  *out = NULL;
  if (new_nranks <= 0 || new_rank < 0 || new_rank >= new_nranks || new_nranks > parent->nranks)
    return dccl_error(ncclInvalidArgument, "bootstrap split: rank %d of %d is out of range", new_rank, new_nranks);
  if (members[new_rank] != parent->rank)
    return dccl_error(ncclInvalidArgument, "bootstrap split: members[%d] is %d, not this rank (%d)", new_rank,
                      members[new_rank], parent->rank);
  for (int i = 0; i < new_nranks; i++) {
    if (members[i] < 0 || members[i] >= parent->nranks)
      return dccl_error(ncclInvalidArgument, "bootstrap split: member %d is not a parent rank", members[i]);
    for (int j = 0; j < i; j++)
      if (members[j] == members[i])
        return dccl_error(ncclInvalidArgument, "bootstrap split: rank %d is listed twice", members[i]);
  }
  int64_t deadline = creation_deadline();
  struct dccl_bootstrap *b;
  DCCLCHECK(bootstrap_alloc(new_rank, new_nranks, parent->abort_flag, &b));
  ncclResult_t res;
  struct dccl_wire_addr *addrs = calloc((size_t)new_nranks, sizeof(*addrs));
  if (!addrs) {
    res = dccl_error(ncclSystemError, "out of memory");
    goto fail;
  }
  DCCLCHECKGOTO(open_listener(b, &parent->listen_addr), res, fail);
  /* The first member chooses the secret and hands it to the others over the parent's authenticated links. */
  if (new_rank == 0) {
    DCCLCHECKGOTO(dccl_random_bytes(b->secret, sizeof(b->secret)), res, fail);
    for (int i = 1; i < new_nranks; i++)
      DCCLCHECKGOTO(send_msg(parent, members[i], DCCL_CHANNEL_INTERNAL, DCCL_TAG_SPLIT_SECRET, b->secret,
                             sizeof(b->secret), deadline), res, fail);
  } else {
    DCCLCHECKGOTO(recv_msg(parent, members[0], DCCL_CHANNEL_INTERNAL, DCCL_TAG_SPLIT_SECRET, b->secret,
                           sizeof(b->secret), deadline), res, fail);
  }
  dccl_wire_addr_from_sockaddr(&addrs[new_rank], &b->listen_addr);
  DCCLCHECKGOTO(ring_allgather(parent, members, new_nranks, new_rank, DCCL_TAG_SPLIT_ADDR, addrs, sizeof(*addrs),
                               deadline), res, fail);
  for (int i = 0; i < new_nranks; i++) DCCLCHECKGOTO(dccl_wire_addr_to_sockaddr(&addrs[i], &b->peer_addrs[i]), res, fail);
  DCCLCHECKGOTO(dccl_bootstrap_connect_monitor(b, deadline), res, fail);
  free(addrs);
  /* The parent may be closed before the child: do not keep a pointer into it. */
  b->abort_flag = NULL;
  *out = b;
  return ncclSuccess;
fail:
  free(addrs);
  dccl_bootstrap_close(b);
  return res;
}

/* ---- Closing ---- */

static void close_fd(int *fd) {
  /* Plain close only: a forked child running this must not tear down connections its parent still uses. */
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

void dccl_bootstrap_close(struct dccl_bootstrap *b) {
  if (!b) return;
  dccl_bootstrap_stop_monitor(b);
  close_fd(&b->listen_fd);
  for (int r = 0; r < b->nranks; r++) {
    if (b->send_fds) close_fd(&b->send_fds[r]);
    if (b->recv_fds) close_fd(&b->recv_fds[r]);
  }
  for (int i = 0; b->monitor_fds && i < b->nmonitor; i++) close_fd(&b->monitor_fds[i]);
  for (int i = 0; i < b->npending; i++) close(b->pending[i].fd);
  close_fd(&b->stop_fd);
  while (b->stash_head) {
    struct dccl_stashed_msg *m = b->stash_head;
    b->stash_head = m->next;
    free(m->data);
    free(m);
  }
  pthread_mutex_destroy(&b->monitor_send_lock);
  free(b->pending);
  free(b->peer_addrs);
  free(b->send_fds);
  free(b->recv_fds);
  free(b->peer_closed);
  free(b->monitor_fds);
  free(b);
}
