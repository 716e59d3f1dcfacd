/* The socket transport's data path: filled send slots go out whole on stream (slot % S); arriving bytes land
 * straight in the receive FIFO's slots. No copies besides the kernel's. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "transports/net_socket/socket_private.h"
#include "util/error.h"

#define HEADER_BYTES ((uint64_t)DCCL_SLOT_HEAD_BYTES) /* unit 0 and the header: a slot's first line */

ncclResult_t dccl_socket_stream_error(struct dccl_conn *conn, int err) {
  const struct dccl_peer_info *peer = &conn->ctx->peers[conn->peer];
  if (err == 0 || err == ECONNRESET || err == EPIPE || err == ENOTCONN || err == ESHUTDOWN)
    return dccl_error(ncclRemoteError, "connection to rank %d (host %s) closed: peer process ended or aborted",
                      conn->peer, peer->hostname);
  return dccl_error(ncclRemoteError, "connection to rank %d (host %s) failed: %s", conn->peer, peer->hostname,
                    strerror(err));
}

/* Pushes stream s's slots out until the socket is full or no filled slot is left for it. */
static ncclResult_t send_stream(struct dccl_conn *conn, struct dccl_socket_stream *s, uint64_t tail) {
  struct dccl_socket_conn *sc = conn->priv;
  while (s->slot < tail) {
    char *slot = dccl_conn_slot(&conn->desc, conn->regions, s->slot);
    const struct dccl_slot_header *h = dccl_conn_slot_header(conn, s->slot);
    if (h->bytes > sc->slot_bytes)
      return dccl_error(ncclInternalError,
                        "socket link to rank %d: slot %llu claims %llu bytes, more than the slot's "
                        "%llu",
                        conn->peer, (unsigned long long)s->slot, (unsigned long long)h->bytes,
                        (unsigned long long)sc->slot_bytes);
    uint64_t total = HEADER_BYTES + h->bytes;
    ssize_t n = send(s->fd, slot + s->done, total - s->done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
      return dccl_socket_stream_error(conn, errno);
    }
    s->done += (uint64_t)n;
    if (s->done < total) return ncclSuccess; /* the socket took part: it is full */
    s->done = 0;
    s->slot += sc->nstreams;
  }
  return ncclSuccess;
}

ncclResult_t dccl_socket_progress_send(struct dccl_conn *conn) {
  struct dccl_socket_conn *sc = conn->priv;
  uint64_t tail = dccl_ld_acquire_u64(dccl_conn_tail(conn));
  for (uint32_t i = 0; i < sc->nstreams; i++) DCCLCHECK(send_stream(conn, &sc->streams[i], tail));
  /* A slot is free again once its stream has moved past it. */
  uint64_t head = dccl_ld_relaxed_u64(dccl_conn_head(conn)), h = head;
  while (h < tail && sc->streams[h % sc->nstreams].slot > h) h++;
  if (h != head) dccl_st_release_u64(dccl_conn_head(conn), h);
  return ncclSuccess;
}

/* Reads stream s's slots into free FIFO slots until the socket is empty or the FIFO is full. */
static ncclResult_t recv_stream(struct dccl_conn *conn, struct dccl_socket_stream *s, uint64_t head) {
  struct dccl_socket_conn *sc = conn->priv;
  while (!s->said_goodbye && !s->broken && s->slot - head < sc->nslots) {
    char *slot = dccl_conn_slot(&conn->desc, conn->regions, s->slot);
    const struct dccl_slot_header *h = dccl_conn_slot_header(conn, s->slot);
    /* The header first: it says how many payload bytes follow. */
    uint64_t want = s->done < HEADER_BYTES ? HEADER_BYTES - s->done : HEADER_BYTES + h->bytes - s->done;
    ssize_t n = recv(s->fd, slot + s->done, want, MSG_DONTWAIT); /* want > 0: a complete slot moved on */
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
      /* Reported once this stream holds up the next slot: the other streams may still carry complete slots
       * (a peer that exits right after its last send), and those are delivered first. */
      s->broken = 1;
      s->broken_errno = n == 0 ? 0 : errno;
      return ncclSuccess;
    }
    s->done += (uint64_t)n;
    if (s->done == HEADER_BYTES) {
      if (h->bytes == DCCL_SOCKET_GOODBYE) {
        s->said_goodbye = 1;
        s->done = 0;
        return ncclSuccess;
      }
      if (h->bytes > sc->slot_bytes)
        return dccl_error(ncclRemoteError,
                          "socket link from rank %d (host %s): a slot of %llu bytes arrived, more "
                          "than the %llu agreed (corrupt stream)",
                          conn->peer, conn->ctx->peers[conn->peer].hostname, (unsigned long long)h->bytes,
                          (unsigned long long)sc->slot_bytes);
    }
    if (s->done < HEADER_BYTES || s->done < HEADER_BYTES + h->bytes) {
      if ((uint64_t)n < want) return ncclSuccess; /* the socket is drained for now */
      continue;
    }
    s->done = 0;
    s->slot += sc->nstreams;
  }
  return ncclSuccess;
}

ncclResult_t dccl_socket_progress_recv(struct dccl_conn *conn) {
  struct dccl_socket_conn *sc = conn->priv;
  uint64_t head = dccl_ld_acquire_u64(dccl_conn_head(conn));
  for (uint32_t i = 0; i < sc->nstreams; i++) DCCLCHECK(recv_stream(conn, &sc->streams[i], head));
  /* Publish every slot that is complete, in order. */
  uint64_t tail = dccl_ld_relaxed_u64(dccl_conn_tail(conn)), t = tail;
  while (sc->streams[t % sc->nstreams].slot > t) t++;
  if (t != tail) dccl_st_release_u64(dccl_conn_tail(conn), t);
  /* A broken stream is an error once the consumer has drained everything before the slot it can never get. */
  const struct dccl_socket_stream *next = &sc->streams[t % sc->nstreams];
  if (next->broken && t == head) return dccl_socket_stream_error(conn, next->broken_errno);
  return ncclSuccess;
}
