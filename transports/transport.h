/* The connection: the one abstraction every transport implements (docs/design.md, "Connections").
 *
 * A directed link from a sender rank to a receiver rank is a FIFO laid out as pure/conn_desc.h says: `nslots`
 * slots and 64-bit counters that only grow, `tail` (slots filled, advanced by the producer) and `head` (slots
 * drained, advanced by the consumer), placed by a descriptor of offsets into regions. Each side of the link holds
 * a `struct dccl_conn` with that descriptor and its own mapping of the regions:
 *   - shm: one region in shared memory, the same bytes on both sides;
 *   - net_socket, net_ib: a private region on each side; the transport moves filled send slots to the peer's
 *     region (then advances the sender's head) and advances the receiver's tail when a slot has arrived whole.
 * The algorithms see only dccl_conn_* below and never name a transport. */
#ifndef DCCL_TRANSPORT_H_
#define DCCL_TRANSPORT_H_

#include <stdatomic.h>
#include <stdint.h>

#include "dccl.h"
#include "pure/conn_desc.h"
#include "transports/peer_info.h"

#define DCCL_CONN_INFO_BYTES 256 /* the blob a side sends its peer at connect time */

/* The size of a region holding a whole FIFO (control block and slots), as dccl_conn_desc_layout lays it out. */
static inline uint64_t dccl_fifo_bytes(uint32_t nslots, uint64_t slot_bytes, uint32_t ll_bytes) {
  struct dccl_conn_desc d;
  return dccl_conn_desc_layout(&d, nslots, slot_bytes, ll_bytes, DCCL_REGION_RECV);
}
/* Prepares a region laid out by `d` (control block and slots in it): counters and abort word zero, the geometry
 * recorded for the opener, and every unit a consumer may poll cleared. */
void dccl_fifo_init(void *region, const struct dccl_conn_desc *d);

struct dccl_transport;

#define DCCL_BUFFERS_HOST 1
#define DCCL_BUFFERS_DEVICE 2

/* What a transport may see of its communicator: core embeds one in it and fills it at creation. */
struct dccl_transport_ctx {
  int rank, nranks;
  const struct dccl_peer_info *peers; /* nranks entries */
  int oversubscribed;                 /* more ranks than processing units on this host: waits yield at once */
  _Atomic int *abort_flag;            /* nonzero: the communicator failed and every wait stops */
  /* Per-communicator state a transport keeps (e.g. the socket transport's listener), by registry index; core only
   * hands it back to the transport's comm_free. */
  void *transport_state[DCCL_MAX_TRANSPORTS];
  /* 1 when [ptr, ptr+bytes) lies inside one range the user registered (ncclCommRegister): zero-copy may read it. */
  int (*is_registered)(const struct dccl_transport_ctx *ctx, const void *ptr, uint64_t bytes);
  void *cu_ctx; /* the primary context of the rank's GPU (CUcontext), NULL without one: device transports use it */
  int cuda_ordinal; /* that GPU's CUDA ordinal, -1 without one (net_ib picks the NICs nearest it) */
  uint64_t dev_bytes; /* GPU memory the device transports hold for this communicator (__atomic updates) */
  uint64_t pinned_bytes; /* pinned host memory they hold (the staged transport's FIFOs; __atomic updates) */
};

struct dccl_conn {
  const struct dccl_transport *transport;
  struct dccl_transport_ctx *ctx;
  int peer;    /* the rank at the other end */
  int is_send; /* 1: this side produces into the FIFO */
  int lane;    /* which of the pair's links this is (channel, or a p2p lane) */
  int device;  /* 1: a device link (kernels at both ends fill and drain the FIFO); set before setup() */
  struct dccl_conn_desc desc;     /* the FIFO's layout, this side's copy */
  char *regions[DCCL_REGIONS];    /* this process's mapping of each region; NULL until the transport binds them */
  void *priv;                     /* the transport's own state */
  /* Device links (lanes from DCCL_LANE_DEVICE): the kernels' view of this side (struct dccl_dev_conn) in device
   * memory; regions[] then hold device addresses, which host code never reads. */
  void *dev;
  /* This side's own counter (tail for a sender, head for a receiver): only this side writes it. */
  uint64_t own_counter;
  /* The other side's counter as last read: re-read only when it must have moved, so a step does not pull the
   * other side's cache line across cores every time. */
  uint64_t cached_peer_counter;
  /* An LL slot's payload on its way into (sender) or out of (receiver) the slot's units (DCCL_LL_MAX_BYTES; only
   * on links that carry LL, and kept out of the struct, so the fields every step reads stay on few lines). */
  uint64_t *ll_stage;
};

/* Points conn (its is_send already set) at a FIFO laid out by `d`, mapped here at `recv_region` (and
 * `send_region`, where the layout uses one), with LL staging where the link carries LL; unbind forgets it and frees
 * the staging (safe on a zeroed or unbound conn). Transports call them from setup/connect and close. */
ncclResult_t dccl_conn_bind(struct dccl_conn *c, const struct dccl_conn_desc *d, void *recv_region, void *send_region);
void dccl_conn_unbind(struct dccl_conn *c);
static inline int dccl_conn_bound(const struct dccl_conn *c) { return c->regions[DCCL_REGION_RECV] != NULL; }
static inline uint64_t *dccl_conn_head(const struct dccl_conn *c) { return dccl_conn_word(c->regions, c->desc.head); }
static inline uint64_t *dccl_conn_tail(const struct dccl_conn *c) { return dccl_conn_word(c->regions, c->desc.tail); }
static inline uint32_t *dccl_conn_aborted(const struct dccl_conn *c) {
  return (uint32_t *)dccl_conn_word(c->regions, c->desc.aborted);
}
/* The bulk slot at FIFO position pos: its header and its payload. */
static inline struct dccl_slot_header *dccl_conn_slot_header(const struct dccl_conn *c, uint64_t pos) {
  return (struct dccl_slot_header *)(dccl_conn_slot(&c->desc, c->regions, pos) + 8);
}

/* A transport: one ops table (style.md: a provider fills one table). A provider defines a const table starting
 * with its size and lists it once in transports/registry.c; the registry keeps a completed copy, in which every
 * op the provider left out (or that lies past its size) is a "not supported" default, so callers never test for
 * NULL. Connections point at the registered copy. */
struct dccl_transport {
  size_t size; /* sizeof(struct dccl_transport) as the provider was built: later fields take the defaults */
  const char *name;
  const char *alias; /* another name DCCL_TRANSPORT accepts, or NULL */
  int index;         /* set by the registry: this transport's slot in ctx->transport_state and the peer info */
  /* Chosen by itself only between ranks of one host as DCCL_HOSTID sees it (shared memory): pretend hosts then
   * use a network transport between them, although shm could reach. */
  int host_local;
  /* Which buffers its links carry: DCCL_BUFFERS_HOST (0 means that too), DCCL_BUFFERS_DEVICE, or both. A device
   * link's FIFO is read and written by kernels; where the transport also moves bytes (moves_bytes), no caller
   * waits on the link, so core's link pump (transports/link_pump.h) progresses it. */
  int buffers;
  /* 1 when progress() moves the bytes (sockets, RDMA), so the executor calls it while it waits. */
  int moves_bytes;
  /* 1: both ends confirm over the bootstrap that connect() succeeded before start() runs on either; nothing may be
   * sent before (an RDMA queue pair drops what arrives before it is ready). */
  int confirm_start;
  /* When setup, connect or the confirmation fails on either end, both ends use the transport of this name instead
   * (unless the user forced this one), with a warning saying why. NULL: a failure is an error. */
  const char *fallback;
  /* Why can_connect may refuse, for the error when DCCL_TRANSPORT forces this transport. */
  const char *unreachable;

  /* Writes what peers need to choose this transport into `mine` (DCCL_TRANSPORT_PEER_BYTES, zeroed). Default: nothing. */
  void (*describe_self)(void *mine);
  /* May these two ranks use this transport? Both ends evaluate it with the same two infos, so they agree. `mine`
   * and `theirs` are the two ranks' describe_self() bytes. Required. */
  int (*can_connect)(const struct dccl_peer_info *self, const struct dccl_peer_info *peer, const void *mine,
                     const void *theirs);
  /* Creates this side's resources and writes what the peer needs into `info` (DCCL_CONN_INFO_BYTES bytes). Required. */
  ncclResult_t (*setup)(struct dccl_conn *conn, void *info);
  /* Completes the link with the peer's info. All ranks connect send sides before receive sides. Required. */
  ncclResult_t (*connect)(struct dccl_conn *conn, const void *peer_info);
  /* Runs on each end once both confirmed (confirm_start). Default: nothing to do. */
  ncclResult_t (*start)(struct dccl_conn *conn);
  /* Moves bytes (moves_bytes); returns an error naming the peer if the link broke. Default: nothing to move. */
  ncclResult_t (*progress)(struct dccl_conn *conn);
  /* Offers the payload of send slot `tail` in place: `src` (user memory, untouched until the operation
   * completes). Returns 1 when the transport will read it from there, so the executor copies nothing into the
   * slot (zero-copy); 0 to have it copied as usual (the default). */
  int (*send_from)(struct dccl_conn *conn, uint64_t tail, const void *src, uint64_t bytes);
  /* 1 when every slot this send side posted has left this process (the caller may then return). Default: 1. */
  int (*send_flushed)(struct dccl_conn *conn);
  /* Slow-path check, called while a wait makes no progress: is the peer still there? Default: yes. */
  ncclResult_t (*check_peer)(struct dccl_conn *conn);
  /* Tells the peer we gave up (best effort, never blocks). Default: nothing. */
  void (*abort)(struct dccl_conn *conn);
  /* Frees everything setup/connect made; never blocks on the peer. Default: nothing. */
  void (*close)(struct dccl_conn *conn);
  /* Frees the transport's per-communicator state (ctx->transport_state[index], passed here), after every conn is
   * closed; `aborted` says whether the communicator failed. Default: nothing. */
  void (*comm_free)(void *state, int aborted);
  /* A device link's FIFO region as this process's host code can read it (its counters and slots, laid out by
   * conn->desc), or NULL where only GPUs reach it; for stall reports. Default: NULL. */
  const char *(*host_view)(const struct dccl_conn *conn);
};

/* The providers' own tables; everything else uses the registry's copies (transports/registry.h). */
extern const struct dccl_transport dccl_transport_shm;
extern const struct dccl_transport dccl_transport_socket;
#ifdef DCCL_HAVE_IBVERBS
extern const struct dccl_transport dccl_transport_ib;
#endif
#ifdef DCCL_HAVE_DEVICE_CODE
extern const struct dccl_transport dccl_transport_p2p;
extern const struct dccl_transport dccl_transport_staged;
#endif

/* --- the executor's view of a connection; non-blocking, each returns at once --- */

/* The protocol a slot of `bytes` travels in when the operation asks for `proto`: LL only where the link carries it
 * and the payload fits. Only the producer chooses; a slot says how it was sent, so the consumer needs no choice
 * and ends that disagree (different counts) still read each other's slots and report the mismatch. */
static inline int dccl_conn_proto(const struct dccl_conn *c, uint64_t bytes, int proto) {
  int ll = proto == DCCL_PROTO_LL && (c->desc.protos & DCCL_PROTO_BIT(DCCL_PROTO_LL)) && bytes <= c->desc.ll_bytes;
  return ll ? DCCL_PROTO_LL : DCCL_PROTO_BULK;
}

struct dccl_send_slot {
  void *payload; /* where to write the payload: the slot itself (bulk) or the conn's LL staging */
  char *slot;    /* the slot: the position's bulk slot or its LL slot */
  uint64_t pos;  /* the slot's FIFO position (the tail when taken) */
  int proto;
};
/* Takes a free slot for `bytes` of payload under `proto`; 0 if the FIFO is full (the caller retries later). */
static inline int dccl_conn_send_slot(struct dccl_conn *c, uint64_t bytes, int proto, struct dccl_send_slot *s) {
  uint64_t tail = c->own_counter;
  if (tail - c->cached_peer_counter >= c->desc.nslots) {
    c->cached_peer_counter = dccl_ld_acquire_u64(dccl_conn_head(c)); /* the consumer is done with those slots */
    if (tail - c->cached_peer_counter >= c->desc.nslots) return 0;
  }
  s->pos = tail;
  s->proto = dccl_conn_proto(c, bytes, proto);
  s->slot = s->proto == DCCL_PROTO_LL ? dccl_conn_ll_slot(&c->desc, c->regions, tail)
                                      : dccl_conn_slot(&c->desc, c->regions, tail);
  s->payload = s->proto == DCCL_PROTO_LL ? (void *)c->ll_stage : (void *)(s->slot + dccl_bulk_payload_off(bytes));
  return 1;
}
/* Publishes the slot taken by dccl_conn_send_slot. Bulk: the header, unit 0 and `tail`, the last two with release.
 * LL: the units, then `tail` (release; free on x86) for transports and tools that read it. */
static inline void dccl_conn_send_post_header(struct dccl_conn *c, const struct dccl_send_slot *s,
                                              const struct dccl_slot_header *h) {
  if (s->proto == DCCL_PROTO_LL)
    dccl_ll_write_slot(s->slot, s->pos, h, (const uint32_t *)c->ll_stage);
  else
    dccl_bulk_write_head(s->slot, s->pos, h);
  c->own_counter = s->pos + 1;
  dccl_st_release_u64(dccl_conn_tail(c), s->pos + 1);
}
/* The same with no call fingerprint (tools and tests that move raw slots). */
static inline void dccl_conn_send_post(struct dccl_conn *c, const struct dccl_send_slot *s, uint64_t bytes,
                                       uint64_t seq, uint32_t kind) {
  struct dccl_slot_header h = {bytes, seq, kind, 0, 0, 0, -1};
  dccl_conn_send_post_header(c, s, &h);
}

struct dccl_recv_slot {
  struct dccl_slot_header h; /* a copy of the slot's header */
  const void *payload;       /* in the slot (bulk) or in the conn's LL staging */
};
/* The next filled slot, in whichever protocol it came; 0 if none has arrived yet. Where the producer writes the
 * slots itself (every link that carries LL) the consumer polls the position's bulk unit 0 and its LL slot's
 * header line (two lines of the producer's); where a transport fills them, `tail`. */
static inline int dccl_conn_recv_slot(struct dccl_conn *c, struct dccl_recv_slot *r) {
  uint64_t head = c->own_counter;
  const char *slot = dccl_conn_slot(&c->desc, c->regions, head);
  if (c->desc.protos & DCCL_PROTO_BIT(DCCL_PROTO_LL)) {
    int got = dccl_slot_poll(slot, dccl_conn_ll_slot(&c->desc, c->regions, head), head, c->desc.ll_bytes, &r->h,
                             (uint32_t *)c->ll_stage);
    if (got == DCCL_SLOT_NOT_YET) return 0;
    if (got == DCCL_SLOT_LL) {
      r->payload = c->ll_stage;
      return 1;
    }
  } else if (c->cached_peer_counter <= head) {
    c->cached_peer_counter = dccl_ld_acquire_u64(dccl_conn_tail(c));
    if (c->cached_peer_counter <= head) return 0;
  }
  r->h = *(const struct dccl_slot_header *)(slot + 8);
  r->payload = slot + dccl_bulk_payload_off(r->h.bytes);
  return 1;
}
/* Hands the slot returned by dccl_conn_recv_slot back to the producer. */
static inline void dccl_conn_recv_done(struct dccl_conn *c) {
  c->own_counter++;
  dccl_st_release_u64(dccl_conn_head(c), c->own_counter);
}
/* 1 + the rank that gave up on this link, or 0. */
static inline uint32_t dccl_conn_peer_aborted(const struct dccl_conn *c) {
  return dccl_ld_acquire_u32(dccl_conn_aborted(c));
}

#endif
