/* The copy-engine all-reduce (collectives/device/ce_allreduce.h). */
#include "collectives/device/ce_allreduce.h"

#include <stdlib.h>
#include <string.h>

#include "collectives/device/dev_exec.h"
#include "util/error.h"
#include "util/params.h"

/* A region: the flags (rank p raises ready[p] once its piece is in this rank's inbox, gathered[p] once its result
 * is in this rank's gather area), then for each half h (a round's epoch parity) the inbox's and the gather area's
 * slots, one of `chunk` bytes per rank. */
#define FLAGS_BYTES 256
struct ce_flags {
  uint32_t ready[DCCL_CE_MAX_RANKS];
  uint32_t pad0[16 - DCCL_CE_MAX_RANKS];
  uint32_t gathered[DCCL_CE_MAX_RANKS];
  uint32_t call[DCCL_CE_MAX_RANKS][4]; /* rank p's call, written before its flag in a call's first round */
};
_Static_assert(sizeof(struct ce_flags) <= FLAGS_BYTES, "the flags fit their block");

struct dccl_ce {
  int rank, nranks;
  size_t chunk;
  uint32_t epoch; /* the last round's; waits compare cyclically (GEQ), so it may wrap */
  CUdeviceptr regions[DCCL_CE_MAX_RANKS];
  CUstream release; /* abort: raises this rank's flags without waiting behind its blocked streams */
};

size_t dccl_ce_chunk(void) {
  int64_t c = dccl_param_int(DCCL_PARAM_CE_CHUNK);
  if (c < 4096) c = 4096;
  if (c > ((int64_t)1 << 30)) c = (int64_t)1 << 30;
  return (size_t)(c + 4095) / 4096 * 4096;
}

size_t dccl_ce_region_bytes(int nranks, size_t chunk) { return FLAGS_BYTES + 4 * (size_t)nranks * chunk; }

static CUdeviceptr flag(const struct dccl_ce *ce, int owner, int gathered, int from) {
  return ce->regions[owner] +
         (gathered ? offsetof(struct ce_flags, gathered) : offsetof(struct ce_flags, ready)) + 4 * (size_t)from;
}

/* Slot `from` of owner's inbox (area 0) or gather area (1) in half h. */
static CUdeviceptr slot(const struct dccl_ce *ce, int owner, int area, int h, int from) {
  return ce->regions[owner] + FLAGS_BYTES + ((size_t)(2 * h + area) * ce->nranks + (size_t)from) * ce->chunk;
}

/* This rank's call (count, what) into every peer's region, before the flag that lets the peer read it. */
static ncclResult_t write_call(struct dccl_ce *ce, const struct dccl_slot_header *call, CUstream s) {
  const uint32_t words[3] = {(uint32_t)call->count, (uint32_t)(call->count >> 32), call->what};
  for (int p = 0; p < ce->nranks; p++)
    for (int i = 0; i < 3 && p != ce->rank; i++)
      DCCL_CUCHECK(dccl_cu.stream_write_value32(s, ce->regions[p] + offsetof(struct ce_flags, call) +
                                                       (4 * (size_t)ce->rank + (size_t)i) * 4,
                                                words[i], CU_STREAM_WRITE_VALUE_DEFAULT),
                   "cuStreamWriteValue32 of a call's fingerprint at a peer");
  return ncclSuccess;
}

ncclResult_t dccl_ce_create(int rank, int nranks, size_t chunk, CUdeviceptr own, const uint64_t *regions,
                            struct dccl_ce **out) {
  *out = NULL;
  if (nranks < 2 || nranks > DCCL_CE_MAX_RANKS)
    return dccl_error(ncclInvalidUsage, "DCCL_CE=1: %d ranks; the copy-engine all-reduce takes 2 to %d", nranks,
                      DCCL_CE_MAX_RANKS);
  struct dccl_ce *ce = calloc(1, sizeof(*ce));
  if (!ce) return dccl_error(ncclSystemError, "out of memory");
  ce->rank = rank;
  ce->nranks = nranks;
  ce->chunk = chunk;
  for (int r = 0; r < nranks; r++) ce->regions[r] = r == rank ? own : (CUdeviceptr)regions[r];
  CUresult r = dccl_cu.stream_create(&ce->release, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS) {
    free(ce);
    return dccl_cu_result(r, "cuStreamCreate for the copy-engine all-reduce");
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
                   "cuStreamWriteValue32 at a peer (copy-engine all-reduce)");
  return ncclSuccess;
}

static ncclResult_t wait_for_peers(struct dccl_ce *ce, int gathered, CUstream s) {
  for (int p = 0; p < ce->nranks; p++)
    if (p != ce->rank)
      DCCL_CUCHECK(dccl_cu.stream_wait_value32(s, flag(ce, ce->rank, gathered, p), ce->epoch,
                                               CU_STREAM_WAIT_VALUE_GEQ),
                   "cuStreamWaitValue32 (copy-engine all-reduce)");
  return ncclSuccess;
}

/* The combining kernel's part: piece `me` (at `in`, `len` elements) and every peer's from the inbox's half h, in rank
 * order, into `out`; `check` compares the ranks' calls first. */
static void reduce_work(const struct dccl_ce *ce, const struct dccl_op *op, const struct dccl_slot_header *call,
                        const char *in, char *out, uint64_t len, int h, int check, struct dccl_ce_work *w) {
  memset(w, 0, sizeof(*w));
  w->mode = DCCL_CE_REDUCE;
  w->n = (uint32_t)ce->nranks;
  w->esize = (uint32_t)op->esize;
  w->own = ce->rank;
  w->redop = dccl_dev_redop_of(&op->redop); /* pre_dev never set here: such ops take the kernels */
  w->count[0] = len;
  for (int q = 0; q < ce->nranks; q++)
    w->srcs[q] = q == ce->rank ? (const void *)in : (const void *)(uintptr_t)slot(ce, ce->rank, 0, h, q);
  w->dsts[0] = out;
  w->call = *call;
  if (check) w->theirs = (const uint32_t *)(uintptr_t)(ce->regions[ce->rank] + offsetof(struct ce_flags, call));
}

/* One round: elements [base, base + m) of the buffers, piece p = [lo[p], lo[p] + len[p]) of them. Slots of half
 * h are refilled two rounds later; by then this rank has waited, in stream order, for flags each peer raised after
 * it was done with them (its result arrives after it combined its inbox; its next piece after it gathered). */
static ncclResult_t round_of(struct dccl_ce *ce, const struct dccl_op *op, uint64_t base, uint64_t m, CUstream s,
                             dccl_ce_launch_fn launch, void *arg) {
  const struct dccl_slot_header call = dccl_op_call_header(op);
  if (base == 0) DCCLCHECK(write_call(ce, &call, s));
  const int n = ce->nranks, me = ce->rank;
  const uint64_t es = op->esize, unit = 16 / es;
  uint64_t per = (m + n - 1) / n;
  per = (per + unit - 1) / unit * unit;
  uint64_t lo[DCCL_CE_MAX_RANKS], len[DCCL_CE_MAX_RANKS];
  for (int p = 0; p < n; p++) {
    lo[p] = (uint64_t)p * per < m ? (uint64_t)p * per : m;
    len[p] = lo[p] + per < m ? per : m - lo[p];
  }
  ce->epoch++;
  const int h = (int)(ce->epoch & 1);
  const char *in = (const char *)op->sendbuff + base * es;
  char *out = (char *)op->recvbuff + base * es;
  for (int p = 0; p < n; p++)
    if (p != me && len[p])
      DCCL_CUCHECK(dccl_cu.memcpy_async(slot(ce, p, 0, h, me), (CUdeviceptr)(uintptr_t)(in + lo[p] * es), len[p] * es,
                                        s),
                   "cuMemcpyAsync into a peer's inbox");
  DCCLCHECK(raise_at_peers(ce, 0, s));
  DCCLCHECK(wait_for_peers(ce, 0, s));
  struct dccl_ce_work w;
  if (len[me] || base == 0) { /* a call's first round compares the calls even where this rank combines nothing */
    reduce_work(ce, op, &call, in + lo[me] * es, out + lo[me] * es, len[me], h, base == 0, &w);
    DCCLCHECK(launch(arg, &w, s));
  }
  for (int p = 0; p < n; p++)
    if (p != me && len[me])
      DCCL_CUCHECK(dccl_cu.memcpy_async(slot(ce, p, 1, h, me), (CUdeviceptr)(uintptr_t)(out + lo[me] * es),
                                        len[me] * es, s),
                   "cuMemcpyAsync into a peer's gather area");
  DCCLCHECK(raise_at_peers(ce, 1, s));
  DCCLCHECK(wait_for_peers(ce, 1, s));
  memset(&w, 0, sizeof(w));
  w.mode = DCCL_CE_GATHER;
  w.esize = 1;
  for (int p = 0; p < n; p++)
    if (p != me && len[p]) {
      w.srcs[w.n] = (const void *)(uintptr_t)slot(ce, me, 1, h, p);
      w.dsts[w.n] = out + lo[p] * es;
      w.count[w.n++] = len[p] * es;
    }
  /* Launched even with nothing to copy: a round ends in a counted kernel, so once the communicator's kernels are
   * done (host operations, destroy) no copy or flag write of it is still queued. */
  return launch(arg, &w, s);
}

ncclResult_t dccl_ce_allreduce(struct dccl_ce *ce, const struct dccl_op *op, CUstream stream, dccl_ce_launch_fn launch,
                               void *arg) {
  const uint64_t round = (uint64_t)ce->nranks * (ce->chunk / op->esize);
  for (uint64_t base = 0; base < op->count; base += round) {
    uint64_t m = op->count - base < round ? op->count - base : round;
    DCCLCHECK(round_of(ce, op, base, m, stream, launch, arg));
  }
  return ncclSuccess;
}

void dccl_ce_release(struct dccl_ce *ce) {
  if (!ce) return;
  for (int p = 0; p < ce->nranks; p++)
    for (int g = 0; g < 2; g++)
      (void)dccl_cu.stream_write_value32(ce->release, flag(ce, ce->rank, g, p), ce->epoch + (1u << 30),
                                         CU_STREAM_WRITE_VALUE_DEFAULT);
}

void dccl_ce_free(struct dccl_ce *ce) {
  if (!ce) return;
  (void)dccl_cu.stream_destroy(ce->release);
  free(ce);
}
