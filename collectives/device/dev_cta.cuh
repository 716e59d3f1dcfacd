// What the parts of the device executor share (collectives/device/kernels.cu): a CTA's state, a link's counters
// at the scope that orders them, failure records, waits that give up on an abort, and the check of a received
// slot's header against the CTA's own call.
#ifndef DCCL_DEV_CTA_CUH_
#define DCCL_DEV_CTA_CUH_

#include <stdint.h>

#include "collectives/device/dev_reduce.cuh"
#include "collectives/device/dev_stages.cuh"
#include "collectives/device/dev_work.h"

#define POLLS_PER_ABORT_CHECK 1024

struct dev_half {
  int tid, nthreads, bar;
};

struct dev_cta {
  struct dccl_dev_task task; // its recv/send point at `conns` while it runs
  // The task's links, copied in as it starts and their counters written back as it ends: a step's bookkeeping
  // reads shared memory instead of chasing device memory (the acquires' L1 invalidations made every such read a
  // round trip to L2). Only this CTA uses a link during a launch (collectives/device/cta_plan.h).
  alignas(16) struct dccl_dev_conn conns[2 * DCCL_DEV_CONN_SLOTS]; // recv slots, then send slots
  struct dccl_dev_conn *home[2 * DCCL_DEV_CONN_SLOTS];            // where each lives in device memory, or NULL
  struct dccl_dev_args args[2];           // per half
  uint64_t seq[2][2 * DCCL_DEV_CONN_SLOTS]; // nops of each connection at the task's start, per half
  volatile uint64_t up_done;              // steps stream 0 has finished (stream 1 may wait on it)
  volatile int stop;                      // a half hit an error: both stop
  dccl_dev_rank_words words; // this CTA's rank's abort word, failure record and exit count (dev_words_in)
  // LL steps: each link's slot this step, the payload staged on its way out and in, the received headers (by link;
  // the two streams of a tree all-reduce use disjoint links, so only the outgoing staging is per half). The sends'
  // slots are kept per step parity: thread 0 fills the next step's while a lagging warp may still be writing its
  // lines of this one (it reads them after the step's last barrier).
  char *ll_in_slot[DCCL_DEV_CONN_SLOTS];
  uint64_t ll_in_pos[DCCL_DEV_CONN_SLOTS];
  char *ll_out_slot[2][DCCL_DEV_CONN_SLOTS];
  uint64_t ll_out_pos[2][DCCL_DEV_CONN_SLOTS];
  uint32_t ll_head[DCCL_DEV_CONN_SLOTS][DCCL_LL_HEADER_UNITS];
  volatile int ll_bulk_came[DCCL_DEV_CONN_SLOTS]; // a peer sent bulk where this rank polls LL: their calls differ
  alignas(16) char ll_send[2][DCCL_DEV_LL_BYTES]; // per half
  alignas(16) char ll_recv[DCCL_DEV_CONN_SLOTS][DCCL_DEV_LL_BYTES];
#ifdef DCCL_DEV_STAGES
  dev_marks marks; // dev_stages.cuh
#endif
};

// All threads, as a task starts: its links into shared memory (8 bytes per thread), found through the task where
// it lies (`src`), so that these loads go out with the task's own copy, under one barrier.
static_assert(sizeof(dccl_dev_conn) % 8 == 0, "links are copied 8 bytes at a time");
__device__ __forceinline__ void dev_conns_in(dev_cta *cta, const dccl_dev_task *src) {
  const unsigned words = sizeof(dccl_dev_conn) / 8;
  for (unsigned j = threadIdx.x; j < 2 * DCCL_DEV_CONN_SLOTS * words; j += blockDim.x) {
    unsigned i = j / words;
    const dccl_dev_conn *c = i < DCCL_DEV_CONN_SLOTS ? src->recv[i] : src->send[i - DCCL_DEV_CONN_SLOTS];
    if (c) ((uint64_t *)&cta->conns[i])[j % words] = ((const uint64_t *)c)[j % words];
  }
}

// Threads below 2 * DCCL_DEV_CONN_SLOTS, after a barrier past dev_conns_in and the task's copy: the task's
// recv/send pointed at the copies, and each link's operation count, the sequence number its slots carry, taken
// before any half moves it.
__device__ __forceinline__ void dev_conns_point(dev_cta *cta) {
  if (threadIdx.x >= 2 * DCCL_DEV_CONN_SLOTS) return;
  int i = threadIdx.x;
  dccl_dev_conn **at = i < DCCL_DEV_CONN_SLOTS ? &cta->task.recv[i] : &cta->task.send[i - DCCL_DEV_CONN_SLOTS];
  cta->home[i] = *at;
  if (*at) *at = &cta->conns[i];
  cta->seq[0][i] = cta->seq[1][i] = cta->home[i] ? cta->conns[i].nops : 0;
}

// Threads below 2 * DCCL_DEV_CONN_SLOTS, as a task ends: each link's counters back to device memory, for the next
// task or launch; the operation count moves on only when the task ran to its end.
__device__ __forceinline__ void dev_conns_out(dev_cta *cta, int ended) {
  if (threadIdx.x >= 2 * DCCL_DEV_CONN_SLOTS || !cta->home[threadIdx.x]) return;
  dccl_dev_conn *home = cta->home[threadIdx.x];
  const dccl_dev_conn &c = cta->conns[threadIdx.x];
  home->pos = c.pos;
  home->peer_seen = c.peer_seen;
  if (ended) home->nops = cta->seq[0][threadIdx.x] + 1;
}

// A link's counters at the narrowest scope that orders them: the GPU when both ends are kernels on it.
__device__ __forceinline__ uint64_t conn_acquire(int gpu, const uint64_t *p) {
  return gpu ? dccl_ld_acquire_gpu_u64(p) : dccl_ld_acquire_u64(p);
}
__device__ __forceinline__ void conn_release(int gpu, uint64_t *p, uint64_t v) {
  if (gpu)
    dccl_st_release_gpu_u64(p, v);
  else
    dccl_st_release_u64(p, v);
}

// Orders the CTA's writes before what thread 0 publishes next, after a barrier: an acquire-release fence (the PTX
// model makes it cumulative over the barrier), which is what the protocol needs; __threadfence is sequentially
// consistent, a heavier MEMBAR.SC that also empties the SM's L1.
__device__ __forceinline__ void dev_fence(int gpu) {
  if (gpu)
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
  else
    asm volatile("fence.acq_rel.sys;" ::: "memory");
}

// The words this CTA's rank checks and reports through: a launch may run the CTAs of several ranks of one process
// (launch_merge.h), each naming its rank's slot. Read once as the CTA starts, by a thread that copies no task word,
// so the two dependent parameter loads overlap the task's own (at the CTA's exit they cost 0.8 us of a launch).
__device__ __forceinline__ void dev_words_in(const dccl_dev_work *w, dev_cta *cta) {
  if (threadIdx.x == blockDim.x - 1) cta->words = w->rank[w->cta_rank[blockIdx.x]];
}

// Thread 0, as its CTA leaves (after a barrier), or a tiny kernel's warp 1 once warp 0 has written its links back
// (dev_tiny_count; warp 0 then only reduces into the output): one more CTA of the launch has exited. The host learns
// from the count that the CTA's reads of the launch's memory are over (it reuses the block and may order a next launch
// after no event) and that the links' counters are written back. What a kernel writes for the host to read has its own
// system-scope release (a staged link's `tail`, the failure record) or is read after the stream's completion (user
// buffers), so a GPU-scope fence orders all the count publishes: a system-scope release here cost 0.9 us of every
// launch, a fence that waits for every write to reach the system.
__device__ __forceinline__ void dev_count_exit(uint32_t *done_ctas) {
  asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.sys.add.u32 [%0], 1;" ::"l"(done_ctas) : "memory");
}

// Thread 0, as its CTA leaves (after a barrier): the CTA counted in GPU memory, and the launch's last CTA adds each
// rank's CTAs to its host count at once (the fences order every CTA's writes before the count, as one CTA's are in
// dev_count_exit). An atomic on host memory per CTA, every rank's on the one PCIe link, went in turn, ~70 ns each:
// the last CTA's exit came 2.4 us after its work in a 4-rank launch of 8 CTAs a rank, 8.7 us with 32, and the next
// launch started that much later (stage timing on an H100, docs/performance.md). Without the counter (a captured
// launch, one of fewer than 4 CTAs, a copy-engine round) each CTA adds itself.
__device__ __forceinline__ void dev_count_exit_launch(const dccl_dev_work *w, uint32_t *done_ctas) {
  if (!w->exit_ctas) return dev_count_exit(done_ctas);
  uint32_t before;
  asm volatile("fence.acq_rel.gpu;\n\tatom.relaxed.gpu.add.u32 %0, [%1], 1;"
               : "=r"(before)
               : "l"(w->exit_ctas)
               : "memory");
  if (before + 1 != w->nctas) return;
  asm volatile("fence.acq_rel.gpu;\n\tst.relaxed.gpu.u32 [%0], 0;" ::"l"(w->exit_ctas) : "memory");
  for (int r = 0; r < DCCL_DEV_LAUNCH_RANKS && w->rank[r].done_ctas; r++)
    asm volatile("red.relaxed.sys.add.u32 [%0], %1;" ::"l"(w->rank[r].done_ctas), "r"(w->rank[r].ctas) : "memory");
}

// The operands that stage a one-shot's input on its way out: `n` elements from `src` into `dst` (the payload of
// every send and the own source of the reduction), premultiplied by `pre` where `op` has one and rounded to the type.
__device__ __forceinline__ void dev_stage_args(dccl_dev_args &a, const void *src, void *dst, uint64_t n,
                                               const dccl_dev_redop &op, uint64_t pre) {
  a.srcs[0] = src;
  a.nsrcs = 1;
  a.own = 0;
  a.dsts[0] = dst;
  a.ndsts = 1;
  a.round_own = a.pre_all = a.post_div = 0;
  a.n = n;
  a.kind = op.kind;
  a.pre = pre;
  a.has_pre = op.has_pre;
}

__device__ __forceinline__ void half_barrier(const dev_half &h) {
  asm volatile("bar.sync %0, %1;" ::"r"(h.bar), "r"(h.nthreads) : "memory");
}

// Records the first failure of the launch for the host (ncclCommGetAsyncError) and marks every link of the task
// aborted, so the ranks at their other ends stop too (a peer may be polling LL lines this rank will never write).
// Inlined at each failure site (60 KiB of cold code in the tiny kernel): out of line, the hot path cost 0.24 us
// more under CUDA graph replay on an H100, though the kernel's code shrank 104 -> 44 KiB (docs/performance.md).
__device__ void dev_fail(dev_cta *cta, const dccl_dev_conn *c, uint32_t code,
                         const dccl_slot_header *want = NULL, const dccl_slot_header *got = NULL, int peer = -1) {
  cta->stop = 1;
  // The record before the links' abort words: the ranks this stops, and the host threads that act on it (a link
  // pump closing network links), find this rank's reason complete.
  dccl_dev_status *status = cta->words.status;
  if (atomicCAS_system(&status->error, 0u, (uint32_t)DCCL_DEV_RECORDING) == 0u) {
    status->peer = c ? c->peer : peer;
    if (want) status->want = *want;
    if (got) status->got = *got;
    __threadfence_system();
    atomicExch_system(&status->error, code);
  }
  for (int i = 0; c && i < 2 * DCCL_DEV_CONN_SLOTS; i++) {
    const dccl_dev_conn *l = i < DCCL_DEV_CONN_SLOTS ? cta->task.recv[i] : cta->task.send[i - DCCL_DEV_CONN_SLOTS];
    if (l) dccl_cas0_u32((uint32_t *)dccl_conn_word((char *const *)l->regions, l->desc.aborted), 1);
  }
  __threadfence_system();
}

// Waits until `ready()` holds, checking the launch's abort flag, the CTA's stop flag and the link's abort word now
// and then. Returns 0 when it must give up.
template <typename Ready>
__device__ int dev_wait(dev_cta *cta, const dccl_dev_conn *c, Ready ready) {
  for (unsigned polls = 1;; polls++) {
    if (ready()) return 1;
    if (polls % POLLS_PER_ABORT_CHECK) continue;
    if (cta->stop) return 0;
    const uint32_t *aborted = (const uint32_t *)dccl_conn_word((char *const *)c->regions, c->desc.aborted);
    if (dccl_ld_acquire_u32(aborted)) {
      dev_fail(cta, c, DCCL_DEV_PEER_ABORTED); // and passes it on along this task's other links
      return 0;
    }
    if (*(volatile const uint32_t *)cta->words.abort_flag) {
      dev_fail(cta, c, DCCL_DEV_ABORTED);
      return 0;
    }
    if (polls > 64 * POLLS_PER_ABORT_CHECK) __nanosleep(200); // long waits leave the SM to co-tenants
  }
}

// The lowest link of `mask`, taken out of it: the steps' loops visit only the links their masks name.
__device__ __forceinline__ int dev_next_link(uint32_t *mask) {
  int i = __ffs(*mask) - 1;
  *mask &= *mask - 1;
  return i;
}

// The connection slots a step receives from and sends to, as bit masks.
__device__ __forceinline__ void dev_step_masks(const dccl_prim_step &st, int npeers, uint32_t *rmask, uint32_t *smask) {
  uint32_t r = 0, w = 0;
  if (st.flags & DCCL_PRIM_RECV0) r |= 1u;
  if (st.flags & DCCL_PRIM_RECV1) r |= 2u;
  if (st.flags & DCCL_PRIM_RECV_PARENT) r |= 1u << DCCL_TREE_PARENT;
  if (st.flags & DCCL_PRIM_RECV_ALL) r |= (1u << npeers) - 1;
  if (st.flags & DCCL_PRIM_RECV_PEER) r |= 1u << st.peer; // the ordered schedules (deterministic mode)
  if (st.flags & DCCL_PRIM_SEND0) w |= 1u;
  if (st.flags & DCCL_PRIM_SEND1) w |= 2u;
  if (st.flags & DCCL_PRIM_SEND_PARENT) w |= 1u << DCCL_TREE_PARENT;
  if (st.flags & DCCL_PRIM_SEND_ALL) w |= (1u << npeers) - 1;
  if (st.flags & DCCL_PRIM_SEND_PEER) w |= 1u << st.peer;
  *rmask = r;
  *smask = w;
}

// A received slot's header against this rank's own call: the operation (kind, its count on the link), the step's
// bytes and the call's fingerprint. Returns 0 (the launch failed) when they differ.
__device__ int dev_check_header(dev_cta *cta, const dccl_dev_conn *c, const dccl_slot_header *h,
                                uint64_t want_seq, uint64_t bytes) {
  if (h->abort) {
    dev_fail(cta, c, DCCL_DEV_PEER_ABORTED);
    return 0;
  }
  dccl_slot_header want = cta->task.call;
  want.seq = want_seq;
  want.bytes = bytes;
  if (h->kind != want.kind || h->seq != want.seq || h->bytes != want.bytes || h->count != want.count ||
      h->what != want.what || h->root != want.root) {
    dev_fail(cta, c, DCCL_DEV_MISMATCH, &want, h);
    return 0;
  }
  return 1;
}

// A slot that came in the other protocol than this rank's: its header names the peer's call, and the check fails
// on it; where the calls agree, the ranks were given different DCCL_PROTO, a mismatch all the same.
__device__ void dev_other_protocol(dev_cta *cta, const dccl_dev_conn *c,
                                   const dccl_slot_header *got, uint64_t want_seq, uint64_t bytes) {
  if (!dev_check_header(cta, c, got, want_seq, bytes)) return;
  dccl_slot_header want = cta->task.call;
  want.seq = want_seq;
  want.bytes = bytes;
  dev_fail(cta, c, DCCL_DEV_MISMATCH, &want, got);
}

#endif
