/* The schedules: which chunk goes to which peer at which step, for every algorithm. Pure functions of small
 * integers, compiled both as host C and as CUDA device code, so the host executor and the kernels run the same
 * schedule and the unit tests check it on the CPU.
 *
 * A schedule is a sequence of primitive steps on one channel. A step names the connections it receives from and
 * sends to (indices into the channel's recv[] / send[] connection lists), whether it reads the user's input
 * and writes the user's output, and the element range. Its meaning, for the executor:
 *     acc = pre(input[in_off..]) (op) recv_0 (op) recv_1      (each term present only if its flag is set)
 *     if POST: acc = post(acc)                                  (integer average: the one final division)
 *     output[out_off..] = acc                  if OUTPUT
 *     send acc to every send connection flagged
 * which covers NCCL's primitives: send, recv, recvReduceSend, recvReduceCopySend, recvCopySend, copySend, ...
 *
 * A channel runs up to two streams of steps (the tree runs "up" and "down" at once, so that neither can block the
 * other); a step of stream 1 may require stream 0 to have passed a given step (DCCL_SCHED_WAIT_UP). */
#ifndef DCCL_SCHEDULE_H_
#define DCCL_SCHEDULE_H_

#include <stdint.h>

#ifdef __CUDACC__
#define DCCL_SCHED_FN __host__ __device__ static inline
#else
#define DCCL_SCHED_FN static inline
#endif

/* Step flags (plain unsigned constants, so C++/CUDA mixes them with 0u without warnings). */
#define DCCL_PRIM_RECV0 (1u << 0)
#define DCCL_PRIM_RECV1 (1u << 1)
#define DCCL_PRIM_SEND0 (1u << 2)
#define DCCL_PRIM_SEND1 (1u << 3)
#define DCCL_PRIM_INPUT (1u << 4)
#define DCCL_PRIM_OUTPUT (1u << 5)
#define DCCL_PRIM_POST (1u << 6)
/* The "input" of this step is the output buffer at in_off (tree root sending down what it just reduced). */
#define DCCL_PRIM_INPUT_FROM_OUTPUT (1u << 7)
/* One-shot: send to / receive from every peer connection (indices 0..npeers-1), and reduce all ranks' data in
 * rank order, so every rank computes the same bits without a second pass. */
#define DCCL_PRIM_SEND_ALL (1u << 10)
#define DCCL_PRIM_RECV_ALL (1u << 11)
#define DCCL_PRIM_RANK_ORDER (1u << 12)
/* Send to / receive from the one connection `peer` names (the ordered schedules, whose peers are every other
 * rank in rank order, each getting other data). */
#define DCCL_PRIM_SEND_PEER (1u << 13)
#define DCCL_PRIM_RECV_PEER (1u << 14)

struct dccl_prim_step {
  uint32_t flags;
  uint64_t in_off, out_off, nelem; /* elements */
  int64_t wait_up;                 /* stream 1 only: stream 0 must have completed more than this many steps */
  int peer;                        /* DCCL_PRIM_SEND_PEER / RECV_PEER: the connection index */
};

enum dccl_sched_algo {
  DCCL_SCHED_RING_ALLREDUCE,
  DCCL_SCHED_RING_ALLGATHER,
  DCCL_SCHED_RING_REDUCESCATTER,
  DCCL_SCHED_CHAIN_BROADCAST,
  DCCL_SCHED_CHAIN_REDUCE,
  DCCL_SCHED_TREE_ALLREDUCE,
  DCCL_SCHED_TREE_BROADCAST,
  DCCL_SCHED_TREE_REDUCE,
  DCCL_SCHED_P2P_SEND,
  DCCL_SCHED_P2P_RECV,
  DCCL_SCHED_LOCAL_COPY, /* one rank: input -> output with pre/post */
  DCCL_SCHED_ONESHOT_ALLREDUCE,
  /* Deterministic mode: every element reduced by one rank from every rank's value, in rank order. */
  DCCL_SCHED_ORDERED_ALLREDUCE,     /* two-shot: slice r gathered and reduced at rank r, then sent to all */
  DCCL_SCHED_ORDERED_REDUCE,        /* every input gathered and reduced at the root */
  DCCL_SCHED_ORDERED_REDUCESCATTER, /* block r gathered and reduced at rank r */
  /* Kernels only, ranks reading each other's buffers: e.g. the all-reduce's rank r reduces slice r of every input
   * in place and writes it into every output (collectives/device/kernels.cu, dev_direct). */
  DCCL_SCHED_DIRECT,
};

/* Everything a schedule needs, for one rank on one channel. Ring schedules: connection 0 receives from the ring's
 * previous rank and sends to the next. Chain schedules run on the ring rotated so the root is at position 0. Tree
 * schedules: recv[0..1]/send[0..1] are the children in the up direction, connection index 2 is the parent: see
 * the DCCL_TREE_* helpers below. */
struct dccl_sched {
  int algo;
  int nranks;
  int pos;              /* ring: this rank's position; chain: position relative to the root (root = 0) */
  const int *ring_rank; /* ring: rank at each position (for block offsets of allgather / reduce-scatter) */
  uint64_t begin;       /* this channel's first element (of the per-rank block for allgather / reduce-scatter) */
  uint64_t count;       /* this channel's elements */
  uint64_t block;       /* allgather / reduce-scatter: elements per rank block (the user's count) */
  uint64_t chunk;       /* elements per slot */
  int direct_channels;  /* direct: the operation's channels, whose CTAs walk this rank's part together */
  int is_root, nchildren, has_parent; /* tree */
  int npeers;                         /* one-shot: connections to every other rank, in rank order */
  int rank, root;                     /* ordered: this rank, and the reduce's root */
};

DCCL_SCHED_FN uint64_t dccl_div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
DCCL_SCHED_FN int dccl_mod(int64_t a, int n) { return (int)(((a % n) + n) % n); }

/* Direct: rank `me`'s slice [*lo, *hi) of `len` elements, whole 16-byte packs so every rank's pointers stay
 * aligned. */
DCCL_SCHED_FN void dccl_direct_slice(uint64_t len, int n, int me, uint32_t esize, uint64_t *lo, uint64_t *hi) {
  uint64_t unit = 16 / esize, per = dccl_div_up(dccl_div_up(len, (uint64_t)n), unit) * unit;
  *lo = (uint64_t)me * per < len ? (uint64_t)me * per : len;
  *hi = *lo + per < len ? *lo + per : len;
}

/* Direct: rank `me`'s part [*lo, *hi) of the operation's `count` elements (every channel's sched holds the whole
 * operation, from begin 0): its slice, or for the block operations (reduce-scatter, all-gather: `count` is the
 * block's) the whole of its block. The operation's channels walk it together, thread t of channel c taking the
 * 16-byte packs c T + t, (C + c) T + t, ... (T threads a CTA, C channels), so at any moment a rank's CTAs are in
 * the same few pages of each buffer (dev_direct). */
DCCL_SCHED_FN void dccl_direct_part(const struct dccl_sched *s, int me, uint32_t esize, int block_op, uint64_t *lo,
                                    uint64_t *hi) {
  if (block_op) {
    *lo = 0;
    *hi = s->count;
  } else {
    dccl_direct_slice(s->count, s->nranks, me, esize, lo, hi);
  }
}

/* Ring all-reduce: per loop of nranks*chunk elements, reduce-scatter (nranks-1 steps) then all-gather
 * (nranks-1 steps) over nranks segments; 2*nranks-1 steps per loop. Rank at position p owns segment p. */
DCCL_SCHED_FN uint64_t dccl_ring_allreduce_nsteps(const struct dccl_sched *s) {
  uint64_t loop = (uint64_t)s->nranks * s->chunk;
  return dccl_div_up(s->count, loop) * (uint64_t)(2 * s->nranks - 1);
}
DCCL_SCHED_FN void dccl_ring_allreduce_step(const struct dccl_sched *s, uint64_t idx, struct dccl_prim_step *out) {
  int n = s->nranks, p = s->pos;
  uint64_t per_loop = (uint64_t)(2 * n - 1);
  uint64_t l = idx / per_loop;
  int k = (int)(idx % per_loop);
  uint64_t base = l * (uint64_t)n * s->chunk;
  uint64_t size = s->count - base < (uint64_t)n * s->chunk ? s->count - base : (uint64_t)n * s->chunk;
  uint64_t seg_elems = dccl_div_up(size, (uint64_t)n);
  int seg;
  uint32_t flags;
  if (k == 0) {
    seg = dccl_mod(p - 1, n);
    flags = DCCL_PRIM_INPUT | DCCL_PRIM_SEND0;
  } else if (k < n - 1) {
    seg = dccl_mod(p - k - 1, n);
    flags = DCCL_PRIM_RECV0 | DCCL_PRIM_INPUT | DCCL_PRIM_SEND0;
  } else if (k == n - 1) {
    seg = p;
    flags = DCCL_PRIM_RECV0 | DCCL_PRIM_INPUT | DCCL_PRIM_POST | DCCL_PRIM_OUTPUT | DCCL_PRIM_SEND0;
  } else {
    seg = dccl_mod(p - 1 - (k - n), n);
    flags = DCCL_PRIM_RECV0 | DCCL_PRIM_OUTPUT | (k < 2 * n - 2 ? DCCL_PRIM_SEND0 : 0u);
  }
  uint64_t seg_off = (uint64_t)seg * seg_elems;
  uint64_t nelem = seg_off >= size ? 0 : (size - seg_off < seg_elems ? size - seg_off : seg_elems);
  out->flags = flags;
  out->in_off = out->out_off = s->begin + base + seg_off;
  out->nelem = nelem;
  out->wait_up = -1;
}

/* Chunks of this channel's range: step i covers [begin + i*chunk, ...). */
DCCL_SCHED_FN uint64_t dccl_chunk_elems(const struct dccl_sched *s, uint64_t i) {
  uint64_t off = i * s->chunk;
  return s->count - off < s->chunk ? s->count - off : s->chunk;
}

/* Ring all-gather: rank r's block goes to output block r. Per chunk, nranks steps: copy own block to the output
 * and send it, then receive each other rank's block (forwarding all but the last). */
DCCL_SCHED_FN uint64_t dccl_ring_allgather_nsteps(const struct dccl_sched *s) {
  return dccl_div_up(s->count, s->chunk) * (uint64_t)s->nranks;
}
DCCL_SCHED_FN void dccl_ring_allgather_step(const struct dccl_sched *s, uint64_t idx, struct dccl_prim_step *out) {
  int n = s->nranks, p = s->pos;
  uint64_t c = idx / (uint64_t)n;
  int k = (int)(idx % (uint64_t)n);
  uint64_t off = s->begin + c * s->chunk;
  int owner = s->ring_rank[dccl_mod(p - k, n)];
  out->nelem = dccl_chunk_elems(s, c);
  out->in_off = off;
  out->out_off = (uint64_t)owner * s->block + off;
  out->wait_up = -1;
  if (k == 0)
    out->flags = DCCL_PRIM_INPUT | DCCL_PRIM_OUTPUT | (n > 1 ? DCCL_PRIM_SEND0 : 0u);
  else
    out->flags = DCCL_PRIM_RECV0 | DCCL_PRIM_OUTPUT | (k < n - 1 ? DCCL_PRIM_SEND0 : 0u);
}

/* Ring reduce-scatter: rank r ends with block r reduced. Per chunk, nranks steps: at step k the rank at position
 * p sends the partial sum of block ring[p-k-1]; at the last step it receives its own block. */
DCCL_SCHED_FN uint64_t dccl_ring_reducescatter_nsteps(const struct dccl_sched *s) {
  return dccl_div_up(s->count, s->chunk) * (uint64_t)s->nranks;
}
DCCL_SCHED_FN void dccl_ring_reducescatter_step(const struct dccl_sched *s, uint64_t idx,
                                                struct dccl_prim_step *out) {
  int n = s->nranks, p = s->pos;
  uint64_t c = idx / (uint64_t)n;
  int k = (int)(idx % (uint64_t)n);
  uint64_t off = s->begin + c * s->chunk;
  int block = s->ring_rank[dccl_mod(p - k - 1, n)];
  out->nelem = dccl_chunk_elems(s, c);
  out->in_off = (uint64_t)block * s->block + off;
  out->out_off = off;
  out->wait_up = -1;
  if (n == 1)
    out->flags = DCCL_PRIM_INPUT | DCCL_PRIM_POST | DCCL_PRIM_OUTPUT;
  else if (k == 0)
    out->flags = DCCL_PRIM_INPUT | DCCL_PRIM_SEND0;
  else if (k < n - 1)
    out->flags = DCCL_PRIM_RECV0 | DCCL_PRIM_INPUT | DCCL_PRIM_SEND0;
  else
    out->flags = DCCL_PRIM_RECV0 | DCCL_PRIM_INPUT | DCCL_PRIM_POST | DCCL_PRIM_OUTPUT;
}

/* Pipelined chain broadcast from position 0 along the ring: one step per chunk. */
DCCL_SCHED_FN uint64_t dccl_chain_nsteps(const struct dccl_sched *s) { return dccl_div_up(s->count, s->chunk); }
DCCL_SCHED_FN void dccl_chain_broadcast_step(const struct dccl_sched *s, uint64_t idx, struct dccl_prim_step *out) {
  int n = s->nranks, q = s->pos;
  out->nelem = dccl_chunk_elems(s, idx);
  out->in_off = out->out_off = s->begin + idx * s->chunk;
  out->wait_up = -1;
  if (q == 0)
    out->flags = DCCL_PRIM_INPUT | DCCL_PRIM_OUTPUT | (n > 1 ? DCCL_PRIM_SEND0 : 0u);
  else
    out->flags = DCCL_PRIM_RECV0 | DCCL_PRIM_OUTPUT | (q < n - 1 ? DCCL_PRIM_SEND0 : 0u);
}
/* Pipelined chain reduce ending at position 0: it starts at position 1 and runs around the ring to the root. */
DCCL_SCHED_FN void dccl_chain_reduce_step(const struct dccl_sched *s, uint64_t idx, struct dccl_prim_step *out) {
  int n = s->nranks, q = s->pos;
  out->nelem = dccl_chunk_elems(s, idx);
  out->in_off = out->out_off = s->begin + idx * s->chunk;
  out->wait_up = -1;
  if (n == 1)
    out->flags = DCCL_PRIM_INPUT | DCCL_PRIM_POST | DCCL_PRIM_OUTPUT;
  else if (q == 0)
    out->flags = DCCL_PRIM_RECV0 | DCCL_PRIM_INPUT | DCCL_PRIM_POST | DCCL_PRIM_OUTPUT;
  else if (q == 1)
    out->flags = DCCL_PRIM_INPUT | DCCL_PRIM_SEND0;
  else
    out->flags = DCCL_PRIM_RECV0 | DCCL_PRIM_INPUT | DCCL_PRIM_SEND0;
}

/* Trees. Connection indices: children are recv 0/1 (up) and send 0/1 (down); the parent is DCCL_TREE_PARENT in
 * both lists. A binary heap over positions: node i has children 2i+1, 2i+2. */
#define DCCL_TREE_PARENT 2
DCCL_SCHED_FN int dccl_tree_parent_pos(int i) { return i == 0 ? -1 : (i - 1) / 2; }
DCCL_SCHED_FN int dccl_tree_child_pos(int i, int c, int n) { return 2 * i + 1 + c < n ? 2 * i + 1 + c : -1; }
DCCL_SCHED_FN int dccl_tree_depth(int n) {
  int d = 0;
  while ((1 << (d + 1)) - 1 < n) d++;
  return d;
}
DCCL_SCHED_FN uint32_t dccl_tree_recv_children(const struct dccl_sched *s) {
  return (s->nchildren > 0 ? DCCL_PRIM_RECV0 : 0u) | (s->nchildren > 1 ? DCCL_PRIM_RECV1 : 0u);
}
DCCL_SCHED_FN uint32_t dccl_tree_send_children(const struct dccl_sched *s) {
  return (s->nchildren > 0 ? DCCL_PRIM_SEND0 : 0u) | (s->nchildren > 1 ? DCCL_PRIM_SEND1 : 0u);
}
/* The parent link is flagged with these bits (index DCCL_TREE_PARENT in the connection lists). */
#define DCCL_PRIM_RECV_PARENT (1u << 8)
#define DCCL_PRIM_SEND_PARENT (1u << 9)

/* Tree reduce (stream 0, "up"): children's partial sums plus own input go to the parent; the root writes the
 * result. Tree broadcast (stream 1 for all-reduce, stream 0 alone for broadcast, "down"): the parent's data is
 * written to the output and forwarded to the children. All-reduce runs both; the root's down step c sends what its
 * up step c wrote, so it waits for the up stream. */
DCCL_SCHED_FN void dccl_tree_up_step(const struct dccl_sched *s, uint64_t idx, struct dccl_prim_step *out) {
  out->nelem = dccl_chunk_elems(s, idx);
  out->in_off = out->out_off = s->begin + idx * s->chunk;
  out->wait_up = -1;
  out->flags = DCCL_PRIM_INPUT | dccl_tree_recv_children(s) |
               (s->has_parent ? DCCL_PRIM_SEND_PARENT : (DCCL_PRIM_POST | DCCL_PRIM_OUTPUT));
}
DCCL_SCHED_FN void dccl_tree_down_step(const struct dccl_sched *s, uint64_t idx, int after_up,
                                       struct dccl_prim_step *out) {
  out->nelem = dccl_chunk_elems(s, idx);
  out->in_off = out->out_off = s->begin + idx * s->chunk;
  out->wait_up = -1;
  if (s->has_parent) {
    out->flags = DCCL_PRIM_RECV_PARENT | DCCL_PRIM_OUTPUT | dccl_tree_send_children(s);
  } else if (after_up) { /* all-reduce root: forward what the up stream wrote to the output */
    out->flags = DCCL_PRIM_INPUT | DCCL_PRIM_INPUT_FROM_OUTPUT | dccl_tree_send_children(s);
    out->wait_up = (int64_t)idx;
  } else { /* broadcast root */
    out->flags = DCCL_PRIM_INPUT | DCCL_PRIM_OUTPUT | dccl_tree_send_children(s);
  }
}

/* One-shot all-reduce, for small sizes: per chunk, send the own input to every other rank, then reduce every
 * rank's data in rank order. One hand-off on the critical path instead of the ring's 2(N-1). */
DCCL_SCHED_FN void dccl_oneshot_step(const struct dccl_sched *s, uint64_t idx, struct dccl_prim_step *out) {
  uint64_t c = idx / 2;
  out->nelem = dccl_chunk_elems(s, c);
  out->in_off = out->out_off = s->begin + c * s->chunk;
  out->wait_up = -1;
  out->flags = idx % 2 == 0 ? (DCCL_PRIM_INPUT | DCCL_PRIM_SEND_ALL)
                            : (DCCL_PRIM_RECV_ALL | DCCL_PRIM_INPUT | DCCL_PRIM_RANK_ORDER | DCCL_PRIM_POST |
                               DCCL_PRIM_OUTPUT);
}

/* The ordered schedules. Connection k is the k-th other rank in rank order. */
DCCL_SCHED_FN int dccl_ordered_conn(const struct dccl_sched *s, int rank) { return rank < s->rank ? rank : rank - 1; }
DCCL_SCHED_FN int dccl_ordered_rank(const struct dccl_sched *s, int k) { return k < s->rank ? k : k + 1; }
/* The gathering step: every rank's share (received, and the own input at its place) reduced in rank order. */
#define DCCL_ORDERED_REDUCE_FLAGS (DCCL_PRIM_RECV_ALL | DCCL_PRIM_INPUT | DCCL_PRIM_RANK_ORDER | DCCL_PRIM_POST)

/* Reduce: per chunk one step: the root gathers and reduces, every other rank sends its input to the root. */
DCCL_SCHED_FN void dccl_ordered_reduce_step(const struct dccl_sched *s, uint64_t idx, struct dccl_prim_step *out) {
  out->nelem = dccl_chunk_elems(s, idx);
  out->in_off = out->out_off = s->begin + idx * s->chunk;
  out->wait_up = -1;
  out->peer = s->rank == s->root ? -1 : dccl_ordered_conn(s, s->root);
  out->flags = s->rank == s->root ? (DCCL_ORDERED_REDUCE_FLAGS | DCCL_PRIM_OUTPUT)
                                  : (DCCL_PRIM_INPUT | DCCL_PRIM_SEND_PEER);
}

/* Reduce-scatter: per chunk, nranks - 1 steps sending the chunk of each other rank's block to it, then one
 * gathering its own block's chunk. */
DCCL_SCHED_FN uint64_t dccl_ordered_reducescatter_nsteps(const struct dccl_sched *s) {
  return dccl_div_up(s->count, s->chunk) * (uint64_t)s->nranks;
}
DCCL_SCHED_FN void dccl_ordered_reducescatter_step(const struct dccl_sched *s, uint64_t idx,
                                                   struct dccl_prim_step *out) {
  int n = s->nranks, k = (int)(idx % (uint64_t)n);
  uint64_t c = idx / (uint64_t)n, off = s->begin + c * s->chunk;
  out->nelem = dccl_chunk_elems(s, c);
  out->out_off = off;
  out->wait_up = -1;
  if (k < n - 1) {
    out->peer = k;
    out->in_off = (uint64_t)dccl_ordered_rank(s, k) * s->block + off;
    out->flags = DCCL_PRIM_INPUT | DCCL_PRIM_SEND_PEER;
  } else {
    out->peer = -1;
    out->in_off = (uint64_t)s->rank * s->block + off;
    out->flags = DCCL_ORDERED_REDUCE_FLAGS | DCCL_PRIM_OUTPUT;
  }
}

/* All-reduce, two-shot: per loop of nranks * chunk elements cut in nranks slices (slice r is rank r's), 2 * nranks
 * steps: send each other rank its slice (nranks - 1), gather and reduce the own slice into the output, send the
 * result to every other rank, receive each other rank's result into the output (nranks - 1). */
DCCL_SCHED_FN uint64_t dccl_ordered_allreduce_nsteps(const struct dccl_sched *s) {
  return dccl_div_up(s->count, (uint64_t)s->nranks * s->chunk) * (uint64_t)(2 * s->nranks);
}
DCCL_SCHED_FN void dccl_ordered_allreduce_step(const struct dccl_sched *s, uint64_t idx, struct dccl_prim_step *out) {
  int n = s->nranks, k = (int)(idx % (uint64_t)(2 * n));
  uint64_t loop = (uint64_t)n * s->chunk, base = idx / (uint64_t)(2 * n) * loop;
  uint64_t size = s->count - base < loop ? s->count - base : loop, seg = dccl_div_up(size, (uint64_t)n);
  int slice = k < n - 1 ? dccl_ordered_rank(s, k) : k < n + 1 ? s->rank : dccl_ordered_rank(s, k - n - 1);
  uint64_t seg_off = (uint64_t)slice * seg;
  out->nelem = seg_off >= size ? 0 : (size - seg_off < seg ? size - seg_off : seg);
  out->in_off = out->out_off = s->begin + base + seg_off;
  out->wait_up = -1;
  out->peer = -1;
  if (k < n - 1) {
    out->peer = k;
    out->flags = DCCL_PRIM_INPUT | DCCL_PRIM_SEND_PEER;
  } else if (k == n - 1) {
    out->flags = DCCL_ORDERED_REDUCE_FLAGS | DCCL_PRIM_OUTPUT;
  } else if (k == n) {
    out->flags = DCCL_PRIM_INPUT | DCCL_PRIM_INPUT_FROM_OUTPUT | DCCL_PRIM_SEND_ALL;
  } else {
    out->peer = k - n - 1;
    out->flags = DCCL_PRIM_RECV_PEER | DCCL_PRIM_OUTPUT;
  }
}

/* Point to point: one step per chunk. */
DCCL_SCHED_FN void dccl_p2p_step(const struct dccl_sched *s, uint64_t idx, struct dccl_prim_step *out) {
  out->nelem = dccl_chunk_elems(s, idx);
  out->in_off = out->out_off = s->begin + idx * s->chunk;
  out->wait_up = -1;
  out->flags = s->algo == DCCL_SCHED_P2P_SEND ? (DCCL_PRIM_INPUT | DCCL_PRIM_SEND0)
                                              : (DCCL_PRIM_RECV0 | DCCL_PRIM_OUTPUT);
}

/* Steps in a stream (stream 1 exists only for tree all-reduce). An empty range has no steps: nothing moves. */
DCCL_SCHED_FN uint64_t dccl_sched_nsteps(const struct dccl_sched *s, int stream) {
  switch (s->algo) {
    case DCCL_SCHED_RING_ALLREDUCE: return stream == 0 ? dccl_ring_allreduce_nsteps(s) : 0;
    case DCCL_SCHED_RING_ALLGATHER: return stream == 0 ? dccl_ring_allgather_nsteps(s) : 0;
    case DCCL_SCHED_RING_REDUCESCATTER: return stream == 0 ? dccl_ring_reducescatter_nsteps(s) : 0;
    case DCCL_SCHED_TREE_ALLREDUCE: return dccl_chain_nsteps(s);
    case DCCL_SCHED_LOCAL_COPY: return stream == 0 ? dccl_chain_nsteps(s) : 0;
    case DCCL_SCHED_ONESHOT_ALLREDUCE: return stream == 0 ? 2 * dccl_chain_nsteps(s) : 0;
    case DCCL_SCHED_ORDERED_ALLREDUCE: return stream == 0 ? dccl_ordered_allreduce_nsteps(s) : 0;
    case DCCL_SCHED_ORDERED_REDUCESCATTER: return stream == 0 ? dccl_ordered_reducescatter_nsteps(s) : 0;
    case DCCL_SCHED_DIRECT: return stream == 0; /* one pass, no slots */
    default: return stream == 0 ? dccl_chain_nsteps(s) : 0;
  }
}
DCCL_SCHED_FN void dccl_sched_step(const struct dccl_sched *s, int stream, uint64_t idx, struct dccl_prim_step *out) {
  switch (s->algo) {
    case DCCL_SCHED_RING_ALLREDUCE: dccl_ring_allreduce_step(s, idx, out); break;
    case DCCL_SCHED_RING_ALLGATHER: dccl_ring_allgather_step(s, idx, out); break;
    case DCCL_SCHED_RING_REDUCESCATTER: dccl_ring_reducescatter_step(s, idx, out); break;
    case DCCL_SCHED_CHAIN_BROADCAST: dccl_chain_broadcast_step(s, idx, out); break;
    case DCCL_SCHED_CHAIN_REDUCE: dccl_chain_reduce_step(s, idx, out); break;
    case DCCL_SCHED_TREE_ALLREDUCE:
      if (stream == 0)
        dccl_tree_up_step(s, idx, out);
      else
        dccl_tree_down_step(s, idx, 1, out);
      break;
    case DCCL_SCHED_TREE_BROADCAST: dccl_tree_down_step(s, idx, 0, out); break;
    case DCCL_SCHED_TREE_REDUCE: dccl_tree_up_step(s, idx, out); break;
    case DCCL_SCHED_P2P_SEND:
    case DCCL_SCHED_P2P_RECV: dccl_p2p_step(s, idx, out); break;
    case DCCL_SCHED_ONESHOT_ALLREDUCE: dccl_oneshot_step(s, idx, out); break;
    case DCCL_SCHED_ORDERED_ALLREDUCE: dccl_ordered_allreduce_step(s, idx, out); break;
    case DCCL_SCHED_ORDERED_REDUCE: dccl_ordered_reduce_step(s, idx, out); break;
    case DCCL_SCHED_ORDERED_REDUCESCATTER: dccl_ordered_reducescatter_step(s, idx, out); break;
    default: /* local copy */
      out->nelem = dccl_chunk_elems(s, idx);
      out->in_off = out->out_off = s->begin + idx * s->chunk;
      out->wait_up = -1;
      out->flags = DCCL_PRIM_INPUT | DCCL_PRIM_POST | DCCL_PRIM_OUTPUT;
  }
}

#endif
