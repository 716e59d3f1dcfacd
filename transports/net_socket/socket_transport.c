/* The TCP socket transport: the fallback that reaches any peer. Each side of a link keeps a private FIFO; the
 * progress function moves filled slots from the sender's FIFO over S TCP streams into the receiver's FIFO. Device
 * links keep the FIFOs in pinned host memory the kernels reach (transports/host_fifo_device.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transports/net_socket/socket_private.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/net_addr.h"
#include "util/params.h"
#include "util/socket.h"

#define SOCKET_INFO_MAGIC 0x4b434f53u /* "SOCK" */
#define SOCKET_MAX_SLOT_BYTES (1ull << 40)

/* The 256-byte blob: geometry from both sides; the receive side adds where to connect and the link's token. */
struct socket_conn_info {
  uint32_t magic;
  uint32_t nslots;
  uint64_t slot_bytes;
  uint32_t nstreams;
  int32_t is_send;
  uint64_t token;
  struct sockaddr_storage addr;
};
_Static_assert(sizeof(struct socket_conn_info) <= DCCL_CONN_INFO_BYTES, "socket info must fit the connection blob");

static const char *peer_host(const struct dccl_conn *conn) {
  return conn->ctx->peers[conn->peer].hostname;
}

static int socket_can_connect(const struct dccl_peer_info *self, const struct dccl_peer_info *peer, const void *mine,
                              const void *theirs) {
  return 1; /* TCP reaches every peer the bootstrap reached */
}

ncclResult_t dccl_socket_setup_geometry(struct dccl_conn *conn, void *info, uint32_t nslots, uint64_t slot_bytes,
                                        uint32_t nstreams) {
  if (nslots < 1 || slot_bytes < 1 || slot_bytes > SOCKET_MAX_SLOT_BYTES || nstreams < 1 ||
      nstreams > DCCL_SOCKET_MAX_STREAMS)
    return dccl_error(ncclInvalidArgument,
                      "socket link with rank %d: bad geometry (%u slots of %llu bytes, %u streams; streams must be "
                      "1..%d)",
                      conn->peer, nslots, (unsigned long long)slot_bytes, nstreams, DCCL_SOCKET_MAX_STREAMS);
  struct dccl_socket_conn *sc = calloc(1, sizeof(*sc));
  if (!sc) return dccl_error(ncclSystemError, "out of memory for a socket connection");
  sc->nslots = nslots;
  sc->slot_bytes = slot_bytes;
  sc->nstreams = nstreams;
  for (uint32_t i = 0; i < DCCL_SOCKET_MAX_STREAMS; i++) {
    sc->streams[i].fd = -1;
    sc->streams[i].slot = i;
  }
  void *mem = NULL;
  /* Bulk only: the kernel copies whole slots, so per-unit flags would only double the bytes on the wire. */
  struct dccl_conn_desc desc;
  uint64_t region_bytes = dccl_conn_desc_layout(&desc, nslots, slot_bytes, 0, DCCL_REGION_RECV);
  /* Whole pages, so every slot's payload is as aligned as the slot layout allows and a device link can pin it. */
  region_bytes = (region_bytes + 4095) / 4096 * 4096;
  sc->fifo_bytes = region_bytes;
  if (posix_memalign(&mem, 4096, region_bytes) != 0) {
    free(sc);
    return dccl_error(ncclSystemError, "out of memory for a socket FIFO of %u x %llu bytes", nslots,
                      (unsigned long long)slot_bytes);
  }
  sc->fifo = mem;
  dccl_fifo_init(sc->fifo, &desc);
  conn->priv = sc;
  (void)dccl_conn_bind(conn, &desc, sc->fifo, sc->fifo); /* bulk only: nothing to allocate */

  struct socket_conn_info out;
  memset(&out, 0, sizeof(out));
  out.magic = SOCKET_INFO_MAGIC;
  out.nslots = nslots;
  out.slot_bytes = slot_bytes;
  out.nstreams = nstreams;
  out.is_send = conn->is_send;
  if (!conn->is_send) {
    struct dccl_socket_comm_state *st;
    ncclResult_t res = dccl_socket_comm_state(conn, &st);
    if (res == ncclSuccess) res = dccl_socket_register_token(st, &sc->token);
    if (res != ncclSuccess) {
      free(sc->fifo);
      free(sc);
      conn->priv = NULL;
      dccl_conn_unbind(conn);
      return res;
    }
    out.token = sc->token;
    out.addr = st->addr;
  }
  memset(info, 0, DCCL_CONN_INFO_BYTES);
  memcpy(info, &out, sizeof(out));
  return ncclSuccess;
}

/* A device link's FIFO has the device geometry (DCCL_DEV_NSLOTS x DCCL_DEV_CHUNK_SIZE), since the kernels at both
 * ends step through it as through any device link. */
static ncclResult_t socket_setup(struct dccl_conn *conn, void *info) {
  int64_t nslots = dccl_param_int(conn->device ? DCCL_PARAM_DEV_NSLOTS : DCCL_PARAM_NSLOTS);
  int64_t slot_bytes = dccl_param_int(conn->device ? DCCL_PARAM_DEV_CHUNK_SIZE : DCCL_PARAM_CHUNK_SIZE);
  int64_t nstreams = dccl_param_int(DCCL_PARAM_SOCKET_NSTREAMS);
  if (nslots < 1 || nslots > 0x7fffffff || slot_bytes < 1 || nstreams < 1 || nstreams > DCCL_SOCKET_MAX_STREAMS)
    return dccl_error(ncclInvalidArgument,
                      "%s (%lld) and %s (%lld) must be positive and DCCL_SOCKET_NSTREAMS (%lld) within 1..%d",
                      conn->device ? "DCCL_DEV_NSLOTS" : "DCCL_NSLOTS", (long long)nslots,
                      conn->device ? "DCCL_DEV_CHUNK_SIZE" : "DCCL_CHUNK_SIZE", (long long)slot_bytes,
                      (long long)nstreams, DCCL_SOCKET_MAX_STREAMS);
  DCCLCHECK(dccl_socket_setup_geometry(conn, info, (uint32_t)nslots, (uint64_t)slot_bytes, (uint32_t)nstreams));
  if (!conn->device) return ncclSuccess;
#ifdef DCCL_HAVE_DEVICE_CODE
  struct dccl_socket_conn *sc = conn->priv;
  return dccl_host_fifo_device_map(conn, sc->fifo, sc->fifo_bytes, &sc->device);
#else
  return dccl_error(ncclInvalidUsage, "socket link with rank %d: device buffers need a build with CUDA", conn->peer);
#endif
}

/* Send side: opens the S streams to the receiver's listener and introduces each with the link's token. A refused
 * connection is tried again until the deadline (the listener may not be up yet) or the communicator's abort (the
 * receiver failed and will never listen: a mismatch verdict, a dead rank). */
static ncclResult_t connect_streams(struct dccl_conn *conn, const struct socket_conn_info *in) {
  struct dccl_socket_conn *sc = conn->priv;
  int64_t timeout_s = dccl_param_int(DCCL_PARAM_BOOTSTRAP_TIMEOUT);
  int64_t deadline = dccl_now_ns() + (timeout_s > 0 && timeout_s < 2000000 ? timeout_s : 300) * 1000000000ll;
  for (uint32_t i = 0; i < sc->nstreams; i++) {
    ncclResult_t res = dccl_socket_connect_wait(&in->addr, deadline, conn->ctx->abort_flag, &sc->streams[i].fd);
    if (res != ncclSuccess) {
      char buf[128];
      return dccl_error(res, "socket link to rank %d (host %s): cannot connect stream %u to %s", conn->peer,
                        peer_host(conn), i, dccl_socket_addr_str(&in->addr, buf, sizeof(buf)));
    }
    struct dccl_socket_handshake hs = {
        .magic = DCCL_SOCKET_HANDSHAKE_MAGIC, .token = in->token, .stream = i, .sender_rank = conn->ctx->rank};
    DCCLCHECK(dccl_socket_send_all(sc->streams[i].fd, &hs, sizeof(hs)));
    DCCLCHECK(dccl_socket_tune_stream(sc->streams[i].fd));
  }
  return ncclSuccess;
}

static ncclResult_t socket_connect(struct dccl_conn *conn, const void *peer_info) {
  struct dccl_socket_conn *sc = conn->priv;
  struct socket_conn_info in;
  memcpy(&in, peer_info, sizeof(in));
  if (in.magic != SOCKET_INFO_MAGIC || in.is_send == conn->is_send || (conn->is_send && in.token == 0))
    return dccl_error(ncclInternalError,
                      "socket link with rank %d: the peer's connection info is not a socket %s "
                      "side's",
                      conn->peer, conn->is_send ? "receive" : "send");
  if (in.nslots != sc->nslots || in.slot_bytes != sc->slot_bytes || in.nstreams != sc->nstreams)
    return dccl_error(ncclInvalidUsage,
                      "socket link with rank %d (host %s): settings differ (here %u slots of %llu bytes over %u "
                      "streams, there %u of %llu over %u): set DCCL_NSLOTS, DCCL_CHUNK_SIZE and "
                      "DCCL_SOCKET_NSTREAMS alike on every rank",
                      conn->peer, peer_host(conn), sc->nslots, (unsigned long long)sc->slot_bytes, sc->nstreams,
                      in.nslots, (unsigned long long)in.slot_bytes, in.nstreams);
  if (conn->is_send) {
    DCCLCHECK(connect_streams(conn, &in));
  } else {
    struct dccl_socket_comm_state *st = conn->ctx->transport_state[conn->transport->index];
    if (!st) return dccl_error(ncclInternalError, "socket link from rank %d: receive side was not set up", conn->peer);
    DCCLCHECK(dccl_socket_accept_streams(conn, st));
    for (uint32_t i = 0; i < sc->nstreams; i++) DCCLCHECK(dccl_socket_tune_stream(sc->streams[i].fd));
  }
  sc->connected = 1;
  return ncclSuccess;
}

static ncclResult_t socket_progress(struct dccl_conn *conn) {
  struct dccl_socket_conn *sc = conn->priv;
  if (!sc || !sc->connected) return ncclSuccess;
  /* After our own abort the reason is already on record; a new error text here would hide it. */
  if (sc->aborted) return ncclRemoteError;
  return conn->is_send ? dccl_socket_progress_send(conn) : dccl_socket_progress_recv(conn);
}

static int socket_send_flushed(struct dccl_conn *conn) {
  return dccl_ld_acquire_u64(dccl_conn_head(conn)) == dccl_ld_acquire_u64(dccl_conn_tail(conn));
}

/* A receive side waits for slot `tail` (the first not complete), which only its own stream can bring: another
 * stream's goodbye or end says nothing about it (a peer sends its last slots on every stream and then its goodbyes,
 * so one stream's goodbye may arrive before another's last slot). -1 where nothing is missing: slots are ready or
 * complete, waiting for the consumer or for publication. */
static int stream_awaited(struct dccl_conn *conn, const struct dccl_socket_conn *sc) {
  uint64_t head = dccl_ld_acquire_u64(dccl_conn_head(conn)), tail = dccl_ld_acquire_u64(dccl_conn_tail(conn));
  uint32_t i = (uint32_t)(tail % sc->nstreams);
  return tail > head || sc->streams[i].slot > tail ? -1 : (int)i;
}

static ncclResult_t socket_check_peer(struct dccl_conn *conn) {
  struct dccl_socket_conn *sc = conn->priv;
  if (!sc || !sc->connected) return ncclSuccess;
  if (sc->aborted) return ncclRemoteError;
  int awaited = conn->is_send ? -1 : stream_awaited(conn, sc);
  if (!conn->is_send && awaited < 0) return ncclSuccess;
  for (uint32_t i = 0; i < sc->nstreams; i++) {
    if (awaited >= 0 && i != (uint32_t)awaited) continue;
    struct dccl_socket_stream *s = &sc->streams[i];
    if (s->said_goodbye)
      return dccl_error(ncclRemoteError,
                        "rank %d (host %s) closed its socket link to rank %d (its communicator "
                        "was destroyed) while rank %d still waited on it",
                        conn->peer, peer_host(conn), conn->ctx->rank, conn->ctx->rank);
    if (s->broken) return dccl_socket_stream_error(conn, s->broken_errno);
    /* A peek finds EOF or a reset even on a send side that has nothing to write just now. */
    char byte;
    ssize_t n = recv(s->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return dccl_socket_stream_error(conn, 0);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return dccl_socket_stream_error(conn, errno);
  }
  return ncclSuccess;
}

static void socket_abort(struct dccl_conn *conn) {
  struct dccl_socket_conn *sc = conn->priv;
  if (!sc) return;
  sc->aborted = 1;
  /* shutdown, not close: another thread may be in progress() on these descriptors, and a closed number could be
   * reused. The peer sees EOF without a goodbye, which it reports as our end. */
  for (uint32_t i = 0; i < sc->nstreams; i++)
    if (sc->streams[i].fd >= 0) shutdown(sc->streams[i].fd, SHUT_RDWR);
}

/* Tells the receiver this EOF is a clean end, where a stream is between slots (never blocks). */
static void say_goodbye(struct dccl_socket_conn *sc) {
  char bye[DCCL_SLOT_HEAD_BYTES];
  struct dccl_slot_header h = {.bytes = DCCL_SOCKET_GOODBYE};
  memset(bye, 0, sizeof(bye));
  memcpy(bye + 8, &h, sizeof(h));
  for (uint32_t i = 0; i < sc->nstreams; i++)
    if (sc->streams[i].fd >= 0 && sc->streams[i].done == 0)
      (void)send(sc->streams[i].fd, bye, sizeof(bye), MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void socket_close(struct dccl_conn *conn) {
  struct dccl_socket_conn *sc = conn->priv;
  if (!sc) return;
  if (conn->is_send && sc->connected && !sc->aborted) say_goodbye(sc);
  for (uint32_t i = 0; i < sc->nstreams; i++)
    if (sc->streams[i].fd >= 0) close(sc->streams[i].fd);
  /* A receive side that never completed: its token and any streams stashed for it go too. */
  struct dccl_socket_comm_state *st = conn->ctx->transport_state[conn->transport->index];
  if (!conn->is_send && !sc->connected && sc->token && st) dccl_socket_forget_token(st, sc->token);
#ifdef DCCL_HAVE_DEVICE_CODE
  dccl_host_fifo_device_unmap(conn, &sc->device);
#endif
  free(sc->fifo);
  free(sc);
  conn->priv = NULL;
  dccl_conn_unbind(conn);
}

static void socket_comm_free(void *state, int aborted) {
  dccl_socket_comm_state_free(state);
}

const struct dccl_transport dccl_transport_socket = {
    .size = sizeof(struct dccl_transport),
    .name = "socket",
#ifdef DCCL_HAVE_DEVICE_CODE
    .buffers = DCCL_BUFFERS_HOST | DCCL_BUFFERS_DEVICE, /* device links: FIFOs in pinned host memory */
#endif
    .moves_bytes = 1,
    .can_connect = socket_can_connect,
    .setup = socket_setup,
    .connect = socket_connect,
    .progress = socket_progress,
    .send_flushed = socket_send_flushed,
    .check_peer = socket_check_peer,
    .abort = socket_abort,
    .close = socket_close,
    .comm_free = socket_comm_free,
};
