/* The p2p transport: device links between ranks whose GPUs can reach each other's memory (the same GPU, in one
 * process or several). Kernels move the bytes: the sending kernel writes straight into the receiver's FIFO in
 * the receiver's device memory. The receiver's region holds the control block (tail, abort word) and the slots;
 * the sender's region holds `head`, which the receiving kernel stores to and the sending kernel polls: each
 * counter lies in its poller's memory (pure/conn_desc.h). Within one process a peer's region is used by its
 * address; between processes it is opened from a CUDA IPC handle (which names the whole allocation: each region
 * is an allocation of its own, so the offset is 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pure/dev_conn.h"
#include "transports/transport.h"
#include "util/cuda_api.h"
#include "util/error.h"
#include "util/params.h"

#define P2P_INFO_MAGIC 0x50325044u /* "DP2P" */

/* The blob each side sends: where its region is, in its process and as an IPC handle. */
struct p2p_info {
  uint32_t magic;
  int32_t pid;
  uint32_t nslots;
  uint32_t pad;
  uint64_t slot_bytes;
  CUdeviceptr region; /* valid in the sender's process */
  CUipcMemHandle handle;
};
_Static_assert(sizeof(struct p2p_info) <= DCCL_CONN_INFO_BYTES, "p2p info must fit the connection blob");

struct p2p_conn {
  uint64_t bytes;       /* device memory this side allocated, counted in the communicator's dev_bytes */
  CUdeviceptr own;      /* this side's region: the FIFO (receiver) or the head line (sender) */
  CUdeviceptr peer;     /* the other side's region, as mapped here */
  int peer_opened;      /* peer came from cuIpcOpenMemHandle */
  CUdeviceptr dev_conn; /* struct dccl_dev_conn for the kernels */
};

static int same_gpu(const struct dccl_peer_info *a, const struct dccl_peer_info *b) {
  return a->has_device && b->has_device && !memcmp(a->device_uuid, b->device_uuid, sizeof(a->device_uuid));
}

/* Both ends answer alike from the two infos: one host, one GPU. (GPUs of one host with peer access come with the
 * topology work, issue 13.) */
static int p2p_can_connect(const struct dccl_peer_info *self, const struct dccl_peer_info *peer, const void *mine,
                           const void *theirs) {
  return self->real_host_hash == peer->real_host_hash && same_gpu(self, peer);
}

static ncclResult_t enter_context(const struct dccl_conn *conn) {
  if (!conn->ctx->cu_ctx)
    return dccl_error(ncclInvalidUsage, "p2p link to rank %d: this rank's communicator has no CUDA device", conn->peer);
  DCCLCHECK(dccl_cuda_api_load());
  DCCL_CUCHECK(dccl_cu.ctx_set_current((CUcontext)conn->ctx->cu_ctx), "p2p: cuCtxSetCurrent");
  return ncclSuccess;
}

static void geometry(uint32_t *nslots, uint64_t *slot_bytes) {
  *nslots = (uint32_t)dccl_param_int(DCCL_PARAM_DEV_NSLOTS);
  *slot_bytes = (uint64_t)dccl_param_int(DCCL_PARAM_DEV_CHUNK_SIZE);
}

static ncclResult_t p2p_setup(struct dccl_conn *conn, void *info) {
  DCCLCHECK(enter_context(conn));
  struct p2p_conn *pc = calloc(1, sizeof(*pc));
  if (!pc) return dccl_error(ncclSystemError, "out of memory for a p2p link");
  conn->priv = pc;
  struct p2p_info *me = info;
  me->magic = P2P_INFO_MAGIC;
  me->pid = (int32_t)getpid();
  geometry(&me->nslots, &me->slot_bytes);
  struct dccl_conn_desc d;
  uint64_t bytes = conn->is_send ? DCCL_CACHELINE
                                 : dccl_conn_desc_layout(&d, me->nslots, me->slot_bytes, DCCL_DEV_LL_BYTES, DCCL_REGION_SEND);
  DCCL_CUCHECK(dccl_cu.mem_alloc(&pc->own, bytes), "p2p: cuMemAlloc of a FIFO");
  pc->bytes += bytes;
  __atomic_add_fetch(&conn->ctx->dev_bytes, bytes, __ATOMIC_RELAXED);
  /* Counters, abort word and every slot's first unit start at 0: no flag is 0, so nothing reads as filled. */
  DCCL_CUCHECK(dccl_cu.memset_d8(pc->own, 0, bytes), "p2p: clearing a FIFO");
  if (!conn->is_send) {
    struct dccl_fifo_ctrl ctrl;
    memset(&ctrl, 0, sizeof(ctrl));
    ctrl.nslots = me->nslots;
    ctrl.slot_bytes = me->slot_bytes;
    DCCL_CUCHECK(dccl_cu.memcpy_htod(pc->own, &ctrl, sizeof(ctrl)), "p2p: writing a FIFO's control block");
  }
  me->region = pc->own;
  DCCL_CUCHECK(dccl_cu.ipc_get_mem_handle(&me->handle, pc->own), "p2p: cuIpcGetMemHandle");
  return ncclSuccess;
}

static ncclResult_t p2p_connect(struct dccl_conn *conn, const void *peer_info) {
  DCCLCHECK(enter_context(conn));
  struct p2p_conn *pc = conn->priv;
  const struct p2p_info *them = peer_info;
  uint32_t nslots;
  uint64_t slot_bytes;
  geometry(&nslots, &slot_bytes);
  if (them->magic != P2P_INFO_MAGIC || them->nslots != nslots || them->slot_bytes != slot_bytes)
    return dccl_error(ncclInvalidUsage,
                      "p2p link to rank %d: its FIFO has %u slots of %llu bytes, ours %u of %llu (DCCL_DEV_NSLOTS and "
                      "DCCL_DEV_CHUNK_SIZE must be the same on every rank)",
                      conn->peer, them->nslots, (unsigned long long)them->slot_bytes, nslots,
                      (unsigned long long)slot_bytes);
  if (them->pid == (int32_t)getpid()) {
    pc->peer = them->region; /* one process, one context: the address is ours too */
  } else {
    DCCL_CUCHECK(dccl_cu.ipc_open_mem_handle(&pc->peer, them->handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                 "p2p: cuIpcOpenMemHandle of the peer's FIFO");
    pc->peer_opened = 1;
  }
  struct dccl_dev_conn dc;
  memset(&dc, 0, sizeof(dc));
  dccl_conn_desc_layout(&dc.desc, nslots, slot_bytes, DCCL_DEV_LL_BYTES, DCCL_REGION_SEND);
  dc.regions[DCCL_REGION_RECV] = (char *)(uintptr_t)(conn->is_send ? pc->peer : pc->own);
  dc.regions[DCCL_REGION_SEND] = (char *)(uintptr_t)(conn->is_send ? pc->own : pc->peer);
  dc.peer = conn->peer;
  /* Both ends are kernels on one GPU (p2p_can_connect): GPU-scope ordering suffices. */
  dc.same_gpu = strcmp(dccl_param_str(DCCL_PARAM_DEV_FENCE), "system") != 0;
  DCCL_CUCHECK(dccl_cu.mem_alloc(&pc->dev_conn, sizeof(dc)), "p2p: cuMemAlloc of a link's kernel view");
  pc->bytes += sizeof(dc);
  __atomic_add_fetch(&conn->ctx->dev_bytes, sizeof(dc), __ATOMIC_RELAXED);
  DCCL_CUCHECK(dccl_cu.memcpy_htod(pc->dev_conn, &dc, sizeof(dc)), "p2p: writing a link's kernel view");
  conn->desc = dc.desc;
  conn->regions[DCCL_REGION_RECV] = dc.regions[DCCL_REGION_RECV];
  conn->regions[DCCL_REGION_SEND] = dc.regions[DCCL_REGION_SEND];
  conn->dev = (void *)(uintptr_t)pc->dev_conn;
  return ncclSuccess;
}

/* Frees what setup and connect made. cuMemFree waits for the device: by now no kernel of this communicator runs
 * (destroy waited for them). */
static void p2p_close(struct dccl_conn *conn) {
  struct p2p_conn *pc = conn->priv;
  if (!pc) return;
  if (conn->ctx->cu_ctx && dccl_cuda_api_load() == ncclSuccess) {
    dccl_cu.ctx_set_current((CUcontext)conn->ctx->cu_ctx);
    if (pc->peer_opened) dccl_cu.ipc_close_mem_handle(pc->peer);
    if (pc->dev_conn) dccl_cu.mem_free(pc->dev_conn);
    if (pc->own) dccl_cu.mem_free(pc->own);
  }
  __atomic_sub_fetch(&conn->ctx->dev_bytes, pc->bytes, __ATOMIC_RELAXED);
  free(pc);
  conn->priv = NULL;
  conn->dev = NULL;
  memset(conn->regions, 0, sizeof(conn->regions));
}

const struct dccl_transport dccl_transport_p2p = {
    .size = sizeof(struct dccl_transport),
    .name = "p2p",
    .unreachable = " (p2p links ranks on one GPU)",
    .host_local = 1, /* pretend hosts (DCCL_HOSTID) on one GPU use the network between them */
    .buffers = DCCL_BUFFERS_DEVICE,
    .can_connect = p2p_can_connect,
    .setup = p2p_setup,
    .connect = p2p_connect,
    .close = p2p_close,
};
