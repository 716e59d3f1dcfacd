/* The socket transport's per-communicator listener: every receive side of the communicator is reached at one
 * address, and the streams that arrive there are sorted by the link token in their handshake. Connections for a
 * link whose receive side is not connecting yet wait in a stash; anything unknown or silent is closed. */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "transports/net_socket/socket_private.h"
#include "util/error.h"
#include "util/net_addr.h"
#include "util/params.h"
#include "util/socket.h"

#define DCCL_SOCKET_BUFFER_BYTES (4 << 20)
/* Poll interval of the accept loop: bounds how late an abort or a stale handshake is noticed. */
#define ACCEPT_POLL_MS 100

static pthread_mutex_t state_create_lock = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static ncclResult_t set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return dccl_error(ncclSystemError, "cannot make socket %d non-blocking: %s", fd, strerror(errno));
  return ncclSuccess;
}

ncclResult_t dccl_socket_tune_stream(int fd) {
  DCCLCHECK(set_nonblocking(fd));
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
    return dccl_error(ncclSystemError, "cannot set TCP_NODELAY on a data socket: %s", strerror(errno));
  /* Several slots in flight per stream. A fixed size turns autotuning off; measured on loopback, 1-4 MiB moved
   * 256 KiB slots 10-20% faster and steadier than autotuning. The kernel caps it at net.core.[rw]mem_max. */
  int bytes = DCCL_SOCKET_BUFFER_BYTES;
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes)) != 0)
    DCCL_INFO(DCCL_NET, "cannot set socket buffers to %d bytes: %s", bytes, strerror(errno));
  return ncclSuccess;
}

ncclResult_t dccl_socket_comm_state(struct dccl_conn *conn, struct dccl_socket_comm_state **out) {
  ncclResult_t res = ncclSuccess;
  struct dccl_transport_ctx *ctx = conn->ctx;
  void **slot = &ctx->transport_state[conn->transport->index];
  pthread_mutex_lock(&state_create_lock);
  struct dccl_socket_comm_state *st = *slot;
  if (st) goto done;
  st = calloc(1, sizeof(*st));
  if (!st) {
    res = dccl_error(ncclSystemError, "out of memory for the socket transport's state");
    goto done;
  }
  st->listen_fd = -1;
  DCCLCHECKGOTO(dccl_socket_local_addr(&st->addr), res, fail);
  if (st->addr.ss_family == AF_INET) ((struct sockaddr_in *)&st->addr)->sin_port = 0;
  if (st->addr.ss_family == AF_INET6) ((struct sockaddr_in6 *)&st->addr)->sin6_port = 0;
  DCCLCHECKGOTO(dccl_socket_listen(&st->addr, &st->listen_fd), res, fail);
  DCCLCHECKGOTO(set_nonblocking(st->listen_fd), res, fail);
  pthread_mutex_init(&st->lock, NULL);
  char buf[128];
  DCCL_INFO(DCCL_NET, "rank %d: socket transport listening on %s", ctx->rank,
            dccl_socket_addr_str(&st->addr, buf, sizeof(buf)));
  *slot = st;
  goto done;
fail:
  if (st->listen_fd >= 0) close(st->listen_fd);
  free(st);
  st = NULL;
done:
  pthread_mutex_unlock(&state_create_lock);
  *out = st;
  return res;
}

static int token_index(const struct dccl_socket_comm_state *st, uint64_t token) {
  for (int i = 0; i < st->ntokens; i++)
    if (st->tokens[i] == token) return i;
  return -1;
}

static uint64_t random_token(void) {
  uint64_t t = 0;
  if (getrandom(&t, sizeof(t), GRND_NONBLOCK) != (ssize_t)sizeof(t)) {
    /* No entropy yet (very early boot): the token only has to be unique, not secret. */
    static _Atomic uint64_t counter;
    t = ((uint64_t)getpid() << 32) ^ (uint64_t)(now_s() * 1e9) ^
        (atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull);
  }
  return t;
}

ncclResult_t dccl_socket_register_token(struct dccl_socket_comm_state *st, uint64_t *token) {
  pthread_mutex_lock(&st->lock);
  uint64_t t;
  do {
    t = random_token();
  } while (t == 0 || token_index(st, t) >= 0);
  if (st->ntokens == st->tokens_cap) {
    int cap = st->tokens_cap ? 2 * st->tokens_cap : 16;
    uint64_t *grown = realloc(st->tokens, (size_t)cap * sizeof(*grown));
    if (!grown) {
      pthread_mutex_unlock(&st->lock);
      return dccl_error(ncclSystemError, "out of memory for socket link tokens");
    }
    st->tokens = grown;
    st->tokens_cap = cap;
  }
  st->tokens[st->ntokens++] = t;
  pthread_mutex_unlock(&st->lock);
  *token = t;
  return ncclSuccess;
}

/* Removes stash entry i (the last one takes its place); closes its socket unless it was handed to a link. */
static void stash_remove(struct dccl_socket_comm_state *st, int i, int close_fd) {
  if (close_fd) close(st->stash[i].fd);
  st->stash[i] = st->stash[--st->nstash];
}

static void forget_token_locked(struct dccl_socket_comm_state *st, uint64_t token) {
  int i = token_index(st, token);
  if (i >= 0) st->tokens[i] = st->tokens[--st->ntokens];
  for (int k = 0; k < st->nstash;) {
    if (st->stash[k].got == sizeof(st->stash[k].hs) && st->stash[k].hs.token == token)
      stash_remove(st, k, 1);
    else
      k++;
  }
}

void dccl_socket_forget_token(struct dccl_socket_comm_state *st, uint64_t token) {
  pthread_mutex_lock(&st->lock);
  forget_token_locked(st, token);
  pthread_mutex_unlock(&st->lock);
}

static ncclResult_t stash_push(struct dccl_socket_comm_state *st, int fd) {
  if (st->nstash == st->stash_cap) {
    int cap = st->stash_cap ? 2 * st->stash_cap : 16;
    struct dccl_socket_pending *grown = realloc(st->stash, (size_t)cap * sizeof(*grown));
    if (!grown) {
      close(fd);
      return dccl_error(ncclSystemError, "out of memory for the socket transport's pending connections");
    }
    st->stash = grown;
    st->stash_cap = cap;
  }
  struct dccl_socket_pending *p = &st->stash[st->nstash++];
  memset(p, 0, sizeof(*p));
  p->fd = fd;
  p->accepted_at = now_s();
  return ncclSuccess;
}

/* Reads what has arrived of stash entry i's handshake. Returns 1 if the entry is still there (complete or not),
 * 0 if it was dropped; *progressed is set when bytes arrived. */
static int stash_read_handshake(struct dccl_socket_comm_state *st, int i, double now, int *progressed) {
  struct dccl_socket_pending *p = &st->stash[i];
  const uint32_t need = sizeof(p->hs);
  if (p->got < need) {
    ssize_t n = recv(p->fd, (char *)&p->hs + p->got, need - p->got, MSG_DONTWAIT);
    if (n > 0) {
      p->got += (uint32_t)n;
      *progressed = 1;
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      DCCL_INFO(DCCL_NET, "socket listener: a connection closed before its handshake; dropped");
      stash_remove(st, i, 1);
      return 0;
    }
    if (p->got < need) {
      if (now - p->accepted_at <= DCCL_SOCKET_HANDSHAKE_DEADLINE_S) return 1;
      DCCL_WARN(DCCL_NET, "socket listener: a connection sent no handshake within %.0f s; closed",
                DCCL_SOCKET_HANDSHAKE_DEADLINE_S);
      stash_remove(st, i, 1);
      return 0;
    }
    /* Every legitimate token is registered before its info leaves this process, so an unknown one is stale
     * (a link already closed) or foreign, and can never match. */
    if (p->hs.magic != DCCL_SOCKET_HANDSHAKE_MAGIC || token_index(st, p->hs.token) < 0) {
      DCCL_WARN(DCCL_NET, "socket listener: dropped a connection with an unknown handshake (stale link or not DCCL)");
      stash_remove(st, i, 1);
      return 0;
    }
  }
  return 1;
}

/* Reads pending handshakes and hands this link's complete ones to it. */
static ncclResult_t claim_streams(struct dccl_conn *conn, struct dccl_socket_comm_state *st, double now,
                                  int *progressed) {
  struct dccl_socket_conn *sc = conn->priv;
  for (int i = 0; i < st->nstash;) {
    if (!stash_read_handshake(st, i, now, progressed)) continue;
    struct dccl_socket_pending *p = &st->stash[i];
    if (p->got < sizeof(p->hs) || p->hs.token != sc->token) {
      i++;
      continue;
    }
    if (p->hs.stream >= sc->nstreams || sc->streams[p->hs.stream].fd >= 0 || p->hs.sender_rank != conn->peer) {
      DCCL_WARN(DCCL_NET, "socket link from rank %d: bad handshake (stream %u of %u, from rank %d); dropped",
                conn->peer, p->hs.stream, sc->nstreams, (int)p->hs.sender_rank);
      stash_remove(st, i, 1);
      continue;
    }
    sc->streams[p->hs.stream].fd = p->fd;
    stash_remove(st, i, 0);
    *progressed = 1;
  }
  return ncclSuccess;
}

static ncclResult_t accept_pending(struct dccl_socket_comm_state *st, int *progressed) {
  for (;;) {
    int fd = accept4(st->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      DCCLCHECK(stash_push(st, fd));
      *progressed = 1;
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
    return dccl_error(ncclSystemError, "accept on the socket transport's listener failed: %s", strerror(errno));
  }
}

/* Sleeps until the listener or an incomplete handshake has something, or ACCEPT_POLL_MS. */
static void wait_for_activity(struct dccl_socket_comm_state *st) {
  struct pollfd *fds = malloc(sizeof(*fds) * (size_t)(st->nstash + 1));
  int n = 0;
  if (fds) {
    fds[n++] = (struct pollfd){.fd = st->listen_fd, .events = POLLIN};
    for (int i = 0; i < st->nstash; i++)
      if (st->stash[i].got < sizeof(st->stash[i].hs))
        fds[n++] = (struct pollfd){.fd = st->stash[i].fd, .events = POLLIN};
    (void)poll(fds, (nfds_t)n, ACCEPT_POLL_MS);
    free(fds);
  } else {
    struct timespec t = {0, ACCEPT_POLL_MS * 1000000L};
    nanosleep(&t, NULL);
  }
}

static uint32_t streams_claimed(const struct dccl_socket_conn *sc) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < sc->nstreams; i++) n += sc->streams[i].fd >= 0;
  return n;
}

ncclResult_t dccl_socket_accept_streams(struct dccl_conn *conn, struct dccl_socket_comm_state *st) {
  struct dccl_socket_conn *sc = conn->priv;
  struct dccl_transport_ctx *ctx = conn->ctx;
  int64_t timeout_s = dccl_param_int(DCCL_PARAM_BOOTSTRAP_TIMEOUT);
  double deadline = now_s() + (double)(timeout_s > 0 ? timeout_s : 300);
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&st->lock);
  for (;;) {
    int progressed = 0;
    double now = now_s();
    DCCLCHECKGOTO(claim_streams(conn, st, now, &progressed), res, out);
    if (streams_claimed(sc) == sc->nstreams) break;
    DCCLCHECKGOTO(accept_pending(st, &progressed), res, out);
    if (progressed) continue;
    if (atomic_load(ctx->abort_flag)) {
      res = dccl_error(ncclRemoteError, "communicator aborted while rank %d waited for rank %d's socket streams",
                       ctx->rank, conn->peer);
      goto out;
    }
    if (now > deadline) {
      res = dccl_error(ncclRemoteError,
                       "timed out after %lld s waiting for rank %d (host %s) to open its socket link to rank %d "
                       "(%u of %u streams arrived); see DCCL_BOOTSTRAP_TIMEOUT",
                       (long long)timeout_s, conn->peer, ctx->peers[conn->peer].hostname, ctx->rank,
                       streams_claimed(sc), sc->nstreams);
      goto out;
    }
    wait_for_activity(st);
  }
  /* Complete: later connections with this token are stale. */
  forget_token_locked(st, sc->token);
out:
  pthread_mutex_unlock(&st->lock);
  return res;
}

void dccl_socket_comm_state_free(struct dccl_socket_comm_state *st) {
  if (!st) return;
  if (st->listen_fd >= 0) close(st->listen_fd);
  for (int i = 0; i < st->nstash; i++) close(st->stash[i].fd);
  free(st->stash);
  free(st->tokens);
  pthread_mutex_destroy(&st->lock);
  free(st);
}
