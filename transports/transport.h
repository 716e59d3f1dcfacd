/* The connection: the one abstraction every transport implements (docs/design.md, "Connections").
 *
 * A directed link from a sender rank to a receiver rank is a FIFO of `nslots` slots of `slot_bytes` payload each,
 * and two 64-bit counters that only grow: `tail` (slots filled, advanced by the producer) and `head` (slots
 * drained, advanced by the consumer). Each side of the link holds a `struct dccl_conn` whose `fifo` points at the
 * FIFO its executor reads or writes:
 *   - shm: one FIFO in shared memory, the same bytes on both sides;
 *   - net_socket: a private FIFO on each side; the transport's progress() moves filled send slots into the
 *     socket (then advances the sender's head) and socket bytes into free receive slots (then advances the
 *     receiver's tail).
 * The algorithms see only dccl_conn_* below and never name a transport. */
#ifndef DCCL_TRANSPORT_H_
#define DCCL_TRANSPORT_H_

#include <stdatomic.h>
#include <stdint.h>

#include "dccl.h"
#include "transports/peer_info.h"

#define DCCL_CACHELINE 128
#define DCCL_CONN_INFO_BYTES 256 /* the blob a side sends its peer at connect time */

#define DCCL_SLOT_INLINE_BYTES 32

/* Every slot starts with this header, one 64-byte line; the receiver checks seq and kind against the operation it
 * runs. The low-latency path: a payload of up to DCCL_SLOT_INLINE_BYTES is also copied into the header, and the
 * producer stores `ready` last, so on a direct transport the consumer learns of the slot and reads a small
 * payload with one cache-line transfer instead of three (tail, header, payload). */
struct dccl_slot_header {
  uint64_t bytes;  /* payload bytes in this slot */
  uint64_t seq;    /* operation sequence number (per comm for collectives, per peer/direction for p2p) */
  uint32_t kind;   /* enum dccl_op_kind */
  uint32_t abort;  /* nonzero: the producer gave up (the payload is meaningless) */
  _Atomic uint64_t ready; /* the slot's index + 1 once filled (direct transports only) */
  unsigned char inline_data[DCCL_SLOT_INLINE_BYTES]; /* a copy of a small payload */
};
_Static_assert(sizeof(struct dccl_slot_header) == 64, "the payload starts 64-byte aligned");

/* Counters each alone on their line. Lives at the start of a FIFO region, slots follow at fifo_slot(). */
struct dccl_fifo {
  _Atomic uint64_t head;
  char pad0[DCCL_CACHELINE - sizeof(uint64_t)];
  _Atomic uint64_t tail;
  char pad1[DCCL_CACHELINE - sizeof(uint64_t)];
  /* Set by either side when it aborts: 1 + the rank that first saw the failure, so the other side can stop waiting
   * and say whom it was waiting for. */
  _Atomic uint32_t aborted;
  uint32_t nslots;
  uint64_t slot_bytes;
  char pad2[DCCL_CACHELINE - 16];
};

static inline uint64_t dccl_fifo_bytes(uint32_t nslots, uint64_t slot_bytes) {
  return sizeof(struct dccl_fifo) + (uint64_t)nslots * (sizeof(struct dccl_slot_header) + slot_bytes);
}
static inline struct dccl_slot_header *dccl_fifo_slot(struct dccl_fifo *f, uint64_t index) {
  char *base = (char *)(f + 1);
  return (struct dccl_slot_header *)(base + (index % f->nslots) * (sizeof(struct dccl_slot_header) + f->slot_bytes));
}
/* Initializes a FIFO in memory of dccl_fifo_bytes() bytes. */
void dccl_fifo_init(struct dccl_fifo *f, uint32_t nslots, uint64_t slot_bytes);

struct dccl_transport;

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
};

struct dccl_conn {
  const struct dccl_transport *transport;
  struct dccl_transport_ctx *ctx;
  int peer;    /* the rank at the other end */
  int is_send; /* 1: this side produces into the FIFO */
  int lane;    /* which of the pair's links this is (channel, or a p2p lane) */
  struct dccl_fifo *fifo;
  void *priv; /* the transport's own state */
  /* The other side's counter as last read: re-read only when it must have moved, so a step does not pull the
   * other side's cache line across cores every time. */
  uint64_t cached_peer_counter;
};

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
  /* 1 when the producer's stores land in the consumer's FIFO itself (shared memory), so the consumer may poll each
   * slot's `ready` word; 0 when a transport copies whole slots in (sockets: a header may arrive before its payload). */
  int direct_slots;
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
};

/* The providers' own tables; everything else uses the registry's copies (transports/registry.h). */
extern const struct dccl_transport dccl_transport_shm;
extern const struct dccl_transport dccl_transport_socket;
#ifdef DCCL_HAVE_IBVERBS
extern const struct dccl_transport dccl_transport_ib;
#endif

/* --- the executor's view of a connection; non-blocking, each returns at once --- */

/* A free slot to fill, or NULL if the FIFO is full (the caller retries later). */
static inline struct dccl_slot_header *dccl_conn_send_slot(struct dccl_conn *c, uint64_t *tail_out) {
  struct dccl_fifo *f = c->fifo;
  uint64_t tail = atomic_load_explicit(&f->tail, memory_order_relaxed); /* only this side writes tail */
  if (tail - c->cached_peer_counter >= f->nslots) {
    c->cached_peer_counter = atomic_load_explicit(&f->head, memory_order_acquire);
    if (tail - c->cached_peer_counter >= f->nslots) return NULL;
  }
  *tail_out = tail;
  return dccl_fifo_slot(f, tail);
}
/* Publishes the slot returned by dccl_conn_send_slot: header and payload become visible before `ready` and
 * `tail` move. */
static inline void dccl_conn_send_post(struct dccl_conn *c, struct dccl_slot_header *slot, uint64_t tail,
                                       uint64_t bytes, uint64_t seq, uint32_t kind) {
  slot->bytes = bytes;
  slot->seq = seq;
  slot->kind = kind;
  slot->abort = 0;
  if (bytes <= DCCL_SLOT_INLINE_BYTES)
    for (uint64_t i = 0; i < bytes; i++) slot->inline_data[i] = ((const unsigned char *)(slot + 1))[i];
  atomic_store_explicit(&slot->ready, tail + 1, memory_order_release);
  atomic_store_explicit(&c->fifo->tail, tail + 1, memory_order_release);
}
/* The next filled slot, or NULL if none has arrived yet. */
static inline struct dccl_slot_header *dccl_conn_recv_slot(struct dccl_conn *c) {
  struct dccl_fifo *f = c->fifo;
  uint64_t head = atomic_load_explicit(&f->head, memory_order_relaxed); /* only this side writes head */
  struct dccl_slot_header *slot = dccl_fifo_slot(f, head);
  if (c->transport->direct_slots) {
    /* `ready` is stored before `tail`, so tail cannot tell more; polling it too would pull a second line across. */
    return atomic_load_explicit(&slot->ready, memory_order_acquire) == head + 1 ? slot : NULL;
  }
  if (c->cached_peer_counter <= head) {
    c->cached_peer_counter = atomic_load_explicit(&f->tail, memory_order_acquire);
    if (c->cached_peer_counter <= head) return NULL;
  }
  return slot;
}
/* A received slot's payload: the header's copy for a small one (already in the line just read). */
static inline const void *dccl_slot_payload(const struct dccl_slot_header *slot) {
  return slot->bytes <= DCCL_SLOT_INLINE_BYTES ? (const void *)slot->inline_data : (const void *)(slot + 1);
}
/* Hands the slot returned by dccl_conn_recv_slot back to the producer. */
static inline void dccl_conn_recv_done(struct dccl_conn *c) {
  uint64_t head = atomic_load_explicit(&c->fifo->head, memory_order_relaxed);
  atomic_store_explicit(&c->fifo->head, head + 1, memory_order_release);
}

#endif
