/* The net_ib transport's own state. A link is one direction between two ranks, as for every transport:
 *   receive side: the FIFO (header + payload slots) in registered memory; the sender RDMA-WRITEs each filled slot
 *     into it WITH IMMEDIATE, so a receive completion says "slot s has fully arrived"; the proxy then advances the
 *     FIFO's tail, and when the executor frees slots it RDMA-WRITEs the new head (the credits) back.
 *   send side: a private FIFO the executor fills as usual; the proxy posts each filled slot once the receiver's
 *     head (written into `ctrl` by the receiver) shows room, and advances the local head when the write completed.
 * Slot s always travels on QP s % nqps, so each QP's completions arrive in slot order and both counters are the
 * minimum over the QPs. */
#ifndef DCCL_IB_PRIVATE_H_
#define DCCL_IB_PRIVATE_H_

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "proxy/proxy.h"
#include "transports/host_fifo_device.h"
#include "transports/net_ib/ib_device.h"
#include "transports/net_ib/ib_gdr.h"
#include "transports/net_ib/ib_gid.h"
#include "transports/net_ib/ib_regcache.h"
#include "transports/transport.h"

#define DCCL_IB_MAX_QPS 8
#define DCCL_IB_INFO_MAGIC 0x42494e44u /* "DNIB" */
#define DCCL_IB_MAX_GIDS 128
/* Send WRs beyond the data slots: credit and abort writes. */
#define DCCL_IB_CTRL_WRS 8

/* What one side tells the other at connect time (inside the DCCL_CONN_INFO_BYTES blob). */
struct dccl_ib_conn_info {
  uint32_t magic;
  int32_t is_send;
  uint32_t nslots;
  uint32_t nqps;
  uint64_t slot_bytes;
  uint32_t qpn[DCCL_IB_MAX_QPS];
  uint32_t psn;
  uint16_t lid;
  uint8_t link_layer;
  uint8_t mtu; /* enum ibv_mtu */
  uint8_t gid[16];
  uint64_t fifo_addr; /* the FIFO: a sender writes slots into it, a receiver writes the abort word */
  uint32_t fifo_rkey;
  uint32_t ctrl_rkey;
  uint64_t ctrl_addr; /* the send side's credit word */
  char device[32];
};
_Static_assert(sizeof(struct dccl_ib_conn_info) <= DCCL_CONN_INFO_BYTES, "ib info must fit the connection blob");

/* Words written by the NIC, on their own registered page. */
struct dccl_ib_ctrl {
  _Atomic uint64_t remote_head; /* send side: the receiver's head, written by the receiver */
  char pad[DCCL_CACHELINE - sizeof(uint64_t)];
  uint64_t head_src;  /* receive side: the source of a credit write */
  uint32_t abort_src; /* the source of an abort write */
};

/* A signalled send WR: once it completes, so have all WRs before it on its QP. */
struct dccl_ib_mark {
  uint64_t wr;   /* wr_posted after it */
  uint64_t data; /* data_posted after it */
};

struct dccl_ib_qp {
  struct ibv_qp *qp;
  uint32_t psn;
  uint32_t max_send_wr, max_inline;
  uint64_t wr_posted, wr_done;     /* send WRs */
  uint64_t data_posted, data_done; /* the data writes among them */
  uint64_t since_signal;           /* unsignalled WRs since the last signalled one */
  struct dccl_ib_mark *marks;      /* ring of max_send_wr */
  uint64_t marks_head, marks_tail;
  uint64_t recv_arrived; /* receive side: slots arrived on this QP */
};

struct dccl_ib_ctx;

struct dccl_ib_link {
  struct dccl_ib_ctx *ic;
  struct dccl_conn *conn;
  struct dccl_ib_link *next; /* in the context's list, walked by the proxy */
  void *fifo; /* the FIFO's one region: the peer's sender writes slots into a receiver's */
  struct ibv_mr *fifo_mr;
  struct dccl_host_fifo_device device; /* a device link: the FIFO mapped for the kernels (staged GPUDirect) */
  struct dccl_ib_ctrl *ctrl;
  struct ibv_mr *ctrl_mr;
  struct ibv_cq *cq;
  int cq_armed;
  int nqps;
  struct dccl_ib_qp qps[DCCL_IB_MAX_QPS];
  uint32_t nslots;
  uint64_t slot_bytes;
  int gid_index;
  struct dccl_ib_conn_info remote;
  _Atomic int connected;
  int max_sge;
  /* Zero-copy sends: slot s's payload is read from slot_src[s % nslots] (user memory, registered as
   * slot_reg[...]) instead of the slot; NULL when it was copied into the slot. */
  const void **slot_src;
  struct dccl_ib_reg *slot_reg;
  uint64_t posted;   /* send side: slots handed to the NIC */
  uint64_t credited; /* receive side: the head last written to the sender */
  _Atomic int abort_requested;
  int abort_sent;
  int64_t completion_due_ns; /* when a signalled write was first seen awaiting its completion (0: none awaited) */
  _Atomic int error; /* an ncclResult_t, set once by the proxy; error_text says what */
  char error_text[400];
};

/* One per process and RDMA port, shared by every communicator of the process that uses the port: the opened device,
 * its protection domain (so one registration serves them all), the completion channel every link's CQ reports to,
 * the registration cache, and the proxy thread that drives the links of all of them. Made by the first
 * communicator that needs it, freed with the last (ib_ctx.c). A forked child never uses or frees its parent's. */
struct dccl_ib_ctx {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_comp_channel *channel;
  struct ibv_device_attr dev_attr;
  struct ibv_port_attr port_attr;
  int port;
  char device[64];
  struct dccl_ib_gid_entry gids[DCCL_IB_MAX_GIDS];
  int ngids;
  struct dccl_ib_regcache *regcache; /* user buffers registered for zero-copy sends */
  /* How device buffers will reach the NIC (GPUDirect RDMA or host staging), decided once per context; the data
   * path for device buffers arrives with the GPU engine. */
  struct dccl_gdr_choice gdr;
  _Atomic uint64_t zero_copy_slots;   /* slots sent from user memory, for the log and the tests */
  pthread_mutex_t lock; /* the link list, against the proxy */
  struct dccl_ib_link *links; /* every communicator's */
  struct dccl_proxy proxy;
  /* Under the process-wide table's lock (ib_ctx.c). */
  int refs;               /* communicators holding it */
  int oversubscribed_refs; /* of which on an oversubscribed host: the proxy does not spin while any is */
  struct dccl_ib_ctx *next;
};

/* ib_ctx.c */
/* The context of `dev`'s port, made on first use; one reference per call. */
ncclResult_t dccl_ib_ctx_acquire(const struct dccl_ib_local *dev, int oversubscribed, struct dccl_ib_ctx **out);
/* Drops a reference (`oversubscribed` as given to acquire); the last one frees the context. Every link the
 * caller added must be removed first. */
void dccl_ib_ctx_release(struct dccl_ib_ctx *ic, int oversubscribed);
void dccl_ib_ctx_add_link(struct dccl_ib_ctx *ic, struct dccl_ib_link *l);
/* After this returns the proxy no longer touches the link. */
void dccl_ib_ctx_remove_link(struct dccl_ib_ctx *ic, struct dccl_ib_link *l);
/* How many contexts this process holds, for the tests. */
int dccl_ib_ctx_count(void);

/* ib_qp.c */
ncclResult_t dccl_ib_qp_create(struct dccl_ib_link *l, struct dccl_ib_qp *q, uint32_t send_wrs, uint32_t recv_wrs);
ncclResult_t dccl_ib_qp_connect(struct dccl_ib_link *l, struct dccl_ib_qp *q, uint32_t remote_qpn,
                                uint32_t remote_psn);
int dccl_ib_select_link_gid(struct dccl_ib_link *l, char *why, size_t why_len);

/* ib_datapath.c: called by the proxy; returns how many things moved. */
int dccl_ib_link_progress(struct dccl_ib_link *l);
/* Releases the user-buffer registrations of slots [from, to). */
void dccl_ib_release_slots(struct dccl_ib_link *l, uint64_t from, uint64_t to);
/* Posts the receives a receive side needs before the sender may write. */
ncclResult_t dccl_ib_post_initial_recvs(struct dccl_ib_link *l);

#endif
