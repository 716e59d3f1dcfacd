/* Planning: from a call's arguments to per-channel schedules and the peers each channel talks to. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "collectives/device/dev_work.h"
#include "collectives/op.h"
#include "util/error.h"
#include "util/params.h"

const char *dccl_op_name(int kind) {
  switch (kind) {
    case DCCL_OP_ALLREDUCE: return "ncclAllReduce";
    case DCCL_OP_BROADCAST: return "ncclBroadcast";
    case DCCL_OP_REDUCE: return "ncclReduce";
    case DCCL_OP_ALLGATHER: return "ncclAllGather";
    case DCCL_OP_REDUCESCATTER: return "ncclReduceScatter";
    case DCCL_OP_SEND: return "ncclSend";
    case DCCL_OP_RECV: return "ncclRecv";
    default: return "unknown operation";
  }
}

const char *dccl_algo_name(int algo) {
  return algo == DCCL_ALGO_TREE      ? "tree"
         : algo == DCCL_ALGO_ONESHOT ? "oneshot"
         : algo == DCCL_ALGO_ORDERED ? "ordered"
         : algo == DCCL_ALGO_DIRECT  ? "direct"
         : algo == DCCL_ALGO_CE      ? "ce"
                                     : "ring";
}

static void channel_clear(struct dccl_op_channel *ch, int lane) {
  memset(ch, 0, sizeof(*ch));
  for (int i = 0; i < DCCL_CONN_SLOTS; i++) ch->recv_peer[i] = ch->send_peer[i] = -1;
  ch->lane = lane;
}

/* Splits [0, count) into nch nearly equal ranges, each a multiple of 64 elements but the last. */
static void channel_range(uint64_t count, int nch, int c, uint64_t *begin, uint64_t *n) {
  uint64_t per = dccl_div_up(dccl_div_up(count, (uint64_t)nch), 64) * 64;
  uint64_t b = per * (uint64_t)c;
  *begin = b < count ? b : count;
  *n = count - *begin < per ? count - *begin : per;
}

static int ring_pos_of(const struct dccl_ring *ring, int nranks, int rank) {
  for (int i = 0; i < nranks; i++)
    if (ring->order[i] == rank) return i;
  return -1;
}

/* A tree over the ring read from position `start` in direction `dir` (so the root, at `start`, is first), in two
 * levels: the ranks of each host form a binary heap (the host's first rank its head, the last one in heap order, a
 * leaf, its tail), and the hosts form a binary heap in which a host's head hangs under its parent host's tail. Every
 * rank has at most two children, and each tree edge between hosts is crossed once: H - 1 of them for H hosts (a
 * heap over all ranks crosses hosts at most of its edges). One host: the plain heap over its ranks. Fills this
 * rank's tree links. */
static void tree_links(const struct dccl_coll_comm *comm, int start, int dir, struct dccl_op_channel *ch) {
  const int *order = comm->rings[0].order;
  int n = comm->nranks;
  /* seq and block_of hold n entries, first n + 1 */
  int *seq = malloc(((size_t)n * 3 + 1) * sizeof(int)), *block_of = seq + n, *first = seq + 2 * n;
  if (!seq) return; /* out of memory: no links; the op fails binding */
  for (int i = 0; i < n; i++) seq[i] = order[dccl_mod((int64_t)start + (int64_t)dir * i, n)];
  /* Blocks: runs of one host along seq (the ring keeps hosts together; the root's host may wrap around the end, and
   * its tail run joins its first block). seq is reordered so every block is contiguous; first[b] is block b's start. */
#define HOST_OF(r) (comm->peers ? comm->peers[r].host_hash : 0)
  int tail_run = n; /* seq[tail_run..n) is the root's host again, wrapped around */
  while (tail_run > 1 && HOST_OF(seq[tail_run - 1]) == HOST_OF(seq[0])) tail_run--;
  if (tail_run > 1 && tail_run < n) { /* move the wrapped run to just after the root's run */
    int head_run = 1;
    while (head_run < tail_run && HOST_OF(seq[head_run]) == HOST_OF(seq[0])) head_run++;
    int *tmp = block_of, k = 0; /* free until the blocks are counted below; no allocation that could fail on one
                                 * rank only and give it another tree than the others */
    for (int i = 0; i < head_run; i++) tmp[k++] = seq[i];
    for (int i = tail_run; i < n; i++) tmp[k++] = seq[i];
    for (int i = head_run; i < tail_run; i++) tmp[k++] = seq[i];
    memcpy(seq, tmp, (size_t)n * sizeof(int));
  }
  int nblocks = 0;
  for (int i = 0; i < n; i++) {
    if (i == 0 || HOST_OF(seq[i]) != HOST_OF(seq[i - 1])) first[nblocks++] = i;
    block_of[i] = nblocks - 1;
  }
#undef HOST_OF
  first[nblocks] = n;
  int me = 0;
  for (int i = 0; i < n; i++)
    if (seq[i] == comm->rank) me = i;
  int b = block_of[me], j = me - first[b], size = first[b + 1] - first[b];
  int parent = -1, kids[2] = {-1, -1}, nkids = 0;
  if (j > 0) parent = seq[first[b] + (j - 1) / 2];
  else if (b > 0) parent = seq[first[(b - 1) / 2 + 1] - 1]; /* the parent host's tail */
  for (int c = 0; c < 2; c++)
    if (2 * j + 1 + c < size) kids[nkids++] = seq[first[b] + 2 * j + 1 + c];
  if (j == size - 1) /* the tail: the child hosts' heads */
    for (int c = 0; c < 2; c++)
      if (2 * b + 1 + c < nblocks) kids[nkids++] = seq[first[2 * b + 1 + c]];
  free(seq);
  ch->sched.has_parent = parent >= 0;
  ch->sched.is_root = parent < 0;
  ch->sched.nchildren = nkids;
  int up[DCCL_CONN_SLOTS];
  for (int i = 0; i < DCCL_CONN_SLOTS; i++) up[i] = -1;
  for (int c = 0; c < nkids; c++) up[c] = kids[c];
  if (parent >= 0) up[DCCL_TREE_PARENT] = parent;
  /* Children are links in both directions (up: recv from them; down: send to them); so is the parent. */
  for (int i = 0; i < DCCL_CONN_SLOTS; i++) ch->recv_peer[i] = ch->send_peer[i] = up[i];
}

#define DCCL_DOUBLE_TREE 2 /* the all-reduce's two trees, a channel each, whatever nchannels is */

int dccl_op_max_channels(const struct dccl_coll_comm *comm) {
  int n = comm->nchannels > DCCL_DOUBLE_TREE ? comm->nchannels : DCCL_DOUBLE_TREE;
  if (comm->dev && comm->dev_nchannels > n) n = comm->dev_nchannels;
  int p2p = comm->dev ? dccl_p2p_nchannels(comm, 1, UINT64_MAX) : 0; /* send/recv */
  return p2p > n ? p2p : n;
}

static void plan_tree(struct dccl_op *op, int ntrees, int rooted) {
  struct dccl_coll_comm *comm = op->comm;
  op->nchannels = ntrees;
  for (int t = 0; t < ntrees; t++) {
    struct dccl_op_channel *ch = &op->ch[t];
    channel_clear(ch, t);
    channel_range(op->count, ntrees, t, &ch->sched.begin, &ch->sched.count);
    if (rooted)
      tree_links(comm, ring_pos_of(&comm->rings[0], comm->nranks, op->root), 1, ch);
    else if (t == 0)
      tree_links(comm, 0, 1, ch);
    else /* the second tree mirrors the first: its leaves are the first tree's inner nodes */
      tree_links(comm, comm->nranks - 1, -1, ch);
    /* Only the directions the schedule uses are connected. */
    for (int i = 0; i < DCCL_CONN_SLOTS; i++) {
      int is_parent = i == DCCL_TREE_PARENT;
      if (op->kind == DCCL_OP_BROADCAST) {
        if (is_parent) ch->send_peer[i] = -1; else ch->recv_peer[i] = -1;
      } else if (op->kind == DCCL_OP_REDUCE) {
        if (is_parent) ch->recv_peer[i] = -1; else ch->send_peer[i] = -1;
      }
    }
  }
}

/* One channel on lane 0, connected to every other rank in rank order. */
static void plan_oneshot(struct dccl_op *op) {
  struct dccl_op_channel *ch = &op->ch[0];
  channel_clear(ch, 0);
  ch->sched.count = op->count;
  for (int r = 0, i = 0; r < op->comm->nranks; r++) {
    if (r == op->comm->rank) continue;
    ch->recv_peer[i] = ch->send_peer[i] = r;
    i++;
  }
  ch->sched.npeers = op->comm->nranks - 1;
  op->nchannels = 1;
}

#define DCCL_DEV_NARROW_CHANNELS 32
#define DCCL_DEV_WIDE_BYTES ((uint64_t)256 << 20)
#define DCCL_DEV_CHANNEL_BYTES ((uint64_t)128 << 10)

/* Device rings: a CTA per channel pays only with enough bytes to move. 2 ranks under MPS on the H200: 64 channels
 * against 32 took 774 us against ~1000 at 256 MiB, but 155 against ~125 at 16 MiB; from 128 KiB to 8 MiB one
 * channel per 128 KiB was within 10% of the best of 1-32 (32 at 128 KiB took 68 us against 40 for one). */
static int device_ring_channels(int nch, uint64_t bytes) {
  if (nch > DCCL_DEV_NARROW_CHANNELS && bytes < DCCL_DEV_WIDE_BYTES) nch = DCCL_DEV_NARROW_CHANNELS;
  uint64_t enough = bytes / DCCL_DEV_CHANNEL_BYTES;
  if (enough < (uint64_t)nch) nch = enough > 0 ? (int)enough : 1;
  return nch;
}

/* Deterministic mode's ordered schedules on device links: each channel links every pair of ranks where a ring
 * channel links two neighbours, so beyond 2 ranks (where the two are the same links) they take at most
 * DCCL_DEV_ORDERED_CHANNELS, and their FIFOs leave GPU memory to the rings. Ranks of one process reduce by the direct
 * collectives, and what those cannot take (a premultiply that differs by rank) keeps to the one-shot's links of
 * channel 0, which creation makes. */
#define DCCL_DEV_ORDERED_CHANNELS 8
static int ordered_channels(const struct dccl_coll_comm *comm) {
  if (comm->direct_ok == DCCL_DIRECT_ONE_PROCESS) return 1;
  if (comm->nranks == 2 || comm->dev_nchannels < DCCL_DEV_ORDERED_CHANNELS) return comm->dev_nchannels;
  return DCCL_DEV_ORDERED_CHANNELS;
}

static void plan_ring(struct dccl_op *op, uint64_t range) {
  struct dccl_coll_comm *comm = op->comm;
  int nch = op->on_device ? device_ring_channels(comm->dev_nchannels, range * op->esize) : comm->nchannels;
  if ((uint64_t)nch * 4096 > range * op->esize) nch = 1; /* small: one channel */
  op->nchannels = nch;
  for (int c = 0; c < nch; c++) {
    struct dccl_op_channel *ch = &op->ch[c];
    const struct dccl_ring *ring = &comm->rings[c];
    channel_clear(ch, c);
    channel_range(range, nch, c, &ch->sched.begin, &ch->sched.count);
    ch->sched.pos = ring->pos;
    ch->sched.ring_rank = ring->order;
    ch->recv_peer[0] = ring->prev;
    ch->send_peer[0] = ring->next;
    if (op->kind == DCCL_OP_BROADCAST || op->kind == DCCL_OP_REDUCE)
      ch->sched.pos = dccl_mod((int64_t)ring->pos - ring_pos_of(ring, comm->nranks, op->root), comm->nranks);
  }
}

static ncclResult_t plan_lanes(struct dccl_op *op);

/* The direct all-reduce needs every rank's buffers where this rank's kernel reaches them (comm->direct_ok: in one
 * process, any buffer; across processes, buffers in windows) and a premultiply that is the same on every rank (an
 * average), since each rank applies it to every rank's input. Every rank answers alike from the call and the
 * communicator, provided each passes buffers in windows where one does: the rule NCCL's symmetric windows set. */
static int direct_possible(const struct dccl_op *op) {
  int reach = op->comm->direct_ok == DCCL_DIRECT_ONE_PROCESS ||
              (op->comm->direct_ok == DCCL_DIRECT_WINDOWS && dccl_op_in_windows(op));
  return op->kind != DCCL_OP_SEND && op->kind != DCCL_OP_RECV && reach && op->comm->nranks <= DCCL_CONN_SLOTS &&
         (!op->redop.has_pre || op->redop.called == ncclAvg);
}

/* Direct: every channel holds the whole operation (of each rank's block for all-gather and reduce-scatter); the
 * kernel gives each rank its part and the channels' CTAs walk it together (dccl_direct_part). No links: the ranks
 * meet on their boards. */
/* A direct CTA's time is set by the bytes it reads and writes: each SM moves ~50 GB/s (4 ranks' all-reduce on an
 * H100: ~5 us per 32 KiB of each of 4 sources, whatever the CTAs; docs/performance.md), so below the HBM's rate an
 * operation takes a CTA per DCCL_DEV_DIRECT_CTA_TRAFFIC of this rank's reads and writes (the all-reduce at 4 ranks:
 * a CTA per 8 KiB of slice; 4 ranks' all-gather and reduce-scatter at 1-4 MiB ran 0.66-0.81x the time of the rings'
 * CTA per 128 KiB, broadcast 0.93 at 256 KiB-1 MiB). */
#define DCCL_DEV_DIRECT_CTA_TRAFFIC ((uint64_t)64 << 10)

/* The bytes one rank's CTAs read and write (N ranks, S the call's bytes: the buffer, or for all-gather and
 * reduce-scatter each rank's block); design.md lists each collective's traffic. */
static uint64_t direct_traffic(const struct dccl_op *op) {
  uint64_t s = op->count * op->esize, n = (uint64_t)op->comm->nranks;
  switch (op->kind) {
    case DCCL_OP_ALLREDUCE: return 2 * s;         /* slice S/N of N inputs read, into N outputs */
    case DCCL_OP_ALLGATHER:                       /* its block read, written into N outputs */
    case DCCL_OP_REDUCESCATTER: return (n + 1) * s; /* block r of N inputs read, one written */
    default: return (n + 1) * s / n;              /* broadcast, reduce: slice S/N read once and written N times, or
                                                     read N times and written once */
  }
}

static int direct_channels(const struct dccl_op *op) {
  int nch = op->comm->dev_nchannels;
  if (nch > DCCL_DEV_NARROW_CHANNELS && op->count * op->esize < DCCL_DEV_WIDE_BYTES) nch = DCCL_DEV_NARROW_CHANNELS;
  uint64_t enough = direct_traffic(op) / DCCL_DEV_DIRECT_CTA_TRAFFIC;
  if (enough < (uint64_t)nch) nch = enough > 0 ? (int)enough : 1;
  return nch;
}

static void plan_direct(struct dccl_op *op) {
  int nch = direct_channels(op);
  if ((uint64_t)nch * 4096 > op->count * op->esize) nch = 1;
  for (int c = 0; c < nch; c++) {
    struct dccl_op_channel *ch = &op->ch[c];
    channel_clear(ch, c);
    ch->sched.begin = 0;
    ch->sched.count = op->count;
    ch->sched.direct_channels = nch;
    ch->sched.algo = DCCL_SCHED_DIRECT;
    ch->sched.rank = op->comm->rank;
    ch->sched.root = op->root;
  }
  op->nchannels = nch;
}

/* Deterministic mode (DCCL_DETERMINISTIC=1): a reduction gathers every rank's value of an element at one rank,
 * which reduces them in rank order with the one function every path shares (reduce_rank_order: narrow floats
 * summed in float and rounded once), so the bits depend on neither the algorithm asked for, nor the channels, the
 * chunk size, the transports or the ranks' placement. One-shot below DCCL_ORDERED_ONESHOT_BYTES, the ordered
 * schedules above (pure/schedule.h); both need a link to every other rank. Device buffers take the direct
 * collectives where every rank's buffers are in reach, else the same schedules in kernels over the device links. */
#define DCCL_ORDERED_ONESHOT_BYTES 65536
static ncclResult_t plan_ordered(struct dccl_op *op) {
  struct dccl_coll_comm *comm = op->comm;
  if (comm->nranks - 1 > DCCL_CONN_SLOTS)
    return dccl_error(ncclInvalidUsage, "%s: DCCL_DETERMINISTIC=1 supports at most %d ranks; this communicator has %d",
                      dccl_op_name(op->kind), DCCL_CONN_SLOTS + 1, comm->nranks);
  /* The direct collectives reduce every element in rank order with the host's function: the same bits. */
  if (op->on_device && direct_possible(op)) {
    op->algo = DCCL_ALGO_DIRECT;
    plan_direct(op);
    return ncclSuccess;
  }
  plan_oneshot(op);
  struct dccl_op_channel *ch = &op->ch[0];
  ch->sched.rank = comm->rank;
  ch->sched.root = op->root;
  if (op->kind == DCCL_OP_ALLREDUCE && op->count * op->esize <= DCCL_ORDERED_ONESHOT_BYTES) {
    op->algo = DCCL_ALGO_ONESHOT;
    ch->sched.algo = DCCL_SCHED_ONESHOT_ALLREDUCE;
    return ncclSuccess;
  }
  op->algo = DCCL_ALGO_ORDERED;
  ch->sched.algo = op->kind == DCCL_OP_ALLREDUCE ? DCCL_SCHED_ORDERED_ALLREDUCE
                   : op->kind == DCCL_OP_REDUCE  ? DCCL_SCHED_ORDERED_REDUCE
                                                 : DCCL_SCHED_ORDERED_REDUCESCATTER;
  if (op->kind == DCCL_OP_REDUCE) /* the root only receives; the others only send, to the root */
    for (int i = 0; i < DCCL_CONN_SLOTS; i++) {
      if (comm->rank == op->root) ch->send_peer[i] = -1;
      else if (ch->send_peer[i] != op->root) ch->send_peer[i] = -1;
      if (comm->rank != op->root) ch->recv_peer[i] = -1;
    }
  /* On the device each channel is a CTA, and one moves about 10 GB/s through the FIFOs: the range is split over
   * channels as the ring's is, each with links to every peer on its own lane. An element's bits depend only on
   * the rank order its owner reduces it in, not on which channel carries it. */
  int nch = op->on_device ? device_ring_channels(ordered_channels(comm), op->count * op->esize) : 1;
  for (int c = 0; c < nch; c++) {
    if (c > 0) {
      op->ch[c] = *ch;
      op->ch[c].lane = c;
    }
    channel_range(op->count, nch, c, &op->ch[c].sched.begin, &op->ch[c].sched.count);
  }
  op->nchannels = nch;
  return ncclSuccess;
}

/* Device buffers: one-shot for small all-reduces (one hand-off), rings otherwise; trees when DCCL_ALGO asks. The
 * host's cost model is measured on host copies and does not apply. */
static int device_algo(const struct dccl_op *op) {
  const char *forced = dccl_param_str(DCCL_PARAM_ALGO);
  if (!strcasecmp(forced, "tree")) return DCCL_ALGO_TREE; /* as the host's choice (tune.c): NCCL_ALGO=Tree too */
  if (!strcasecmp(forced, "oneshot")) return DCCL_ALGO_ONESHOT;
  if (!strcasecmp(forced, "ring")) return DCCL_ALGO_RING;
  /* An all-reduce of at most half an LL step takes the one-shot through the FIFOs even where direct could run: the
   * direct path meets every rank before and after, and lost to the one-shot from 8 B to 2 KiB in one process (back
   * to back 1.1-1.3x at 2 ranks, 1.2-1.6x at 4); at 4 KiB they tie, from 8 KiB (the one-shot in bulk) direct wins
   * (docs/performance.md). */
  if (op->kind == DCCL_OP_ALLREDUCE && op->count * op->esize <= DCCL_DEV_LL_BYTES / 2 && strcasecmp(forced, "direct") &&
      strcasecmp(dccl_param_str(DCCL_PARAM_PROTO), "bulk") && !op->comm->dev_net)
    return DCCL_ALGO_ONESHOT;
  int64_t direct_min = dccl_param_int(DCCL_PARAM_DIRECT_MIN_BYTES);
  /* Direct wherever every buffer is in reach: on the H200 it matched or beat the ring at every size from 4 KiB, 2-3x
   * from 16 MiB (docs/performance.md), in every collective. */
  if (direct_possible(op) && (!strcasecmp(forced, "direct") ||
                              (direct_min >= 0 && op->count * op->esize >= (uint64_t)direct_min)))
    return DCCL_ALGO_DIRECT;
  return op->kind == DCCL_OP_ALLREDUCE && op->count * op->esize <= 65536 ? DCCL_ALGO_ONESHOT : DCCL_ALGO_RING;
}


ncclResult_t dccl_op_plan(struct dccl_op *op) {
  ncclResult_t res = plan_lanes(op);
  /* Device links are other links than the host's: the same lanes, offset. */
  for (int c = 0; op->on_device && c < op->nchannels; c++) op->ch[c].lane += DCCL_LANE_DEVICE;
  return res;
}

#define P2P_CHANNEL_BYTES (1 << 20)

int dccl_p2p_nchannels(const struct dccl_coll_comm *comm, int on_device, uint64_t bytes) {
  if (!on_device) return 1;
  int64_t most = dccl_param_int(DCCL_PARAM_DEV_P2P_NCHANNELS);
  uint64_t k = bytes / P2P_CHANNEL_BYTES;
  if (most > DCCL_LANE_DEVICE - DCCL_LANE_P2P) most = DCCL_LANE_DEVICE - DCCL_LANE_P2P;
  int fit = comm->nranks > 1 ? comm->dev_nchannels / (2 * (comm->nranks - 1)) : most; /* an all-to-all's lanes */
  if (most > fit) most = fit;
  if (k > (uint64_t)most) k = (uint64_t)most;
  return k < 1 ? 1 : (int)k;
}

/* Kernels speak LL in sends, receives and the one-shot all-reduce where no step moves more than an LL step carries
 * (DCCL_DEV_LL_BYTES): the same steps, each without a fence and a counter to publish and wait for. Not by default in
 * rings, chains and trees: there one round on the H200 had LL 1.4-2.7 us slower than bulk at every size up to 8 KiB
 * (a send 2.1 us faster; docs/performance.md). DCCL_PROTO=ll asks for it everywhere, at every size in steps of that
 * size. Never over a network transport (its proxy reads each slot's header to send it), through the copy engines or
 * on the direct path (no links). Returns the chunk to plan with. */
static uint64_t device_proto(struct dccl_op *op, uint64_t chunk) {
  const char *forced = dccl_param_str(DCCL_PARAM_PROTO);
  uint64_t ll_chunk = DCCL_DEV_LL_BYTES / op->esize;
  op->proto = DCCL_PROTO_BULK;
  if (!strcasecmp(forced, "bulk") || op->comm->dev_net || op->comm->nranks == 1 || op->algo == DCCL_ALGO_DIRECT ||
      op->algo == DCCL_ALGO_CE || ll_chunk == 0)
    return chunk;
  if (strcasecmp(forced, "ll")) {
    if (op->kind != DCCL_OP_SEND && op->kind != DCCL_OP_RECV && op->algo != DCCL_ALGO_ONESHOT) return chunk;
    /* A send's, a receive's and a one-shot's steps are chunks of the channel's range: it fits, or takes bulk. */
    for (int c = 0; c < op->nchannels; c++)
      if (op->ch[c].sched.count > ll_chunk && chunk > ll_chunk) return chunk;
  }
  op->proto = DCCL_PROTO_LL;
  return chunk < ll_chunk ? chunk : ll_chunk;
}

static ncclResult_t plan_lanes(struct dccl_op *op) {
  struct dccl_coll_comm *comm = op->comm;
  uint64_t chunk_bytes = (uint64_t)dccl_param_int(op->on_device ? DCCL_PARAM_DEV_CHUNK_SIZE : DCCL_PARAM_CHUNK_SIZE);
  uint64_t chunk = chunk_bytes / op->esize;
  if (chunk == 0) chunk = 1;
  int n = comm->nranks;
  op->nchannels = 0;
  op->proto = op->on_device ? DCCL_PROTO_BULK : comm->pick_proto(comm, op->kind, op->count * op->esize);
  if (op->kind == DCCL_OP_SEND || op->kind == DCCL_OP_RECV) {
    /* Channel c moves its range over lane DCCL_LANE_P2P + c (one link and, on a GPU, one CTA each). */
    op->nchannels = dccl_p2p_nchannels(comm, op->on_device, op->count * op->esize);
    for (int c = 0; c < op->nchannels; c++) {
      struct dccl_op_channel *ch = &op->ch[c];
      channel_clear(ch, DCCL_LANE_P2P + c);
      ch->sched.algo = op->kind == DCCL_OP_SEND ? DCCL_SCHED_P2P_SEND : DCCL_SCHED_P2P_RECV;
      channel_range(op->count, op->nchannels, c, &ch->sched.begin, &ch->sched.count);
      if (op->kind == DCCL_OP_SEND) ch->send_peer[0] = op->peer; else ch->recv_peer[0] = op->peer;
    }
  } else if (n == 1) {
    struct dccl_op_channel *ch = &op->ch[0];
    channel_clear(ch, 0);
    ch->sched.algo = DCCL_SCHED_LOCAL_COPY;
    ch->sched.count = op->count;
    op->nchannels = 1;
  } else if (comm->deterministic && op->algo == DCCL_ALGO_AUTO &&
             (op->kind == DCCL_OP_ALLREDUCE || op->kind == DCCL_OP_REDUCE || op->kind == DCCL_OP_REDUCESCATTER)) {
    DCCLCHECK(plan_ordered(op));
  } else {
    if (op->algo == DCCL_ALGO_AUTO)
      op->algo = op->on_device ? device_algo(op) : comm->pick_algo(comm, op->kind, op->count * op->esize);
    /* One-shot exists for all-reduce only, and needs a connection slot per peer; direct, where ranks share memory. */
    if (op->algo == DCCL_ALGO_ONESHOT && (op->kind != DCCL_OP_ALLREDUCE || n - 1 > DCCL_CONN_SLOTS))
      op->algo = DCCL_ALGO_RING;
    if (op->algo == DCCL_ALGO_DIRECT && !(op->on_device && direct_possible(op))) op->algo = DCCL_ALGO_RING;
    int tree = op->algo == DCCL_ALGO_TREE;
    switch (op->kind) {
      case DCCL_OP_ALLREDUCE:
        if (op->algo == DCCL_ALGO_DIRECT) plan_direct(op);
        else if (op->algo == DCCL_ALGO_ONESHOT) plan_oneshot(op);
        else if (tree) plan_tree(op, DCCL_DOUBLE_TREE, 0);
        else plan_ring(op, op->count);
        break;
      case DCCL_OP_BROADCAST:
      case DCCL_OP_REDUCE:
        if (op->algo == DCCL_ALGO_DIRECT) plan_direct(op);
        else if (tree) plan_tree(op, 1, 1);
        else plan_ring(op, op->count);
        break;
      default: /* all-gather and reduce-scatter: the ring, or direct */
        if (op->algo == DCCL_ALGO_DIRECT) {
          plan_direct(op);
          break;
        }
        op->algo = DCCL_ALGO_RING;
        plan_ring(op, op->count);
    }
    static const int ring_algo[] = {[DCCL_OP_ALLREDUCE] = DCCL_SCHED_RING_ALLREDUCE,
                                    [DCCL_OP_BROADCAST] = DCCL_SCHED_CHAIN_BROADCAST,
                                    [DCCL_OP_REDUCE] = DCCL_SCHED_CHAIN_REDUCE,
                                    [DCCL_OP_ALLGATHER] = DCCL_SCHED_RING_ALLGATHER,
                                    [DCCL_OP_REDUCESCATTER] = DCCL_SCHED_RING_REDUCESCATTER};
    static const int tree_algo[] = {[DCCL_OP_ALLREDUCE] = DCCL_SCHED_TREE_ALLREDUCE,
                                    [DCCL_OP_BROADCAST] = DCCL_SCHED_TREE_BROADCAST,
                                    [DCCL_OP_REDUCE] = DCCL_SCHED_TREE_REDUCE};
    for (int c = 0; c < op->nchannels; c++)
      op->ch[c].sched.algo = op->algo == DCCL_ALGO_ONESHOT ? DCCL_SCHED_ONESHOT_ALLREDUCE
                             : op->algo == DCCL_ALGO_DIRECT ? DCCL_SCHED_DIRECT
                             : op->algo == DCCL_ALGO_TREE   ? tree_algo[op->kind]
                                                            : ring_algo[op->kind];
  }
  if (op->on_device) chunk = device_proto(op, chunk);
  for (int c = 0; c < op->nchannels; c++) {
    struct dccl_op_channel *ch = &op->ch[c];
    ch->sched.nranks = n;
    ch->sched.chunk = chunk;
    ch->sched.block = op->count;
    ch->nsteps[0] = dccl_sched_nsteps(&ch->sched, 0);
    ch->nsteps[1] = dccl_sched_nsteps(&ch->sched, 1);
    ch->done[0] = ch->done[1] = 0;
  }
  return ncclSuccess;
}

static ncclResult_t push_req(struct dccl_conn_req **reqs, int *n, int *cap, int peer, int is_send, int lane) {
  for (int i = 0; i < *n; i++)
    if ((*reqs)[i].peer == peer && (*reqs)[i].is_send == is_send && (*reqs)[i].lane == lane) return ncclSuccess;
  if (*n == *cap) {
    int ncap = *cap ? *cap * 2 : 16;
    struct dccl_conn_req *r = realloc(*reqs, (size_t)ncap * sizeof(*r));
    if (!r) return dccl_error(ncclSystemError, "out of memory planning connections");
    *reqs = r;
    *cap = ncap;
  }
  (*reqs)[(*n)++] = (struct dccl_conn_req){peer, is_send, lane};
  return ncclSuccess;
}

ncclResult_t dccl_op_conn_reqs(const struct dccl_op *op, struct dccl_conn_req **reqs, int *n, int *cap) {
  for (int c = 0; c < op->nchannels; c++) {
    const struct dccl_op_channel *ch = &op->ch[c];
    if (ch->nsteps[0] + ch->nsteps[1] == 0) continue;
    for (int i = 0; i < DCCL_CONN_SLOTS; i++) {
      if (ch->recv_peer[i] >= 0) DCCLCHECK(push_req(reqs, n, cap, ch->recv_peer[i], 0, ch->lane));
      if (ch->send_peer[i] >= 0) DCCLCHECK(push_req(reqs, n, cap, ch->send_peer[i], 1, ch->lane));
    }
  }
  return ncclSuccess;
}

/* Looks up every channel's connections; returns the first peer without one, or -1 when all are there. */
static int bind_channels(struct dccl_op *op) {
  for (int c = 0; c < op->nchannels; c++) {
    struct dccl_op_channel *ch = &op->ch[c];
    if (ch->nsteps[0] + ch->nsteps[1] == 0) continue;
    ch->needs_progress = 0;
    for (int i = 0; i < DCCL_CONN_SLOTS; i++) {
      ch->recv[i] = ch->recv_peer[i] >= 0 ? op->comm->find_conn(op->comm, ch->recv_peer[i], 0, ch->lane) : NULL;
      ch->send[i] = ch->send_peer[i] >= 0 ? op->comm->find_conn(op->comm, ch->send_peer[i], 1, ch->lane) : NULL;
      if (ch->recv_peer[i] >= 0 && !ch->recv[i]) return ch->recv_peer[i];
      if (ch->send_peer[i] >= 0 && !ch->send[i]) return ch->send_peer[i];
      if ((ch->recv[i] && ch->recv[i]->transport->moves_bytes) || (ch->send[i] && ch->send[i]->transport->moves_bytes))
        ch->needs_progress = 1;
    }
  }
  op->bound = 1;
  return -1;
}

int dccl_op_try_bind(struct dccl_op *op) {
  return bind_channels(op) < 0;
}

ncclResult_t dccl_op_bind(struct dccl_op *op) {
  int missing = bind_channels(op);
  if (missing >= 0)
    return dccl_error(ncclInternalError, "%s: connection to rank %d missing", dccl_op_name(op->kind), missing);
  return ncclSuccess;
}

/* Appends the links of one planned collective; a large float one, so every channel of its algorithm carries a
 * share. */
static ncclResult_t add_plan_links(struct dccl_coll_comm *comm, struct dccl_op *op, int on_device, int kind, int algo,
                                   int root, struct dccl_conn_req **reqs, int *n, int *cap) {
  *op = (struct dccl_op){.comm = comm, .kind = kind, .count = (size_t)1 << 28, .type = ncclFloat32, .esize = 4,
                         .algo = algo, .root = root, .peer = -1, .on_device = on_device};
  DCCLCHECK(dccl_op_plan(op));
  return dccl_op_conn_reqs(op, reqs, n, cap);
}

ncclResult_t dccl_coll_creation_links(struct dccl_coll_comm *comm, int on_device, int forced_algo,
                                      struct dccl_conn_req **reqs, int *n, int *cap) {
  if (comm->nranks == 1) return ncclSuccess;
  struct dccl_op *op = malloc(sizeof(*op));
  if (!op) return dccl_error(ncclSystemError, "out of memory planning connections");
  int any = forced_algo == DCCL_ALGO_AUTO;
  /* Rings serve every kind (all-gather and reduce-scatter whatever DCCL_ALGO says). */
  ncclResult_t res = add_plan_links(comm, op, on_device, DCCL_OP_ALLREDUCE, DCCL_ALGO_RING, -1, reqs, n, cap);
  /* Device collectives run on trees only when DCCL_ALGO says so (device_algo): their FIFOs are GPU memory. */
  if (res == ncclSuccess && ((any && !on_device) || forced_algo == DCCL_ALGO_TREE))
    res = add_plan_links(comm, op, on_device, DCCL_OP_ALLREDUCE, DCCL_ALGO_TREE, -1, reqs, n, cap);
  if (res == ncclSuccess && (any || forced_algo == DCCL_ALGO_ONESHOT || comm->deterministic))
    res = add_plan_links(comm, op, on_device, DCCL_OP_ALLREDUCE, DCCL_ALGO_ONESHOT, -1, reqs, n, cap);
  /* Deterministic device reductions run the ordered schedules over several channels (plan_ordered). */
  if (res == ncclSuccess && comm->deterministic && on_device)
    res = add_plan_links(comm, op, on_device, DCCL_OP_ALLREDUCE, DCCL_ALGO_AUTO, -1, reqs, n, cap);
  /* Only a forced tree runs broadcast and reduce on trees, one rooted at each root. */
  for (int root = 0; root < comm->nranks && res == ncclSuccess && forced_algo == DCCL_ALGO_TREE; root++) {
    res = add_plan_links(comm, op, on_device, DCCL_OP_BROADCAST, DCCL_ALGO_TREE, root, reqs, n, cap);
    if (res == ncclSuccess)
      res = add_plan_links(comm, op, on_device, DCCL_OP_REDUCE, DCCL_ALGO_TREE, root, reqs, n, cap);
  }
  free(op);
  return res;
}
