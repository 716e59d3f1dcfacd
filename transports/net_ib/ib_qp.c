/* Queue pairs: creation within the device's limits, and the INIT -> RTR -> RTS transitions with the peer's
 * numbers (exchanged over the bootstrap, see ib_transport.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "transports/net_ib/ib_private.h"
#include "util/error.h"
#include "util/params.h"

/* Headers plus small payloads go inline (copied into the WR at post time): one less DMA read per message. */
#define IB_WANT_INLINE 256

ncclResult_t dccl_ib_qp_create(struct dccl_ib_link *l, struct dccl_ib_qp *q, uint32_t send_wrs, uint32_t recv_wrs) {
  struct dccl_ib_ctx *ic = l->ic;
  uint32_t max_wr = (uint32_t)ic->dev_attr.max_qp_wr;
  if (send_wrs > max_wr || recv_wrs > max_wr)
    return dccl_error(ncclInvalidUsage,
                      "net_ib: %s allows %u work requests per queue, a link needs %u: lower DCCL_NSLOTS", ic->device,
                      max_wr, send_wrs > recv_wrs ? send_wrs : recv_wrs);
  struct ibv_qp_init_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.send_cq = l->cq;
  attr.recv_cq = l->cq;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0; /* selective signalling */
  attr.cap.max_send_wr = send_wrs;
  attr.cap.max_recv_wr = recv_wrs;
  attr.cap.max_send_sge = ic->dev_attr.max_sge < 2 ? (uint32_t)ic->dev_attr.max_sge : 2;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = IB_WANT_INLINE;
  q->qp = ibv_create_qp(ic->pd, &attr);
  if (!q->qp) { /* some devices refuse that much inline data: ask for none */
    attr.cap.max_inline_data = 0;
    q->qp = ibv_create_qp(ic->pd, &attr);
  }
  if (!q->qp)
    return dccl_error(ncclSystemError, "net_ib: cannot create a queue pair on %s (%u send, %u receive WRs): %s",
                      ic->device, send_wrs, recv_wrs, strerror(errno));
  q->max_send_wr = attr.cap.max_send_wr;
  q->max_inline = attr.cap.max_inline_data; /* what the device granted */
  q->marks = calloc(q->max_send_wr, sizeof(*q->marks));
  if (!q->marks) return dccl_error(ncclSystemError, "out of memory for a queue pair");
  uint32_t r;
  if (getentropy(&r, sizeof(r)) != 0) r = (uint32_t)(uintptr_t)q;
  q->psn = r & 0xffffff;

  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = (uint8_t)ic->port;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return dccl_error(ncclSystemError, "net_ib: QP %u on %s: cannot move to INIT: %s", q->qp->qp_num, ic->device,
                      strerror(errno));
  return ncclSuccess;
}

ncclResult_t dccl_ib_qp_connect(struct dccl_ib_link *l, struct dccl_ib_qp *q, uint32_t remote_qpn,
                                uint32_t remote_psn) {
  struct dccl_ib_ctx *ic = l->ic;
  const struct dccl_ib_conn_info *rem = &l->remote;
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = (enum ibv_mtu)(rem->mtu < ic->port_attr.active_mtu ? rem->mtu : ic->port_attr.active_mtu);
  a.dest_qp_num = remote_qpn;
  a.rq_psn = remote_psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = (uint8_t)ic->port;
  if (ic->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET) {
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, rem->gid, 16);
    a.ah_attr.grh.sgid_index = (uint8_t)l->gid_index;
    a.ah_attr.grh.hop_limit = 64;
  } else {
    a.ah_attr.dlid = rem->lid;
  }
  if (ibv_modify_qp(q->qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return dccl_error(ncclSystemError, "net_ib: QP %u on %s to rank %d (QP %u): cannot move to RTR: %s",
                      q->qp->qp_num, ic->device, l->conn->peer, remote_qpn, strerror(errno));
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = q->psn;
  a.timeout = (uint8_t)dccl_param_int(DCCL_PARAM_IB_TIMEOUT);
  a.retry_cnt = (uint8_t)dccl_param_int(DCCL_PARAM_IB_RETRY_CNT);
  a.rnr_retry = 7; /* 7 = retry forever: the receiver reposts receives as fast as slots arrive */
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(q->qp, &a,
                    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_MAX_QP_RD_ATOMIC))
    return dccl_error(ncclSystemError, "net_ib: QP %u on %s to rank %d: cannot move to RTS: %s", q->qp->qp_num,
                      ic->device, l->conn->peer, strerror(errno));
  return ncclSuccess;
}

/* RoCE: the GID of the local address that routes to the peer's address (peer info), or DCCL_IB_GID_INDEX. */
int dccl_ib_select_link_gid(struct dccl_ib_link *l, char *why, size_t why_len) {
  struct dccl_ib_ctx *ic = l->ic;
  if (ic->port_attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
    snprintf(why, why_len, "InfiniBand: LID %u", ic->port_attr.lid);
    return 0;
  }
  const struct dccl_peer_info *peer = &l->conn->ctx->peers[l->conn->peer];
  struct sockaddr_storage dst, src;
  int have_src = dccl_peer_net_addr(peer, &dst) == 0 && dccl_ib_route_source(&dst, &src) == 0;
  return dccl_ib_select_gid(ic->gids, ic->ngids, have_src ? &src : NULL, (int)dccl_param_int(DCCL_PARAM_IB_GID_INDEX),
                            why, why_len);
}
