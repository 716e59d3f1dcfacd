/* The proxy's work on one link: post filled slots as RDMA writes with immediate, return credits, poll the CQ.
 * Only the proxy thread runs this (under the comm's lock), so the per-QP counters need no atomics; the FIFO
 * counters shared with the executor are the usual single-writer atomics. */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "transports/net_ib/ib_private.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/params.h"

enum { KIND_SEND = 0, KIND_RECV = 1 };
#define WR_ID(q_index, kind) (((uint64_t)(q_index) << 1) | (uint64_t)(kind))
/* A data write is signalled at least this often, so the sender's head (slot reuse) does not lag far behind. */
#define SIGNAL_EVERY 4

static void link_fail(struct dccl_ib_link *l, ncclResult_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void link_fail(struct dccl_ib_link *l, ncclResult_t code, const char *fmt, ...) {
  if (atomic_load(&l->error)) return; /* the first failure is the cause; flushes follow it */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(l->error_text, sizeof(l->error_text), fmt, ap);
  va_end(ap);
  atomic_store_explicit(&l->error, (int)code, memory_order_release);
}

static const char *peer_host(const struct dccl_ib_link *l) { return l->conn->ctx->peers[l->conn->peer].hostname; }

static int sq_has_room(const struct dccl_ib_qp *q) { return q->wr_posted - q->wr_done < q->max_send_wr; }

/* One RDMA write (with immediate when `imm` is given). Unsignalled unless asked, or when half the send queue is
 * unsignalled WRs: a signalled completion retires everything before it on the QP. */
static int post_write(struct dccl_ib_link *l, struct dccl_ib_qp *q, struct ibv_sge *sge, int nsge, uint64_t raddr,
                      uint32_t rkey, const uint32_t *imm, int is_data, int signal) {
  uint32_t len = 0;
  for (int i = 0; i < nsge; i++) len += sge[i].length;
  signal = signal || q->since_signal + 1 >= q->max_send_wr / 2;
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = WR_ID(q - l->qps, KIND_SEND);
  wr.sg_list = sge;
  wr.num_sge = nsge;
  wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  if (imm) wr.imm_data = htonl(*imm);
  wr.send_flags = (signal ? IBV_SEND_SIGNALED : 0) | (len <= q->max_inline ? IBV_SEND_INLINE : 0);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  int err = ibv_post_send(q->qp, &wr, &bad);
  if (err) {
    link_fail(l, ncclSystemError, "net_ib link to rank %d (host %s): posting a write on %s QP %u failed: %s",
              l->conn->peer, peer_host(l), l->ic->device, q->qp->qp_num, strerror(err));
    return -1;
  }
  q->wr_posted++;
  q->data_posted += (uint64_t)is_data;
  if (signal) {
    q->marks[q->marks_tail++ % q->max_send_wr] = (struct dccl_ib_mark){q->wr_posted, q->data_posted};
    q->since_signal = 0;
  } else {
    q->since_signal++;
  }
  return 0;
}

static int post_recv(struct dccl_ib_link *l, struct dccl_ib_qp *q) {
  struct ibv_recv_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = WR_ID(q - l->qps, KIND_RECV);
  wr.num_sge = 0; /* a write with immediate consumes a receive but places its data by address */
  int err = ibv_post_recv(q->qp, &wr, &bad);
  if (err)
    link_fail(l, ncclSystemError, "net_ib link from rank %d (host %s): posting a receive on %s QP %u failed: %s",
              l->conn->peer, peer_host(l), l->ic->device, q->qp->qp_num, strerror(err));
  return err ? -1 : 0;
}

ncclResult_t dccl_ib_post_initial_recvs(struct dccl_ib_link *l) {
  for (int i = 0; i < l->nqps; i++)
    for (uint32_t k = 0; k < l->nslots; k++)
      if (post_recv(l, &l->qps[i]) != 0) return dccl_error(ncclSystemError, "%s", l->error_text);
  return ncclSuccess;
}

/* Peer gone, retries exhausted, keys refused: the peer's side. Our own misuse of the device: ours. */
static ncclResult_t wc_result(enum ibv_wc_status s) {
  switch (s) {
  case IBV_WC_LOC_LEN_ERR:
  case IBV_WC_LOC_QP_OP_ERR:
  case IBV_WC_LOC_PROT_ERR:
  case IBV_WC_LOC_ACCESS_ERR:
  case IBV_WC_MW_BIND_ERR:
  case IBV_WC_GENERAL_ERR:
    return ncclSystemError;
  default:
    return ncclRemoteError;
  }
}

static void on_wc_error(struct dccl_ib_link *l, struct dccl_ib_qp *q, const struct ibv_wc *wc) {
  int is_recv = (wc->wr_id & 1) == KIND_RECV;
  link_fail(l, wc_result(wc->status),
            "net_ib link %s rank %d (host %s): %s on %s QP %u failed: %s (status %d, vendor error 0x%x)",
            l->conn->is_send ? "to" : "from", l->conn->peer, peer_host(l), is_recv ? "a receive" : "an RDMA write",
            l->ic->device, q->qp->qp_num, ibv_wc_status_str(wc->status), (int)wc->status, wc->vendor_err);
}

static int poll_cq(struct dccl_ib_link *l) {
  struct ibv_wc wc[16];
  int n = ibv_poll_cq(l->cq, 16, wc);
  if (n < 0) {
    link_fail(l, ncclSystemError, "net_ib link with rank %d: polling the completion queue on %s failed",
              l->conn->peer, l->ic->device);
    return 0;
  }
  for (int i = 0; i < n; i++) {
    struct dccl_ib_qp *q = &l->qps[wc[i].wr_id >> 1];
    if (wc[i].status != IBV_WC_SUCCESS) {
      on_wc_error(l, q, &wc[i]);
    } else if ((wc[i].wr_id & 1) == KIND_RECV) {
      uint64_t slot = (uint64_t)(q - l->qps) + q->recv_arrived * (uint64_t)l->nqps;
      if (ntohl(wc[i].imm_data) != (uint32_t)slot)
        link_fail(l, ncclInternalError, "net_ib link from rank %d: slot %u arrived where slot %u was due on QP %u",
                  l->conn->peer, ntohl(wc[i].imm_data), (uint32_t)slot, q->qp->qp_num);
      q->recv_arrived++;
      post_recv(l, q);
    } else {
      struct dccl_ib_mark m = q->marks[q->marks_head++ % q->max_send_wr];
      q->wr_done = m.wr;
      q->data_done = m.data;
      l->completion_due_ns = 0; /* the device answers: the clock restarts */
    }
  }
  return n;
}

/* Slots s = i + k * nqps travel on QP i, in order: the first slot not yet done on any QP. */
static uint64_t first_pending(const struct dccl_ib_link *l, int use_arrivals) {
  uint64_t low = UINT64_MAX;
  for (int i = 0; i < l->nqps; i++) {
    uint64_t k = use_arrivals ? l->qps[i].recv_arrived : l->qps[i].data_done;
    uint64_t s = (uint64_t)i + k * (uint64_t)l->nqps;
    if (s < low) low = s;
  }
  return low;
}

static int send_side(struct dccl_ib_link *l) {
  struct dccl_conn *c = l->conn;
  uint64_t tail = dccl_ld_acquire_u64(dccl_conn_tail(c));
  uint64_t credit = atomic_load_explicit(&l->ctrl->remote_head, memory_order_acquire);
  int moved = 0;
  while (l->posted < tail && l->posted - credit < l->nslots) {
    struct dccl_ib_qp *q = &l->qps[l->posted % (uint64_t)l->nqps];
    if (!sq_has_room(q)) break;
    char *slot = dccl_conn_slot(&c->desc, c->regions, l->posted);
    uint64_t bytes = dccl_conn_slot_header(c, l->posted)->bytes;
    uint64_t off = (uint64_t)(slot - (char *)l->fifo);
    /* The header from the slot; the payload from the slot, or in place from the user's registered buffer. */
    uint64_t i = l->posted % l->nslots;
    struct ibv_sge sge[2] = {{(uintptr_t)slot, (uint32_t)(DCCL_SLOT_HEAD_BYTES + bytes), l->fifo_mr->lkey}};
    int nsge = 1;
    if (l->slot_src[i]) {
      sge[0].length = DCCL_SLOT_HEAD_BYTES;
      sge[1] = (struct ibv_sge){(uintptr_t)l->slot_src[i], (uint32_t)bytes, l->slot_reg[i].mr.lkey};
      nsge = 2;
    }
    uint32_t imm = (uint32_t)l->posted;
    /* The last slot this QP gets for now must be signalled, or the slots before it are never retired. */
    int signal = l->posted + (uint64_t)l->nqps >= tail || q->data_posted % SIGNAL_EVERY == SIGNAL_EVERY - 1;
    if (post_write(l, q, sge, nsge, l->remote.fifo_addr + off, l->remote.fifo_rkey, &imm, 1, signal) != 0) break;
    l->posted++;
    moved++;
  }
  uint64_t head = first_pending(l, 0);
  if (head > l->posted) head = l->posted;
  uint64_t old = dccl_ld_relaxed_u64(dccl_conn_head(c));
  if (head != old) {
    dccl_ib_release_slots(l, old, head); /* before the executor may reuse them */
    dccl_st_release_u64(dccl_conn_head(c), head);
    moved++;
  }
  return moved;
}

void dccl_ib_release_slots(struct dccl_ib_link *l, uint64_t from, uint64_t to) {
  for (uint64_t s = from; s < to && l->slot_src; s++) {
    uint64_t i = s % l->nslots;
    if (!l->slot_src[i]) continue;
    dccl_ib_regcache_put(l->ic->regcache, &l->slot_reg[i]);
    l->slot_src[i] = NULL;
  }
}

static int recv_side(struct dccl_ib_link *l) {
  struct dccl_conn *c = l->conn;
  int moved = 0;
  uint64_t tail = first_pending(l, 1);
  if (tail != dccl_ld_relaxed_u64(dccl_conn_tail(c))) {
    dccl_st_release_u64(dccl_conn_tail(c), tail);
    moved++;
  }
  uint64_t head = dccl_ld_acquire_u64(dccl_conn_head(c));
  struct dccl_ib_qp *q = &l->qps[0];
  if (head != l->credited && sq_has_room(q)) {
    l->ctrl->head_src = head;
    struct ibv_sge sge = {(uintptr_t)&l->ctrl->head_src, sizeof(uint64_t), l->ctrl_mr->lkey};
    if (post_write(l, q, &sge, 1, l->remote.ctrl_addr, l->remote.ctrl_rkey, NULL, 0, 0) == 0) {
      l->credited = head;
      moved++;
    }
  }
  return moved;
}

/* Tells the peer we gave up: our rank + 1 into its FIFO's abort word. */
static void send_abort(struct dccl_ib_link *l) {
  struct dccl_ib_qp *q = &l->qps[0];
  l->abort_sent = 1;
  if (!sq_has_room(q)) return; /* best effort: the peer also learns from the monitor */
  l->ctrl->abort_src = (uint32_t)l->conn->ctx->rank + 1;
  struct ibv_sge sge = {(uintptr_t)&l->ctrl->abort_src, sizeof(uint32_t), l->ctrl_mr->lkey};
  uint64_t raddr = l->remote.fifo_addr + l->conn->desc.aborted.off; /* both ends lay the FIFO out alike */
  (void)post_write(l, q, &sge, 1, raddr, l->remote.fifo_rkey, NULL, 0, 1);
}

/* A device must report every signalled write within its retries: ack timeout (4.096 us x 2^DCCL_IB_TIMEOUT) x
 * (DCCL_IB_RETRY_CNT + 1). Soft-RoCE under emulation was seen to report nothing for writes to a QP nobody owns,
 * leaving both ends waiting forever; a write still unanswered long after that bound (8 times it, at least 30 s)
 * fails the link instead. */
static void check_completions_due(struct dccl_ib_link *l) {
  const struct dccl_ib_qp *late = NULL;
  for (int i = 0; i < l->nqps && !late; i++)
    if (l->qps[i].marks_tail != l->qps[i].marks_head) late = &l->qps[i];
  if (!late) {
    l->completion_due_ns = 0;
    return;
  }
  int64_t now = dccl_now_ns();
  if (!l->completion_due_ns) {
    l->completion_due_ns = now;
    return;
  }
  double waited_s = (double)(now - l->completion_due_ns) / 1e9;
  if (waited_s <= 30) return; /* the floor: no need to work out the bound before */
  int64_t exp = dccl_param_int(DCCL_PARAM_IB_TIMEOUT), retries = dccl_param_int(DCCL_PARAM_IB_RETRY_CNT);
  double bound_s = 4.096e-6 * (double)(1ull << (exp < 0 ? 0 : exp > 31 ? 31 : exp)) * (double)(retries + 1);
  if (waited_s > (8 * bound_s > 30 ? 8 * bound_s : 30))
    link_fail(l, ncclRemoteError,
              "net_ib link %s rank %d (host %s): an RDMA write on %s QP %u has had no completion for %.0f s, where "
              "the device must report one within %.3f s (ack timeout x retries): neither rank %d nor the device "
              "answers",
              l->conn->is_send ? "to" : "from", l->conn->peer, peer_host(l), l->ic->device, late->qp->qp_num,
              waited_s, bound_s, l->conn->peer);
}

int dccl_ib_link_progress(struct dccl_ib_link *l) {
  if (!atomic_load_explicit(&l->connected, memory_order_acquire)) return 0;
  int moved = poll_cq(l);
  if (!moved) check_completions_due(l); /* a completion restarted the clock: no need to read it while they flow */
  if (atomic_load_explicit(&l->error, memory_order_relaxed)) return moved;
  if (atomic_load_explicit(&l->abort_requested, memory_order_relaxed)) {
    if (!l->abort_sent) send_abort(l);
    return moved;
  }
  return moved + (l->conn->is_send ? send_side(l) : recv_side(l));
}
