/* The net_ib transport's ops table: links over RDMA (InfiniBand or RoCE) between hosts.
 * Connection setup exchanges QP numbers, PSNs, GIDs/LIDs and the FIFO's address and keys through the blob every
 * transport sends over the bootstrap (src/core/connect.c), rather than through librdmacm: the bootstrap already
 * connects every pair of ranks, it works the same on InfiniBand without IPoIB, and it needs no listening port or
 * address resolution per link. Because a QP drops what arrives before it is ready, connect.c confirms over the
 * bootstrap that both ends are ready (`confirm_connect`) before either side sends. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/net_ib/ib_device.h"
#include "transports/net_ib/ib_private.h"
#include "util/cuda_driver.h"
#include "util/error.h"
#include "util/params.h"

/* What peers learn of this rank's RDMA port before they choose net_ib. */
struct ib_peer_info {
  uint8_t ready;      /* an active RDMA port (ib_device.c) */
  uint8_t link_layer; /* IBV_LINK_LAYER_*: InfiniBand and RoCE do not talk to each other */
};
_Static_assert(sizeof(struct ib_peer_info) <= DCCL_TRANSPORT_PEER_BYTES, "fits the peer info");

static void ib_describe_self(void *mine) {
  /* Whether a port is ready and its link layer: the GPU current while the communicator is made names the rank's. */
  const struct dccl_ib_local *dev = dccl_ib_local(dccl_cuda_available() ? dccl_cuda_current_ordinal() : -1);
  struct ib_peer_info *me = mine;
  me->ready = (uint8_t)dev->ready;
  me->link_layer = (uint8_t)dev->link_layer;
}

static int ib_can_connect(const struct dccl_peer_info *self, const struct dccl_peer_info *peer, const void *mine,
                          const void *theirs) {
  const struct ib_peer_info *a = mine, *b = theirs;
  return a->ready && b->ready && a->link_layer == b->link_layer;
}

static const char *peer_host(const struct dccl_conn *conn) { return conn->ctx->peers[conn->peer].hostname; }

/* A communicator's net_ib state (ctx->transport_state[index]): its reference on the context of each rail its
 * links use (ib_device.h: lane L on rail L mod the count). */
struct ib_comm {
  struct dccl_ib_ctx *ic[DCCL_IB_MAX_RAILS];
  int oversubscribed; /* as given to dccl_ib_ctx_acquire */
};

/* The context of the rail this link's lane uses; the rail's first link takes the reference. */
static ncclResult_t comm_ctx(struct dccl_conn *conn, struct dccl_ib_ctx **out) {
  void **slot = &conn->ctx->transport_state[conn->transport->index];
  const struct dccl_ib_local *rails;
  int ordinal = conn->ctx->cuda_ordinal;
  int nrails = dccl_ib_rails(ordinal, &rails);
  if (nrails == 0) return dccl_error(ncclSystemError, "net_ib: %s", dccl_ib_local(ordinal)->why);
  if (!*slot) {
    struct ib_comm *c = calloc(1, sizeof(*c));
    if (!c) return dccl_error(ncclSystemError, "out of memory for net_ib state");
    c->oversubscribed = conn->ctx->oversubscribed;
    *slot = c;
  }
  struct ib_comm *c = *slot;
  int rail = conn->lane % nrails;
  if (!c->ic[rail]) DCCLCHECK(dccl_ib_ctx_acquire(&rails[rail], c->oversubscribed, &c->ic[rail]));
  *out = c->ic[rail];
  return ncclSuccess;
}

/* After every link of the communicator is closed. */
static void ib_comm_free(void *state, int aborted) {
  struct ib_comm *c = state;
  if (!c) return;
  for (int r = 0; r < DCCL_IB_MAX_RAILS; r++)
    if (c->ic[r]) dccl_ib_ctx_release(c->ic[r], c->oversubscribed);
  free(c);
}

static ncclResult_t register_region(struct dccl_ib_link *l, void *addr, size_t bytes, struct ibv_mr **mr,
                                    const char *what) {
  if ((uint64_t)bytes > l->ic->dev_attr.max_mr_size)
    return dccl_error(ncclInvalidUsage, "net_ib: a %s of %zu bytes exceeds %s's largest region (%llu bytes): lower "
                      "DCCL_NSLOTS or DCCL_CHUNK_SIZE", what, bytes, l->ic->device,
                      (unsigned long long)l->ic->dev_attr.max_mr_size);
  *mr = ibv_reg_mr(l->ic->pd, addr, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!*mr)
    return dccl_error(ncclSystemError, "net_ib: cannot register a %s of %zu bytes on %s: %s (is `ulimit -l` "
                      "large enough?)", what, bytes, l->ic->device, strerror(errno));
  return ncclSuccess;
}

/* A device link's FIFO is the same pinned host memory, mapped for the kernels at both ends: the NIC writes into the
 * receiver's and reads from the sender's (GPUDirect RDMA staged through the FIFO; FIFOs in GPU memory, which the NIC
 * would write directly, are not built). */
static ncclResult_t map_for_kernels(struct dccl_conn *conn, struct dccl_ib_link *l, size_t bytes) {
#ifdef DCCL_HAVE_DEVICE_CODE
  if (!strcmp(dccl_param_str(DCCL_PARAM_NET_GDR), "1"))
    return dccl_error(ncclInvalidUsage,
                      "net_ib device link with rank %d: DCCL_NET_GDR=1 asks for its FIFO in GPU memory, which is not "
                      "built yet (device links are staged through a FIFO in pinned host memory: set it to 0 or auto)",
                      conn->peer);
  DCCLCHECK(dccl_host_fifo_device_map(conn, l->fifo, bytes, &l->device));
  DCCL_INFO(DCCL_NET, "net_ib device link %s rank %d: FIFO staged in pinned host memory (a FIFO in GPU memory that "
                      "the NIC writes directly is not built yet)", conn->is_send ? "to" : "from", conn->peer);
  return ncclSuccess;
#else
  (void)l, (void)bytes;
  return dccl_error(ncclInvalidUsage, "net_ib link with rank %d: device buffers need a build with CUDA", conn->peer);
#endif
}

static ncclResult_t make_link(struct dccl_conn *conn, struct dccl_ib_link *l) {
  /* A device link's FIFO has the device geometry: the kernels at both ends step through it as through any. */
  int64_t nslots = dccl_param_int(conn->device ? DCCL_PARAM_DEV_NSLOTS : DCCL_PARAM_NSLOTS);
  int64_t slot_bytes = dccl_param_int(conn->device ? DCCL_PARAM_DEV_CHUNK_SIZE : DCCL_PARAM_CHUNK_SIZE);
  int64_t nqps = dccl_param_int(DCCL_PARAM_IB_QPS_PER_CONN);
  if (nslots < 1 || nslots > 4096 || slot_bytes < 1 || slot_bytes > (1ll << 30) || nqps < 1 || nqps > DCCL_IB_MAX_QPS)
    return dccl_error(ncclInvalidArgument,
                      "net_ib: DCCL_%sNSLOTS (%lld) must be 1..4096, DCCL_%sCHUNK_SIZE (%lld) 1..2^30 and "
                      "DCCL_IB_QPS_PER_CONN (%lld) 1..%d",
                      conn->device ? "DEV_" : "", (long long)nslots, conn->device ? "DEV_" : "", (long long)slot_bytes,
                      (long long)nqps, DCCL_IB_MAX_QPS);
  l->nslots = (uint32_t)nslots;
  l->slot_bytes = (uint64_t)slot_bytes;
  l->nqps = (int)nqps;
  /* Bulk only: the NIC writes whole slots and the receive completion advances tail, so per-unit flags would only
   * double the bytes on the wire. */
  struct dccl_conn_desc desc;
  size_t fifo_bytes = dccl_conn_desc_layout(&desc, l->nslots, l->slot_bytes, 0, DCCL_REGION_RECV);
  fifo_bytes = (fifo_bytes + 4095) / 4096 * 4096; /* whole pages: a device link's FIFO is pinned for the GPU too */
  void *mem = NULL;
  if (posix_memalign(&mem, 4096, fifo_bytes) != 0) return dccl_error(ncclSystemError, "out of memory for a FIFO");
  l->fifo = mem;
  dccl_fifo_init(l->fifo, &desc);
  (void)dccl_conn_bind(conn, &desc, l->fifo, l->fifo); /* bulk only: nothing to allocate */
  mem = NULL;
  if (posix_memalign(&mem, 4096, 4096) != 0) return dccl_error(ncclSystemError, "out of memory for a FIFO");
  l->ctrl = memset(mem, 0, 4096);
  DCCLCHECK(register_region(l, l->fifo, fifo_bytes, &l->fifo_mr, "FIFO"));
  DCCLCHECK(register_region(l, l->ctrl, 4096, &l->ctrl_mr, "control page"));
  if (conn->device) DCCLCHECK(map_for_kernels(conn, l, fifo_bytes));
  /* A send side writes data slots and the abort word; a receive side credits and the abort word. */
  uint32_t send_wrs = (conn->is_send ? l->nslots : 0) + DCCL_IB_CTRL_WRS, recv_wrs = conn->is_send ? 1 : l->nslots;
  l->cq = ibv_create_cq(l->ic->ctx, (int)((send_wrs + recv_wrs) * (uint32_t)l->nqps), l, l->ic->channel, 0);
  if (!l->cq)
    return dccl_error(ncclSystemError, "net_ib: cannot create a completion queue on %s: %s", l->ic->device,
                      strerror(errno));
  l->slot_src = calloc(l->nslots, sizeof(*l->slot_src));
  l->slot_reg = calloc(l->nslots, sizeof(*l->slot_reg));
  if (!l->slot_src || !l->slot_reg) return dccl_error(ncclSystemError, "out of memory for an RDMA link");
  for (int i = 0; i < l->nqps; i++) DCCLCHECK(dccl_ib_qp_create(l, &l->qps[i], send_wrs, recv_wrs));
  l->max_sge = l->ic->dev_attr.max_sge;
  for (int i = 1; i < l->nqps; i++) l->qps[i].psn = l->qps[0].psn; /* the peer learns one PSN for all */
  char why[256];
  l->gid_index = dccl_ib_select_link_gid(l, why, sizeof(why));
  if (l->gid_index < 0) return dccl_error(ncclSystemError, "net_ib: %s on %s: %s", "no usable GID", l->ic->device, why);
  DCCL_INFO(DCCL_NET, "net_ib link %s rank %d: %s port %d, %s, %d QP(s)", conn->is_send ? "to" : "from", conn->peer,
            l->ic->device, l->ic->port, why, l->nqps);
  return ncclSuccess;
}

static void fill_info(const struct dccl_conn *conn, const struct dccl_ib_link *l, struct dccl_ib_conn_info *out) {
  memset(out, 0, sizeof(*out));
  out->magic = DCCL_IB_INFO_MAGIC;
  out->is_send = conn->is_send;
  out->nslots = l->nslots;
  out->nqps = (uint32_t)l->nqps;
  out->slot_bytes = l->slot_bytes;
  for (int i = 0; i < l->nqps; i++) out->qpn[i] = l->qps[i].qp->qp_num;
  out->psn = l->qps[0].psn;
  out->lid = l->ic->port_attr.lid;
  out->link_layer = l->ic->port_attr.link_layer;
  out->mtu = (uint8_t)l->ic->port_attr.active_mtu;
  union ibv_gid gid;
  if (l->ic->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET &&
      ibv_query_gid(l->ic->ctx, (uint8_t)l->ic->port, l->gid_index, &gid) == 0)
    memcpy(out->gid, gid.raw, 16);
  out->fifo_addr = (uintptr_t)l->fifo;
  out->fifo_rkey = l->fifo_mr->rkey;
  out->ctrl_addr = (uintptr_t)&l->ctrl->remote_head;
  out->ctrl_rkey = l->ctrl_mr->rkey;
  snprintf(out->device, sizeof(out->device), "%.31s", l->ic->device);
}

static void ib_close(struct dccl_conn *conn);

static ncclResult_t ib_setup(struct dccl_conn *conn, void *info) {
  struct dccl_ib_link *l = calloc(1, sizeof(*l));
  if (!l) return dccl_error(ncclSystemError, "out of memory for an RDMA link");
  l->conn = conn;
  conn->priv = l;
  ncclResult_t res = comm_ctx(conn, &l->ic);
  if (res == ncclSuccess) res = make_link(conn, l);
  if (res != ncclSuccess) {
    ib_close(conn);
    return res;
  }
  struct dccl_ib_conn_info out;
  fill_info(conn, l, &out);
  memset(info, 0, DCCL_CONN_INFO_BYTES);
  memcpy(info, &out, sizeof(out));
  return ncclSuccess;
}

/* The QPs pair up index by index; all of a link's QPs start at the same PSN. */
static ncclResult_t ib_connect(struct dccl_conn *conn, const void *peer_info) {
  struct dccl_ib_link *l = conn->priv;
  memcpy(&l->remote, peer_info, sizeof(l->remote));
  const struct dccl_ib_conn_info *r = &l->remote;
  if (r->magic != DCCL_IB_INFO_MAGIC || r->is_send == conn->is_send)
    return dccl_error(ncclInternalError, "net_ib link with rank %d: the peer's connection info is not a net_ib %s side's",
                      conn->peer, conn->is_send ? "receive" : "send");
  if (r->nslots != l->nslots || r->slot_bytes != l->slot_bytes || r->nqps != (uint32_t)l->nqps)
    return dccl_error(ncclInvalidUsage,
                      "net_ib link with rank %d (host %s): settings differ (here %u slots of %llu bytes over %d QPs, "
                      "there %u of %llu over %u): set DCCL_NSLOTS, DCCL_CHUNK_SIZE and DCCL_IB_QPS_PER_CONN alike",
                      conn->peer, peer_host(conn), l->nslots, (unsigned long long)l->slot_bytes, l->nqps, r->nslots,
                      (unsigned long long)r->slot_bytes, r->nqps);
  if (!conn->is_send) DCCLCHECK(dccl_ib_post_initial_recvs(l));
  for (int i = 0; i < l->nqps; i++) DCCLCHECK(dccl_ib_qp_connect(l, &l->qps[i], r->qpn[i], r->psn));
  return ncclSuccess;
}

/* Both ends are ready (connect.c exchanged the confirmation): hand the link to the proxy. */
static ncclResult_t ib_start(struct dccl_conn *conn) {
  struct dccl_ib_link *l = conn->priv;
  dccl_ib_ctx_add_link(l->ic, l);
  atomic_store_explicit(&l->connected, 1, memory_order_release);
  dccl_proxy_wake(&l->ic->proxy);
  return ncclSuccess;
}

static ncclResult_t link_error(struct dccl_ib_link *l) {
  int err = atomic_load_explicit(&l->error, memory_order_acquire);
  return err ? dccl_error((ncclResult_t)err, "%s", l->error_text) : ncclSuccess;
}

/* The executor's thread: report the proxy's verdict, and wake the proxy when it sleeps through new work. */
static ncclResult_t ib_progress(struct dccl_conn *conn) {
  struct dccl_ib_link *l = conn->priv;
  if (!l || !atomic_load_explicit(&l->connected, memory_order_relaxed)) return ncclSuccess;
  dccl_proxy_wake(&l->ic->proxy);
  return link_error(l);
}

/* Zero-copy: a payload in a range the user registered (ncclCommRegister) is read by the NIC where it is. The
 * registration cache re-validates the range's pages on every use, so a freed and reused range is re-registered. */
static int ib_send_from(struct dccl_conn *conn, uint64_t tail, const void *src, uint64_t bytes) {
  struct dccl_ib_link *l = conn->priv;
  if (!l || l->max_sge < 2 || bytes > UINT32_MAX || !conn->ctx->is_registered(conn->ctx, src, bytes)) return 0;
  uint64_t i = tail % l->nslots;
  enum dccl_ib_reg_result r = dccl_ib_regcache_get(l->ic->regcache, src, (size_t)bytes, &l->slot_reg[i]);
  if (r != DCCL_IB_REG_HIT && r != DCCL_IB_REG_MISS && r != DCCL_IB_REG_UNCACHED) return 0;
  l->slot_src[i] = src; /* published to the proxy by the tail's release store */
  atomic_fetch_add_explicit(&l->ic->zero_copy_slots, 1, memory_order_relaxed);
  return 1;
}

static int ib_send_flushed(struct dccl_conn *conn) {
  return dccl_ld_acquire_u64(dccl_conn_head(conn)) == dccl_ld_acquire_u64(dccl_conn_tail(conn));
}

static ncclResult_t ib_check_peer(struct dccl_conn *conn) {
  struct dccl_ib_link *l = conn->priv;
  return l ? link_error(l) : ncclSuccess;
}

static void ib_abort(struct dccl_conn *conn) {
  struct dccl_ib_link *l = conn->priv;
  if (!l || !atomic_load(&l->connected)) return;
  atomic_store(&l->abort_requested, 1);
  dccl_proxy_wake(&l->ic->proxy);
}

static void ib_close(struct dccl_conn *conn) {
  struct dccl_ib_link *l = conn->priv;
  if (!l) return;
  if (l->ic) {
    dccl_ib_ctx_remove_link(l->ic, l);
    for (int i = 0; i < l->nqps; i++) {
      if (l->qps[i].qp) ibv_destroy_qp(l->qps[i].qp);
      free(l->qps[i].marks);
    }
    pthread_mutex_lock(&l->ic->lock); /* no completion event of this CQ is being acknowledged */
    if (l->cq) ibv_destroy_cq(l->cq);
    pthread_mutex_unlock(&l->ic->lock);
    dccl_ib_release_slots(l, 0, l->nslots); /* slots an aborted operation left behind */
#ifdef DCCL_HAVE_DEVICE_CODE
    dccl_host_fifo_device_unmap(conn, &l->device);
#endif
    if (l->fifo_mr) ibv_dereg_mr(l->fifo_mr);
    if (l->ctrl_mr) ibv_dereg_mr(l->ctrl_mr);
  }
  free(l->fifo);
  free(l->ctrl);
  free(l->slot_src);
  free(l->slot_reg);
  free(l);
  conn->priv = NULL;
  dccl_conn_unbind(conn);
}

const struct dccl_transport dccl_transport_ib = {
    .size = sizeof(struct dccl_transport),
    .name = "net_ib",
    .alias = "ib",
#ifdef DCCL_HAVE_DEVICE_CODE
    .buffers = DCCL_BUFFERS_HOST | DCCL_BUFFERS_DEVICE, /* device links: the FIFOs in pinned host memory */
#endif
    .moves_bytes = 1,
    .confirm_start = 1,
    .fallback = "socket",
    .unreachable = " (no active RDMA port on both ends)",
    .describe_self = ib_describe_self,
    .can_connect = ib_can_connect,
    .setup = ib_setup,
    .connect = ib_connect,
    .start = ib_start,
    .progress = ib_progress,
    .send_from = ib_send_from,
    .send_flushed = ib_send_flushed,
    .check_peer = ib_check_peer,
    .abort = ib_abort,
    .close = ib_close,
    .comm_free = ib_comm_free,
};
