/* The shared-memory transport: one FIFO in a POSIX shared-memory segment that both processes map. The receiver
 * creates the segment; the sender maps it and unlinks its name at once, so nothing is left in /dev/shm whatever
 * happens to either process afterwards. The calling threads move the bytes (no progress function). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "transports/shm/shm_private.h"
#include "util/error.h"
#include "util/params.h"

#define SHM_INFO_MAGIC 0x4d485344u      /* "DSHM" */
#define SHM_MAX_SLOT_BYTES (1ull << 40) /* keeps the size arithmetic far from overflow */

/* The 256-byte blob: the sender's carries only its geometry, the receiver's also the segment. */
struct shm_conn_info {
  uint32_t magic;
  uint32_t nslots;
  uint64_t slot_bytes;
  uint64_t segment_bytes;
  char name[DCCL_SHM_NAME_LEN];
};
_Static_assert(sizeof(struct shm_conn_info) <= DCCL_CONN_INFO_BYTES, "shm info must fit the connection blob");

struct shm_conn {
  void *map;
  size_t map_bytes;
  char name[DCCL_SHM_NAME_LEN];
  pid_t creator_pid; /* the process that made the segment (receive side); a forked child never unlinks it */
  uint32_t nslots;
  uint64_t slot_bytes;
  struct dccl_shm_peer_watch watch;
  int watching;
};

static pthread_once_t sweep_once = PTHREAD_ONCE_INIT;
static void sweep_stale_once(void) {
  (void)dccl_shm_sweep_stale();
}
static _Atomic unsigned segment_counter; /* makes names unique even if a link is made twice in one process */

static int shm_can_connect(const struct dccl_peer_info *self, const struct dccl_peer_info *peer, const void *mine,
                           const void *theirs) {
  return self->real_host_hash == peer->real_host_hash;
}

static const char *peer_host(const struct dccl_conn *conn) {
  return conn->ctx->peers[conn->peer].hostname;
}

static void shm_close(struct dccl_conn *conn);

ncclResult_t dccl_shm_setup_geometry(struct dccl_conn *conn, void *info, uint32_t nslots, uint64_t slot_bytes) {
  struct dccl_transport_ctx *ctx = conn->ctx;
  if (nslots < 1 || slot_bytes < 1 || slot_bytes > SHM_MAX_SLOT_BYTES)
    return dccl_error(ncclInvalidArgument, "shm link to rank %d: bad FIFO geometry (%u slots of %llu bytes)",
                      conn->peer, nslots, (unsigned long long)slot_bytes);
  struct shm_conn *sc = calloc(1, sizeof(*sc));
  if (!sc) return dccl_error(ncclSystemError, "out of memory for a shm connection");
  sc->nslots = nslots;
  sc->slot_bytes = slot_bytes;
  sc->watch.pidfd = -1;
  conn->priv = sc;
  dccl_conn_unbind(conn);
  struct dccl_conn_desc desc;
  uint64_t region_bytes = dccl_conn_desc_layout(&desc, nslots, slot_bytes, DCCL_LL_MAX_BYTES, DCCL_REGION_RECV);

  struct shm_conn_info out;
  memset(&out, 0, sizeof(out));
  out.magic = SHM_INFO_MAGIC;
  out.nslots = nslots;
  out.slot_bytes = slot_bytes;
  if (!conn->is_send) {
    pthread_once(&sweep_once, sweep_stale_once);
    int sender = conn->peer, receiver = ctx->rank;
    sc->creator_pid = getpid();
    sc->map_bytes = region_bytes;
    snprintf(sc->name, sizeof(sc->name), "/" DCCL_SHM_PREFIX "%d-%016llx-%d-%d-%d-%u", (int)sc->creator_pid,
             (unsigned long long)ctx->peers[ctx->rank].comm_nonce, sender, receiver, conn->lane,
             atomic_fetch_add(&segment_counter, 1));
    ncclResult_t res = dccl_shm_segment_create(sc->name, sc->map_bytes, &sc->map);
    if (res != ncclSuccess) {
      free(sc);
      conn->priv = NULL;
      return res;
    }
    dccl_fifo_init(sc->map, &desc);
    res = dccl_conn_bind(conn, &desc, sc->map, sc->map);
    if (res != ncclSuccess) {
      shm_close(conn); /* unmaps and unlinks the segment */
      return res;
    }
    out.segment_bytes = sc->map_bytes;
    memcpy(out.name, sc->name, sizeof(out.name));
  }
  memset(info, 0, DCCL_CONN_INFO_BYTES);
  memcpy(info, &out, sizeof(out));
  return ncclSuccess;
}

static ncclResult_t shm_setup(struct dccl_conn *conn, void *info) {
  int64_t nslots = dccl_param_int(DCCL_PARAM_NSLOTS), slot_bytes = dccl_param_int(DCCL_PARAM_CHUNK_SIZE);
  if (nslots < 1 || nslots > 0x7fffffff || slot_bytes < 1)
    return dccl_error(ncclInvalidArgument, "DCCL_NSLOTS (%lld) and DCCL_CHUNK_SIZE (%lld) must be positive",
                      (long long)nslots, (long long)slot_bytes);
  return dccl_shm_setup_geometry(conn, info, (uint32_t)nslots, (uint64_t)slot_bytes);
}

static ncclResult_t shm_connect(struct dccl_conn *conn, const void *peer_info) {
  struct shm_conn *sc = conn->priv;
  struct shm_conn_info in;
  memcpy(&in, peer_info, sizeof(in));
  in.name[sizeof(in.name) - 1] = '\0';
  if (in.magic != SHM_INFO_MAGIC)
    return dccl_error(ncclInternalError, "shm link with rank %d: the peer's connection info is not shm's", conn->peer);
  if (in.nslots != sc->nslots || in.slot_bytes != sc->slot_bytes)
    return dccl_error(ncclInvalidUsage,
                      "shm link with rank %d (host %s): FIFO geometry differs (here %u slots of %llu bytes, there %u "
                      "of %llu): set DCCL_NSLOTS and DCCL_CHUNK_SIZE alike on every rank",
                      conn->peer, peer_host(conn), sc->nslots, (unsigned long long)sc->slot_bytes, in.nslots,
                      (unsigned long long)in.slot_bytes);
  if (conn->is_send) {
    if (in.segment_bytes != dccl_fifo_bytes(sc->nslots, sc->slot_bytes, DCCL_LL_MAX_BYTES))
      return dccl_error(ncclInternalError, "shm link to rank %d: segment size %llu does not match the geometry",
                        conn->peer, (unsigned long long)in.segment_bytes);
    memcpy(sc->name, in.name, sizeof(sc->name));
    sc->map_bytes = in.segment_bytes;
    DCCLCHECK(dccl_shm_segment_open(sc->name, sc->map_bytes, &sc->map));
    /* Both sides map it now: drop the name, so no crash or kill from here on can leave it in /dev/shm. */
    dccl_shm_segment_unlink(sc->name);
    const struct dccl_fifo_ctrl *ctrl = sc->map;
    if (ctrl->nslots != sc->nslots || ctrl->slot_bytes != sc->slot_bytes)
      return dccl_error(ncclInternalError, "shm link to rank %d: the segment's FIFO header does not match", conn->peer);
    struct dccl_conn_desc desc;
    dccl_conn_desc_layout(&desc, sc->nslots, sc->slot_bytes, DCCL_LL_MAX_BYTES, DCCL_REGION_RECV);
    DCCLCHECK(dccl_conn_bind(conn, &desc, sc->map, sc->map));
  }
  dccl_shm_watch_start(&sc->watch, (pid_t)conn->ctx->peers[conn->peer].pid);
  sc->watching = 1;
  return ncclSuccess;
}

static int shm_send_flushed(struct dccl_conn *conn) {
  return 1;
} /* a posted slot is already in shared memory */

static ncclResult_t shm_check_peer(struct dccl_conn *conn) {
  struct shm_conn *sc = conn->priv;
  struct dccl_transport_ctx *ctx = conn->ctx;
  if (!sc) return ncclSuccess;
  if (dccl_conn_bound(conn)) {
    uint32_t aborted = dccl_conn_peer_aborted(conn);
    /* Our own abort was reported when it happened; repeating it would bury the original reason. */
    if (aborted == (uint32_t)ctx->rank + 1) return ncclRemoteError;
    if (aborted != 0)
      return dccl_error(ncclRemoteError, "rank %d aborted: shared memory link %s rank %d (host %s) stopped",
                        (int)aborted - 1, conn->is_send ? "to" : "from", conn->peer, peer_host(conn));
  }
  /* A sender that posted its last slots and ended (its operation was done) left them readable here: they are
   * drained before its end counts. */
  if (sc->watching && !dccl_shm_watch_alive(&sc->watch) &&
      (conn->is_send || !dccl_conn_bound(conn) || dccl_ld_acquire_u64(dccl_conn_tail(conn)) <= conn->own_counter))
    return dccl_error(ncclRemoteError,
                      "rank %d (host %s, pid %d) has died: its process ended while rank %d was "
                      "connected to it over shared memory",
                      conn->peer, peer_host(conn), (int)sc->watch.pid, ctx->rank);
  return ncclSuccess;
}

static void shm_abort(struct dccl_conn *conn) {
  if (!dccl_conn_bound(conn)) return;
  (void)dccl_cas0_u32(dccl_conn_aborted(conn), (uint32_t)conn->ctx->rank + 1); /* the first to give up is named */
}

static void shm_close(struct dccl_conn *conn) {
  struct shm_conn *sc = conn->priv;
  if (!sc) return;
  if (sc->watching) dccl_shm_watch_stop(&sc->watch);
  if (sc->map) munmap(sc->map, sc->map_bytes);
  /* The sender normally unlinked it already; if it never opened the segment, the name is still there. */
  if (!conn->is_send && sc->creator_pid == getpid() && sc->name[0]) dccl_shm_segment_unlink(sc->name);
  free(sc);
  conn->priv = NULL;
  dccl_conn_unbind(conn);
}

/* No per-communicator state. But a failed communicator may have lost a peer that had created a segment nobody
 * opened yet (it died during connection setup): remove segments whose creator is gone. */
static void shm_comm_free(void *state, int aborted) {
  if (aborted) dccl_shm_sweep_stale();
}

const struct dccl_transport dccl_transport_shm = {
    .size = sizeof(struct dccl_transport),
    .name = "shm",
    .host_local = 1,
    .moves_bytes = 0, /* the executor's own loads and stores move the bytes */
    .unreachable = " (another host)",
    .can_connect = shm_can_connect,
    .setup = shm_setup,
    .connect = shm_connect,
    .send_flushed = shm_send_flushed,
    .check_peer = shm_check_peer,
    .abort = shm_abort,
    .close = shm_close,
    .comm_free = shm_comm_free,
};
