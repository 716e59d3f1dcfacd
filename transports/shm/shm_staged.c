/* The staged transport: device links through pinned shared host memory, for ranks of one host whose GPUs cannot
 * map each other's memory (the p2p transport refuses them), or when DCCL_TRANSPORT=shm asks for it. Kernels at both
 * ends move the bytes as over p2p, but the FIFO lies in a POSIX shared-memory segment that each side maps and
 * registers with CUDA (cuMemHostRegister, device-mapped): the sending kernel writes over PCIe into host memory, the
 * receiving kernel reads it back over PCIe, two crossings in all. The receiver creates the segment; the sender
 * maps it and unlinks the name, as the host shm transport does. Counters and slots are host memory, so the kernels
 * order them at system scope (dccl_dev_conn.same_gpu = 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pure/dev_conn.h"
#include "transports/shm/shm_private.h"
#include "util/cuda_api.h"
#include "util/error.h"
#include "util/params.h"

#define STAGED_INFO_MAGIC 0x47545344u /* "DSTG" */

struct staged_info {
  uint32_t magic;
  uint32_t nslots;
  uint64_t slot_bytes;
  uint64_t segment_bytes;
  char name[DCCL_SHM_NAME_LEN];
};
_Static_assert(sizeof(struct staged_info) <= DCCL_CONN_INFO_BYTES, "staged info must fit the connection blob");

struct staged_conn {
  void *map;         /* the segment, mapped here */
  size_t map_bytes;  /* a whole number of pages: what cuMemHostRegister pins */
  int registered;    /* map is registered with CUDA */
  char name[DCCL_SHM_NAME_LEN];
  pid_t creator_pid; /* the receive side made the segment; it unlinks the name if the sender never opened it */
  CUdeviceptr dev_conn;
};

static _Atomic unsigned segment_counter;

static int staged_can_connect(const struct dccl_peer_info *self, const struct dccl_peer_info *peer, const void *mine,
                              const void *theirs) {
  return self->real_host_hash == peer->real_host_hash && self->has_device && peer->has_device;
}

static void geometry(uint32_t *nslots, uint64_t *slot_bytes, uint64_t *segment_bytes) {
  *nslots = (uint32_t)dccl_param_int(DCCL_PARAM_DEV_NSLOTS);
  *slot_bytes = (uint64_t)dccl_param_int(DCCL_PARAM_DEV_CHUNK_SIZE);
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  *segment_bytes = (dccl_fifo_bytes(*nslots, *slot_bytes, DCCL_DEV_LL_BYTES) + page - 1) / page * page;
}

static ncclResult_t enter_context(const struct dccl_conn *conn) {
  if (!conn->ctx->cu_ctx)
    return dccl_error(ncclInvalidUsage, "staged link to rank %d: this rank's communicator has no CUDA device",
                      conn->peer);
  DCCLCHECK(dccl_cuda_api_load());
  DCCL_CUCHECK(dccl_cu.ctx_set_current((CUcontext)conn->ctx->cu_ctx), "staged: cuCtxSetCurrent");
  return ncclSuccess;
}

static ncclResult_t staged_setup(struct dccl_conn *conn, void *info) {
  DCCLCHECK(enter_context(conn));
  struct staged_conn *sc = calloc(1, sizeof(*sc));
  if (!sc) return dccl_error(ncclSystemError, "out of memory for a staged link");
  conn->priv = sc;
  struct staged_info *me = info;
  me->magic = STAGED_INFO_MAGIC;
  geometry(&me->nslots, &me->slot_bytes, &me->segment_bytes);
  if (conn->is_send) return ncclSuccess;
  struct dccl_transport_ctx *ctx = conn->ctx;
  sc->creator_pid = getpid();
  sc->map_bytes = me->segment_bytes;
  snprintf(sc->name, sizeof(sc->name), "/" DCCL_SHM_PREFIX "%d-%016llx-%d-%d-g%d-%u", (int)sc->creator_pid,
           (unsigned long long)ctx->peers[ctx->rank].comm_nonce, conn->peer, ctx->rank, conn->lane,
           atomic_fetch_add(&segment_counter, 1));
  DCCLCHECK(dccl_shm_segment_create(sc->name, sc->map_bytes, &sc->map));
  struct dccl_conn_desc d;
  dccl_conn_desc_layout(&d, me->nslots, me->slot_bytes, DCCL_DEV_LL_BYTES, DCCL_REGION_RECV);
  dccl_fifo_init(sc->map, &d);
  memcpy(me->name, sc->name, sizeof(me->name));
  return ncclSuccess;
}

static ncclResult_t staged_connect(struct dccl_conn *conn, const void *peer_info) {
  DCCLCHECK(enter_context(conn));
  struct staged_conn *sc = conn->priv;
  struct staged_info them;
  memcpy(&them, peer_info, sizeof(them));
  them.name[sizeof(them.name) - 1] = '\0';
  uint32_t nslots;
  uint64_t slot_bytes, segment_bytes;
  geometry(&nslots, &slot_bytes, &segment_bytes);
  if (them.magic != STAGED_INFO_MAGIC || them.nslots != nslots || them.slot_bytes != slot_bytes ||
      them.segment_bytes != segment_bytes)
    return dccl_error(ncclInvalidUsage,
                      "staged link to rank %d: its FIFO has %u slots of %llu bytes, ours %u of %llu (DCCL_DEV_NSLOTS "
                      "and DCCL_DEV_CHUNK_SIZE must be the same on every rank)",
                      conn->peer, them.nslots, (unsigned long long)them.slot_bytes, nslots,
                      (unsigned long long)slot_bytes);
  if (conn->is_send) {
    memcpy(sc->name, them.name, sizeof(sc->name));
    sc->map_bytes = segment_bytes;
    DCCLCHECK(dccl_shm_segment_open(sc->name, sc->map_bytes, &sc->map));
    dccl_shm_segment_unlink(sc->name); /* both sides map it now: nothing can be left in /dev/shm */
  }
  /* Pinned and mapped for this rank's GPU; PORTABLE, since the communicator's context is only one of the
   * process's. */
  DCCL_CUCHECK(dccl_cu.mem_host_register(sc->map, sc->map_bytes,
                                         CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP),
               "staged: cuMemHostRegister of a shared FIFO");
  sc->registered = 1;
  __atomic_add_fetch(&conn->ctx->pinned_bytes, sc->map_bytes, __ATOMIC_RELAXED);
  CUdeviceptr region;
  DCCL_CUCHECK(dccl_cu.mem_host_get_device_pointer(&region, sc->map, 0), "staged: cuMemHostGetDevicePointer");
  struct dccl_dev_conn dc;
  memset(&dc, 0, sizeof(dc));
  dccl_conn_desc_layout(&dc.desc, nslots, slot_bytes, DCCL_DEV_LL_BYTES, DCCL_REGION_RECV);
  dc.regions[DCCL_REGION_RECV] = dc.regions[DCCL_REGION_SEND] = (char *)(uintptr_t)region;
  dc.peer = conn->peer;
  dc.same_gpu = 0; /* host memory between the two kernels: system-scope ordering */
  DCCL_CUCHECK(dccl_cu.mem_alloc(&sc->dev_conn, sizeof(dc)), "staged: cuMemAlloc of a link's kernel view");
  __atomic_add_fetch(&conn->ctx->dev_bytes, sizeof(dc), __ATOMIC_RELAXED);
  DCCL_CUCHECK(dccl_cu.memcpy_htod(sc->dev_conn, &dc, sizeof(dc)), "staged: writing a link's kernel view");
  conn->desc = dc.desc;
  conn->regions[DCCL_REGION_RECV] = conn->regions[DCCL_REGION_SEND] = dc.regions[DCCL_REGION_RECV];
  conn->dev = (void *)(uintptr_t)sc->dev_conn;
  return ncclSuccess;
}

/* By now no kernel of this communicator runs (destroy waited for them). */
static void staged_close(struct dccl_conn *conn) {
  struct staged_conn *sc = conn->priv;
  if (!sc) return;
  if (conn->ctx->cu_ctx && dccl_cuda_api_load() == ncclSuccess) {
    dccl_cu.ctx_set_current((CUcontext)conn->ctx->cu_ctx);
    if (sc->registered) {
      dccl_cu.mem_host_unregister(sc->map);
      __atomic_sub_fetch(&conn->ctx->pinned_bytes, sc->map_bytes, __ATOMIC_RELAXED);
    }
    if (sc->dev_conn) {
      dccl_cu.mem_free(sc->dev_conn);
      __atomic_sub_fetch(&conn->ctx->dev_bytes, sizeof(struct dccl_dev_conn), __ATOMIC_RELAXED);
    }
  }
  if (sc->map) munmap(sc->map, sc->map_bytes);
  if (!conn->is_send && sc->creator_pid == getpid() && sc->name[0]) dccl_shm_segment_unlink(sc->name);
  free(sc);
  conn->priv = NULL;
  conn->dev = NULL;
  memset(conn->regions, 0, sizeof(conn->regions));
}

/* The segment as mapped here: host memory, which the host may read while kernels run (stall reports). */
static const char *staged_host_view(const struct dccl_conn *conn) {
  const struct staged_conn *sc = conn->priv;
  return sc ? sc->map : NULL;
}

const struct dccl_transport dccl_transport_staged = {
    .size = sizeof(struct dccl_transport),
    .name = "staged",
    .unreachable = " (staged links ranks of one host)",
    .host_local = 1,
    .buffers = DCCL_BUFFERS_DEVICE,
    .can_connect = staged_can_connect,
    .setup = staged_setup,
    .connect = staged_connect,
    .close = staged_close,
    .host_view = staged_host_view,
};
