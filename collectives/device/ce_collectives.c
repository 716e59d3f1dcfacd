/* Collectives by copy engines (collectives/device/ce_collectives.h). */
#include "collectives/device/ce_collectives.h"

#include <stdlib.h>
#include <string.h>

#include "collectives/device/dev_exec.h"
#include "util/error.h"
#include "util/params.h"

/* A region: the flags (rank p raises ready[p] once its pieces of a round are in this rank's inbox, gathered[p] once
 * its result is in this rank's gather area), the calls, then for each half h (a round's epoch parity) the inbox's
 * and the gather area's slots, one of `chunk` bytes per rank; with send/recv (DCCL_CE_P2P) then the point-to-point
 * inbox, a slot per sender in each half. */
#define FLAGS_BYTES 1024
struct ce_flags {
  uint32_t ready[DCCL_CE_MAX_RANKS];
  uint32_t pad0[16 - DCCL_CE_MAX_RANKS];
  uint32_t gathered[DCCL_CE_MAX_RANKS];
  uint32_t pad1[16 - DCCL_CE_MAX_RANKS];
  /* By half: rank p's call (count low, high, what, kind | root + 1 << 8), written before its flag in a call's first
   * round; two, as the slots, since a peer one round ahead may already write its next call. */
  uint32_t call[2][DCCL_CE_MAX_RANKS][4];
  /* Send/recv, counted per pair in chunks: rank p raises p2p_ready[p] to k once its k-th chunk to this rank is in
   * the inbox, p2p_done[p] to k once it has taken this rank's k-th chunk to it out of its own; p2p_call[h][p] is
   * rank p's send, written before the first chunk of each (in that chunk's half). */
  uint32_t p2p_ready[DCCL_CE_MAX_RANKS];
  uint32_t pad2[16 - DCCL_CE_MAX_RANKS];
  uint32_t p2p_done[DCCL_CE_MAX_RANKS];
  uint32_t pad3[16 - DCCL_CE_MAX_RANKS];
  uint32_t p2p_call[2][DCCL_CE_MAX_RANKS][4];
};
_Static_assert(sizeof(struct ce_flags) <= FLAGS_BYTES, "the flags fit their block");

struct dccl_ce {
  int rank, nranks, p2p;
  size_t chunk;
  uint32_t epoch; /* the last round's; waits compare cyclically (GEQ), so it may wrap */
  uint32_t sent[DCCL_CE_MAX_RANKS], taken[DCCL_CE_MAX_RANKS]; /* send/recv chunks to and from each peer so far */
  CUdeviceptr regions[DCCL_CE_MAX_RANKS];
  CUstream release; /* abort: raises this rank's flags without waiting behind its blocked streams */
};

size_t dccl_ce_chunk(void) {
  int64_t c = dccl_param_int(DCCL_PARAM_CE_CHUNK);
  if (c < 4096) c = 4096;
  if (c > ((int64_t)1 << 30)) c = (int64_t)1 << 30;
  return (size_t)(c + 4095) / 4096 * 4096;
}

size_t dccl_ce_region_bytes(int nranks, size_t chunk, int p2p) {
  return FLAGS_BYTES + (size_t)(p2p ? 6 : 4) * (size_t)nranks * chunk;
}

static CUdeviceptr flag(const struct dccl_ce *ce, int owner, int gathered, int from) {
  return ce->regions[owner] +
         (gathered ? offsetof(struct ce_flags, gathered) : offsetof(struct ce_flags, ready)) + 4 * (size_t)from;
}

/* Slot `from` of owner's inbox (area 0) or gather area (1) in half h. */
static CUdeviceptr slot(const struct dccl_ce *ce, int owner, int area, int h, int from) {
  return ce->regions[owner] + FLAGS_BYTES + ((size_t)(2 * h + area) * ce->nranks + (size_t)from) * ce->chunk;
}

/* Slot `from` of owner's point-to-point inbox in half h. */
static CUdeviceptr p2p_slot(const struct dccl_ce *ce, int owner, int h, int from) {
  return ce->regions[owner] + FLAGS_BYTES + ((size_t)(4 + h) * ce->nranks + (size_t)from) * ce->chunk;
}

/* Owner's point-to-point flag about rank `from`: p2p_ready, or p2p_done. */
static CUdeviceptr p2p_flag(const struct dccl_ce *ce, int owner, int done, int from) {
  return ce->regions[owner] + (done ? offsetof(struct ce_flags, p2p_done) : offsetof(struct ce_flags, p2p_ready)) +
         4 * (size_t)from;
}

/* Where rank `from`'s send call lies in half h of owner's region. */
static CUdeviceptr p2p_call(const struct dccl_ce *ce, int owner, int h, int from) {
  return ce->regions[owner] + offsetof(struct ce_flags, p2p_call) +
         ((size_t)h * DCCL_CE_MAX_RANKS + (size_t)from) * 4 * sizeof(uint32_t);
}

/* Where rank p's call words lie in half h of a region. */
static size_t call_words(int h, int p) {
  return offsetof(struct ce_flags, call) + ((size_t)h * DCCL_CE_MAX_RANKS + (size_t)p) * 4 * sizeof(uint32_t);
}

/* A call's four words (count low, high, what, kind | root + 1 << 8) at `at`, on the stream. */
static ncclResult_t write_words(const struct dccl_slot_header *call, CUdeviceptr at, CUstream s) {
  const uint32_t words[4] = {(uint32_t)call->count, (uint32_t)(call->count >> 32), call->what,
                             call->kind | (uint32_t)(call->root + 1) << 8};
  for (int i = 0; i < 4; i++)
    DCCL_CUCHECK(dccl_cu.stream_write_value32(s, at + 4 * (size_t)i, words[i], CU_STREAM_WRITE_VALUE_DEFAULT),
                 "cuStreamWriteValue32 of a call's fingerprint at a peer");
  return ncclSuccess;
}

/* This rank's call into half h of every peer's region, before the flag that lets the peer read it. */
static ncclResult_t write_call(struct dccl_ce *ce, const struct dccl_slot_header *call, int h, CUstream s) {
  for (int p = 0; p < ce->nranks; p++)
    if (p != ce->rank) DCCLCHECK(write_words(call, ce->regions[p] + call_words(h, ce->rank), s));
  return ncclSuccess;
}

ncclResult_t dccl_ce_create(int rank, int nranks, size_t chunk, int p2p, CUdeviceptr own, const uint64_t *regions,
                            struct dccl_ce **out) {
  *out = NULL;
  if (nranks < 2 || nranks > DCCL_CE_MAX_RANKS)
    return dccl_error(ncclInvalidUsage, "DCCL_CE=1: %d ranks; the copy engines take 2 to %d", nranks,
                      DCCL_CE_MAX_RANKS);
  struct dccl_ce *ce = calloc(1, sizeof(*ce));
  if (!ce) return dccl_error(ncclSystemError, "out of memory");
  ce->rank = rank;
  ce->nranks = nranks;
  ce->chunk = chunk;
  ce->p2p = p2p;
  for (int r = 0; r < nranks; r++) ce->regions[r] = r == rank ? own : (CUdeviceptr)regions[r];
  CUresult r = dccl_cu.stream_create(&ce->release, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS) {
    free(ce);
    return dccl_cu_result(r, "cuStreamCreate for the copy-engine collectives");
  }
  *out = ce;
  return ncclSuccess;
}

/* Raises this rank's flag (ready, or gathered) at every peer to the epoch, after the copies queued before it (a
 * write's default flags order it after the stream's earlier work, memory included). */
static ncclResult_t raise_at_peers(struct dccl_ce *ce, int gathered, CUstream s) {
  for (int p = 0; p < ce->nranks; p++)
    if (p != ce->rank)
      DCCL_CUCHECK(dccl_cu.stream_write_value32(s, flag(ce, p, gathered, ce->rank), ce->epoch,
                                                CU_STREAM_WRITE_VALUE_DEFAULT),
                   "cuStreamWriteValue32 at a peer (copy engines)");
  return ncclSuccess;
}

static ncclResult_t wait_for_peers(struct dccl_ce *ce, int gathered, CUstream s) {
  for (int p = 0; p < ce->nranks; p++)
    if (p != ce->rank)
      DCCL_CUCHECK(dccl_cu.stream_wait_value32(s, flag(ce, ce->rank, gathered, p), ce->epoch,
                                               CU_STREAM_WAIT_VALUE_GEQ),
                   "cuStreamWaitValue32 (copy engines)");
  return ncclSuccess;
}

/* Starts a round: its epoch and half, and in a call's first round the call at every peer (before the flag). */
static ncclResult_t begin_round(struct dccl_ce *ce, const struct dccl_slot_header *call, int first, CUstream s,
                                int *h) {
  ce->epoch++;
  *h = (int)(ce->epoch & 1);
  return first ? write_call(ce, call, *h, s) : ncclSuccess;
}

static ncclResult_t copy(CUdeviceptr dst, const void *src, uint64_t bytes, CUstream s) {
  if (bytes)
    DCCL_CUCHECK(dccl_cu.memcpy_async(dst, (CUdeviceptr)(uintptr_t)src, bytes, s), "cuMemcpyAsync into a peer's region");
  return ncclSuccess;
}

/* Every rank's flag (ready, or gathered) raised at every peer, then every peer's awaited here. */
static ncclResult_t meet(struct dccl_ce *ce, int gathered, CUstream s) {
  DCCLCHECK(raise_at_peers(ce, gathered, s));
  return wait_for_peers(ce, gathered, s);
}

static const void *own_slot(const struct dccl_ce *ce, int area, int h, int from) {
  return (const void *)(uintptr_t)slot(ce, ce->rank, area, h, from);
}

/* The kernel part that checks the calls (a call's first round) reads them from half h of this rank's region. */
static void start_work(const struct dccl_ce *ce, const struct dccl_slot_header *call, int mode, int h, int check,
                       struct dccl_ce_work *w) {
  memset(w, 0, sizeof(*w));
  w->mode = (uint32_t)mode;
  w->esize = 1;
  w->own = ce->rank;
  w->nranks = (uint32_t)ce->nranks;
  w->call = *call;
  if (check)
    w->theirs = (const uint32_t *)(uintptr_t)(ce->regions[ce->rank] + call_words(h, 0));
}

/* REDUCE: srcs[0..nranks) (this rank's input at its place) combined in rank order into `out`, `len` elements. */
static void reduce_work(const struct dccl_op *op, const void *const *srcs, void *out, uint64_t len,
                        struct dccl_ce_work *w) {
  w->mode = DCCL_CE_REDUCE;
  w->n = w->nranks;
  w->esize = (uint32_t)op->esize;
  w->redop = dccl_dev_redop_of(&op->redop); /* pre_dev never set here: such ops take the kernels */
  w->count[0] = len;
  for (uint32_t q = 0; q < w->n; q++) w->srcs[q] = srcs[q];
  w->dsts[0] = out;
}

/* GATHER: one more copy of `bytes` (none where there is nothing to move). */
static void add_copy(struct dccl_ce_work *w, const void *src, void *dst, uint64_t bytes) {
  if (!bytes || src == dst) return;
  w->srcs[w->n] = src;
  w->dsts[w->n] = dst;
  w->count[w->n++] = bytes;
}

/* All-reduce, one round over elements [base, base + m), piece p = [lo[p], lo[p] + len[p]) of them. */
static ncclResult_t allreduce_round(struct dccl_ce *ce, const struct dccl_op *op, uint64_t base, uint64_t m,
                                    CUstream s, dccl_ce_launch_fn launch, void *arg) {
  const struct dccl_slot_header call = dccl_op_call_header(op);
  const int n = ce->nranks, me = ce->rank, first = base == 0;
  const uint64_t es = op->esize, unit = 16 / es;
  uint64_t per = (m + n - 1) / n;
  per = (per + unit - 1) / unit * unit;
  uint64_t lo[DCCL_CE_MAX_RANKS], len[DCCL_CE_MAX_RANKS];
  for (int p = 0; p < n; p++) {
    lo[p] = (uint64_t)p * per < m ? (uint64_t)p * per : m;
    len[p] = lo[p] + per < m ? per : m - lo[p];
  }
  int h;
  DCCLCHECK(begin_round(ce, &call, first, s, &h));
  const char *in = (const char *)op->sendbuff + base * es;
  char *out = (char *)op->recvbuff + base * es;
  for (int p = 0; p < n; p++)
    if (p != me) DCCLCHECK(copy(slot(ce, p, 0, h, me), in + lo[p] * es, len[p] * es, s));
  DCCLCHECK(meet(ce, 0, s));
  struct dccl_ce_work w;
  if (len[me] || first) { /* a call's first round compares the calls even where this rank combines nothing */
    const void *srcs[DCCL_CE_MAX_RANKS];
    for (int q = 0; q < n; q++) srcs[q] = q == me ? (const void *)(in + lo[me] * es) : own_slot(ce, 0, h, q);
    start_work(ce, &call, DCCL_CE_REDUCE, h, first, &w);
    reduce_work(op, srcs, out + lo[me] * es, len[me], &w);
    DCCLCHECK(launch(arg, &w, s));
  }
  for (int p = 0; p < n; p++)
    if (p != me) DCCLCHECK(copy(slot(ce, p, 1, h, me), out + lo[me] * es, len[me] * es, s));
  DCCLCHECK(meet(ce, 1, s));
  start_work(ce, &call, DCCL_CE_GATHER, h, 0, &w);
  for (int p = 0; p < n; p++)
    if (p != me) add_copy(&w, own_slot(ce, 1, h, p), out + lo[p] * es, len[p] * es);
  /* Launched even with nothing to copy: a round ends in a counted kernel, so once the communicator's kernels are
   * done (host operations, destroy) no copy or flag write of it is still queued. */
  return launch(arg, &w, s);
}

/* The one-phase collectives, one round over elements [b, b + m) of each rank's block (reduce-scatter, all-gather) or
 * of the buffer (reduce, broadcast). Pieces go into inboxes (slot `me` at each peer; a broadcast's root fills the
 * whole half of both areas, 2 n slots in a row); after the flags every rank's kernel combines or copies. */
static ncclResult_t one_phase_round(struct dccl_ce *ce, const struct dccl_op *op, uint64_t b, uint64_t m, CUstream s,
                                    dccl_ce_launch_fn launch, void *arg) {
  const struct dccl_slot_header call = dccl_op_call_header(op);
  const int n = ce->nranks, me = ce->rank, root = op->root, first = b == 0;
  const uint64_t es = op->esize, block = op->count, bytes = m * es;
  const char *in = (const char *)op->sendbuff;
  char *out = (char *)op->recvbuff;
  int h;
  DCCLCHECK(begin_round(ce, &call, first, s, &h));
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    switch (op->kind) {
      case DCCL_OP_REDUCESCATTER: DCCLCHECK(copy(slot(ce, p, 0, h, me), in + (p * block + b) * es, bytes, s)); break;
      case DCCL_OP_REDUCE: if (p == root) DCCLCHECK(copy(slot(ce, p, 0, h, me), in + b * es, bytes, s)); break;
      case DCCL_OP_ALLGATHER: DCCLCHECK(copy(slot(ce, p, 0, h, me), in + b * es, bytes, s)); break;
      default: if (me == root) DCCLCHECK(copy(slot(ce, p, 0, h, 0), in + b * es, bytes, s)); break; /* broadcast */
    }
  }
  DCCLCHECK(meet(ce, 0, s));
  struct dccl_ce_work w;
  const void *srcs[DCCL_CE_MAX_RANKS];
  if (op->kind == DCCL_OP_REDUCESCATTER || (op->kind == DCCL_OP_REDUCE && me == root)) {
    const uint64_t mine = op->kind == DCCL_OP_REDUCESCATTER ? me * block + b : b;
    for (int q = 0; q < n; q++) srcs[q] = q == me ? (const void *)(in + mine * es) : own_slot(ce, 0, h, q);
    start_work(ce, &call, DCCL_CE_REDUCE, h, first, &w);
    reduce_work(op, srcs, out + b * es, m, &w);
  } else {
    start_work(ce, &call, DCCL_CE_GATHER, h, first, &w); /* a reduce off the root copies nothing but checks */
    if (op->kind == DCCL_OP_ALLGATHER)
      for (int q = 0; q < n; q++)
        add_copy(&w, q == me ? (const void *)(in + b * es) : own_slot(ce, 0, h, q), out + (q * block + b) * es, bytes);
    else if (op->kind == DCCL_OP_BROADCAST)
      add_copy(&w, me == root ? (const void *)(in + b * es) : own_slot(ce, 0, h, 0), out + b * es, bytes);
  }
  return launch(arg, &w, s);
}

int dccl_ce_runs(const struct dccl_ce *ce, int kind) {
  return kind == DCCL_OP_ALLREDUCE || kind == DCCL_OP_REDUCESCATTER || kind == DCCL_OP_REDUCE ||
         kind == DCCL_OP_ALLGATHER || kind == DCCL_OP_BROADCAST ||
         (ce->p2p && (kind == DCCL_OP_SEND || kind == DCCL_OP_RECV));
}

ncclResult_t dccl_ce_collective(struct dccl_ce *ce, const struct dccl_op *op, CUstream stream,
                                dccl_ce_launch_fn launch, void *arg) {
  const uint64_t elems = ce->chunk / op->esize; /* a slot's */
  if (op->kind == DCCL_OP_ALLREDUCE) {
    const uint64_t round = (uint64_t)ce->nranks * elems;
    for (uint64_t base = 0; base < op->count; base += round)
      DCCLCHECK(allreduce_round(ce, op, base, op->count - base < round ? op->count - base : round, stream, launch,
                                arg));
    return ncclSuccess;
  }
  const uint64_t round = op->kind == DCCL_OP_BROADCAST ? 2 * (uint64_t)ce->nranks * elems : elems;
  for (uint64_t b = 0; b < op->count; b += round)
    DCCLCHECK(one_phase_round(ce, op, b, op->count - b < round ? op->count - b : round, stream, launch, arg));
  return ncclSuccess;
}

/* Send/recv (DCCL_CE_P2P). Chunks are counted per pair and direction: the k-th chunk from rank a to rank b goes
 * through half k & 1 of a's slot in b's point-to-point inbox. The sender waits until b has taken its chunk k - 2 out
 * of that half (p2p_done), copies, then raises b's p2p_ready[a] to k; the receiver waits for it, a kernel copies
 * the chunk out (and at a send's first chunk compares the sender's call with its own), then it raises
 * a's p2p_done[b] to k. A group's operations go round by round, round j holding each pair's j-th chunk of the
 * group, every send of the round before every receive: a round's sends wait only on receives two rounds back and
 * its receives only on the peers' sends of the same round, so no order of the group's operations deadlocks. */
static ncclResult_t p2p_send_chunk(struct dccl_ce *ce, const struct dccl_op *op, uint64_t off, uint64_t len,
                                   CUstream s) {
  const int p = op->peer, me = ce->rank;
  const uint32_t k = ++ce->sent[p];
  const int h = (int)(k & 1);
  if (k > 2)
    DCCL_CUCHECK(dccl_cu.stream_wait_value32(s, p2p_flag(ce, me, 1, p), k - 2, CU_STREAM_WAIT_VALUE_GEQ),
                 "cuStreamWaitValue32 (copy-engine send)");
  if (off == 0) {
    const struct dccl_slot_header call = dccl_op_call_header(op);
    DCCLCHECK(write_words(&call, p2p_call(ce, p, h, me), s));
  }
  DCCLCHECK(copy(p2p_slot(ce, p, h, me), (const char *)op->sendbuff + off, len, s));
  DCCL_CUCHECK(dccl_cu.stream_write_value32(s, p2p_flag(ce, p, 0, me), k, CU_STREAM_WRITE_VALUE_DEFAULT),
               "cuStreamWriteValue32 at a peer (copy-engine send)");
  return ncclSuccess;
}

static ncclResult_t p2p_recv_chunk(struct dccl_ce *ce, const struct dccl_op *op, uint64_t off, uint64_t len,
                                   CUstream s, dccl_ce_launch_fn launch, void *arg) {
  const int p = op->peer, me = ce->rank;
  const uint32_t k = ++ce->taken[p];
  const int h = (int)(k & 1);
  DCCL_CUCHECK(dccl_cu.stream_wait_value32(s, p2p_flag(ce, me, 0, p), k, CU_STREAM_WAIT_VALUE_GEQ),
               "cuStreamWaitValue32 (copy-engine receive)");
  const struct dccl_slot_header call = dccl_op_call_header(op);
  struct dccl_ce_work w;
  start_work(ce, &call, DCCL_CE_GATHER, h, 0, &w);
  if (off == 0) { /* the sender's call, in this chunk's half: only its entry is compared */
    w.theirs = (const uint32_t *)(uintptr_t)p2p_call(ce, me, h, 0);
    w.peer_only = p + 1;
  }
  add_copy(&w, (const void *)(uintptr_t)p2p_slot(ce, me, h, p), (char *)op->recvbuff + off, len);
  DCCLCHECK(launch(arg, &w, s));
  DCCL_CUCHECK(dccl_cu.stream_write_value32(s, p2p_flag(ce, p, 1, me), k, CU_STREAM_WRITE_VALUE_DEFAULT),
               "cuStreamWriteValue32 at a peer (copy-engine receive)");
  return ncclSuccess;
}

ncclResult_t dccl_ce_p2p(struct dccl_ce *ce, struct dccl_op *const *ops, int nops, CUstream stream,
                         dccl_ce_launch_fn launch, void *arg) {
  uint64_t *first = calloc((size_t)nops, sizeof(uint64_t)); /* each operation's first round */
  if (!first) return dccl_error(ncclSystemError, "out of memory");
  uint64_t rounds = 0;
  for (int i = 0; i < nops; i++) { /* after the chunks of the earlier operations of its pair and direction */
    for (int j = 0; j < i; j++)
      if (ops[j]->kind == ops[i]->kind && ops[j]->peer == ops[i]->peer)
        first[i] += (ops[j]->count * ops[j]->esize + ce->chunk - 1) / ce->chunk;
    uint64_t end = first[i] + (ops[i]->count * ops[i]->esize + ce->chunk - 1) / ce->chunk;
    if (end > rounds) rounds = end;
  }
  ncclResult_t res = ncclSuccess;
  for (uint64_t r = 0; r < rounds && res == ncclSuccess; r++)
    for (int pass = 0; pass < 2 && res == ncclSuccess; pass++) /* the round's sends, then its receives */
      for (int i = 0; i < nops && res == ncclSuccess; i++) {
        const struct dccl_op *op = ops[i];
        const uint64_t bytes = op->count * op->esize;
        if ((op->kind == DCCL_OP_SEND) != (pass == 0) || r < first[i] || (r - first[i]) * ce->chunk >= bytes) continue;
        const uint64_t off = (r - first[i]) * ce->chunk;
        const uint64_t len = bytes - off < ce->chunk ? bytes - off : ce->chunk;
        res = op->kind == DCCL_OP_SEND ? p2p_send_chunk(ce, op, off, len, stream)
                                       : p2p_recv_chunk(ce, op, off, len, stream, launch, arg);
      }
  free(first);
  if (res != ncclSuccess) return res;
  /* A counted kernel last, so once the communicator's kernels are done no copy or flag write is still queued. */
  struct dccl_ce_work w;
  const struct dccl_slot_header call = dccl_op_call_header(ops[0]);
  start_work(ce, &call, DCCL_CE_GATHER, 0, 0, &w);
  return launch(arg, &w, stream);
}

void dccl_ce_release(struct dccl_ce *ce) {
  if (!ce) return;
  for (int p = 0; p < ce->nranks; p++)
    for (int g = 0; g < 2; g++)
      (void)dccl_cu.stream_write_value32(ce->release, flag(ce, ce->rank, g, p), ce->epoch + (1u << 30),
                                         CU_STREAM_WRITE_VALUE_DEFAULT);
  for (int p = 0; ce->p2p && p < ce->nranks; p++) {
    (void)dccl_cu.stream_write_value32(ce->release, p2p_flag(ce, ce->rank, 0, p), ce->taken[p] + (1u << 30),
                                       CU_STREAM_WRITE_VALUE_DEFAULT);
    (void)dccl_cu.stream_write_value32(ce->release, p2p_flag(ce, ce->rank, 1, p), ce->sent[p] + (1u << 30),
                                       CU_STREAM_WRITE_VALUE_DEFAULT);
  }
}

void dccl_ce_free(struct dccl_ce *ce) {
  if (!ce) return;
  (void)dccl_cu.stream_destroy(ce->release);
  free(ce);
}
