// The device executor: a kernel runs a launch's tasks (collectives/device/dev_work.h). A task is one channel of
// one operation; it runs the schedule of pure/schedule.h step by step, exactly as collectives/executor.c does on
// the host: per step, thread 0 of the CTA waits until every FIFO the step reads has a slot and every FIFO it
// writes has room, the CTA's threads reduce and copy with 16-byte accesses, and thread 0 publishes. A channel with
// two streams (the trees' up and down) runs them in the two halves of the CTA, each with its own barrier, so
// neither can block the other. No CTA ever waits for another CTA of its launch.
//
// Operations whose steps all fit DCCL_DEV_LL_BYTES speak LL (task.proto): every 8-byte unit of a position's LL
// slot carries its own flag, so the producer's threads write their lines with no fence and no counter to publish,
// and the consumer's threads poll them. The payload goes through shared memory (ll_send per half, ll_recv per
// link: the tree's two streams use disjoint links), so the reduction is the bulk path's. Ranks whose calls differ
// may choose different protocols for one position: each consumer also watches the other protocol's slot, so the
// mismatch is reported, not waited on.
//
// Memory ordering (docs/design.md): a producer's threads write a slot, the CTA meets at a barrier, and thread 0
// publishes `tail` with a fence and a release store; the consumer's thread 0 reads `tail` with an acquire before
// its CTA (after a barrier) reads the slot, and hands the slot back by a release store of `head`. The scope is
// the GPU's when both ends of the link are kernels on one GPU, the system's otherwise (dccl_dev_conn.same_gpu).
#include <stdint.h>

#include "collectives/device/dev_reduce.cuh"
#include "collectives/device/dev_work.h"

#define POLLS_PER_ABORT_CHECK 1024

struct dev_half {
  int tid, nthreads, bar;
};

struct dev_cta {
  struct dccl_dev_task task;
  struct dccl_dev_args args[2];           // per half
  uint64_t seq[2][2 * DCCL_DEV_CONN_SLOTS]; // nops of each connection at the task's start, per half
  volatile uint64_t up_done;              // steps stream 0 has finished (stream 1 may wait on it)
  volatile int stop;                      // a half hit an error: both stop
  // LL steps: each link's slot this step, the payload staged on its way out and in, the received headers (by link;
  // the two streams of a tree all-reduce use disjoint links, so only the outgoing staging is per half)
  char *ll_slot[2 * DCCL_DEV_CONN_SLOTS]; // receptions, then sends
  uint64_t ll_pos[2 * DCCL_DEV_CONN_SLOTS];
  uint32_t ll_head[DCCL_DEV_CONN_SLOTS][DCCL_LL_HEADER_UNITS];
  volatile int ll_bulk_came[DCCL_DEV_CONN_SLOTS]; // a peer sent bulk where this rank polls LL: their calls differ
  alignas(16) char ll_send[2][DCCL_DEV_LL_BYTES]; // per half
  alignas(16) char ll_recv[DCCL_DEV_CONN_SLOTS][DCCL_DEV_LL_BYTES];
};

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

__device__ __forceinline__ void half_barrier(const dev_half &h) {
  asm volatile("bar.sync %0, %1;" ::"r"(h.bar), "r"(h.nthreads) : "memory");
}

// Records the first failure of the launch for the host (ncclCommGetAsyncError) and marks every link of the task
// aborted, so the ranks at their other ends stop too (a peer may be polling LL lines this rank will never write).
__device__ void dev_fail(const dccl_dev_work *w, dev_cta *cta, const dccl_dev_conn *c, uint32_t code,
                         const dccl_slot_header *want = NULL, const dccl_slot_header *got = NULL, int peer = -1) {
  cta->stop = 1;
  // The record before the links' abort words: the ranks this stops, and the host threads that act on it (a link
  // pump closing network links), find this rank's reason complete.
  if (atomicCAS_system(&w->status->error, 0u, (uint32_t)DCCL_DEV_RECORDING) == 0u) {
    w->status->peer = c ? c->peer : peer;
    if (want) w->status->want = *want;
    if (got) w->status->got = *got;
    __threadfence_system();
    atomicExch_system(&w->status->error, code);
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
__device__ int dev_wait(const dccl_dev_work *w, dev_cta *cta, const dccl_dev_conn *c, Ready ready) {
  for (unsigned polls = 1;; polls++) {
    if (ready()) return 1;
    if (polls % POLLS_PER_ABORT_CHECK) continue;
    if (cta->stop) return 0;
    const uint32_t *aborted = (const uint32_t *)dccl_conn_word((char *const *)c->regions, c->desc.aborted);
    if (dccl_ld_acquire_u32(aborted)) {
      dev_fail(w, cta, c, DCCL_DEV_PEER_ABORTED); // and passes it on along this task's other links
      return 0;
    }
    if (*(volatile const uint32_t *)w->abort_flag) {
      dev_fail(w, cta, c, DCCL_DEV_ABORTED);
      return 0;
    }
    if (polls > 64 * POLLS_PER_ABORT_CHECK) __nanosleep(200); // long waits leave the SM to co-tenants
  }
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
__device__ int dev_check_header(const dccl_dev_work *w, dev_cta *cta, const dccl_dev_conn *c, const dccl_slot_header *h,
                                uint64_t want_seq, uint64_t bytes) {
  if (h->abort) {
    dev_fail(w, cta, c, DCCL_DEV_PEER_ABORTED);
    return 0;
  }
  dccl_slot_header want = cta->task.call;
  want.seq = want_seq;
  want.bytes = bytes;
  if (h->kind != want.kind || h->seq != want.seq || h->bytes != want.bytes || h->count != want.count ||
      h->what != want.what || h->root != want.root) {
    dev_fail(w, cta, c, DCCL_DEV_MISMATCH, &want, h);
    return 0;
  }
  return 1;
}

// A slot that came in the other protocol than this rank's: its header names the peer's call, and the check fails
// on it; where the calls agree, the ranks were given different DCCL_PROTO, a mismatch all the same.
__device__ void dev_other_protocol(const dccl_dev_work *w, dev_cta *cta, const dccl_dev_conn *c,
                                   const dccl_slot_header *got, uint64_t want_seq, uint64_t bytes) {
  if (!dev_check_header(w, cta, c, got, want_seq, bytes)) return;
  dccl_slot_header want = cta->task.call;
  want.seq = want_seq;
  want.bytes = bytes;
  dev_fail(w, cta, c, DCCL_DEV_MISMATCH, &want, got);
}

// Thread 0, where a peer sent the slot at `pos` as LL while this rank expected bulk: their calls differ (or their
// DCCL_PROTO). Reports the mismatch from the LL slot's header and returns 0. Out of line: it is cold, and inlined
// its registers would crowd the steps' hot path.
__device__ __noinline__ int dev_ll_came(const dccl_dev_work *w, dev_cta *cta, const dccl_dev_conn *c, uint64_t pos,
                                        uint64_t want_seq, uint64_t bytes) {
  const uint64_t *units = (const uint64_t *)dccl_conn_ll_slot(&c->desc, (char *const *)c->regions, pos);
  uint32_t words[DCCL_LL_HEADER_UNITS], flag = dccl_ll_flag(pos);
  for (uint32_t i = 0; i < DCCL_LL_HEADER_UNITS; i += 2)
    if (!dev_wait(w, cta, c, [&] { return dccl_ll_load_line(units + i, flag, &words[i], &words[i + 1]); })) return 0;
  dccl_slot_header got;
  dccl_ll_header_from_words(words, &got);
  dev_other_protocol(w, cta, c, &got, want_seq, bytes);
  return 0;
}

// Thread 0: waits for the step's FIFOs and fills the half's operands (for LL, the slots the CTA polls and writes
// next). Returns 0 to stop.
__device__ int dev_step_acquire(const dccl_dev_work *w, dev_cta *cta, int half, const dccl_prim_step &st) {
  const dccl_dev_task &t = cta->task;
  dccl_dev_args &a = cta->args[half];
  uint64_t bytes = st.nelem * t.esize;
  uint32_t rmask, smask;
  dev_step_masks(st, t.sched.npeers, &rmask, &smask);

  const char *in = NULL;
  if (st.flags & DCCL_PRIM_INPUT)
    in = ((st.flags & DCCL_PRIM_INPUT_FROM_OUTPUT) ? (const char *)t.recvbuff : t.sendbuff) + st.in_off * t.esize;
  a.nsrcs = 0;
  a.ndsts = 0;
  a.own = -1;
  a.round_own = 0;
  a.pre_all = 0;
  if (in && !(st.flags & DCCL_PRIM_RANK_ORDER)) {
    a.own = 0;
    a.srcs[a.nsrcs++] = in;
  }
  int own_rank_placed = !(st.flags & DCCL_PRIM_RANK_ORDER);
  for (int i = 0; i < DCCL_DEV_CONN_SLOTS; i++) {
    if (!((rmask >> i) & 1)) continue;
    dccl_dev_conn *c = t.recv[i];
    uint64_t pos = c->pos;
    if (!own_rank_placed && c->peer > t.rank) { // one-shot: the own input at its rank's place
      a.own = a.nsrcs;
      a.srcs[a.nsrcs++] = in;
      own_rank_placed = 1;
    }
    if (t.proto == DCCL_PROTO_LL) { // the CTA polls the LL slot next (dev_ll_receive), into shared memory
      cta->ll_slot[i] = dccl_conn_ll_slot(&c->desc, (char *const *)c->regions, pos);
      cta->ll_pos[i] = pos;
      cta->ll_bulk_came[i] = 0;
      a.srcs[a.nsrcs++] = cta->ll_recv[i];
      continue;
    }
    int gpu = c->same_gpu;
    char *slot = dccl_conn_slot(&c->desc, (char *const *)c->regions, pos);
    const uint64_t *tail = dccl_conn_word((char *const *)c->regions, c->desc.tail);
    // `tail` as last read (peer_seen) says whether the slot is there already: a value acquired earlier orders this
    // read after the producer's writes as well as a fresh one would.
    uint64_t seen = c->peer_seen;
    if (seen <= pos) {
      if (!dev_wait(w, cta, c, [&] { return (seen = conn_acquire(gpu, tail)) > pos; })) return 0;
      c->peer_seen = seen;
    }
    if (c->desc.ll_bytes && *(volatile const uint64_t *)slot != dccl_ll_unit(DCCL_SLOT_BULK_MARK, dccl_ll_flag(pos)))
      return dev_ll_came(w, cta, c, pos, cta->seq[half][i], bytes);
    if (!dev_check_header(w, cta, c, (const dccl_slot_header *)(slot + 8), cta->seq[half][i], bytes)) return 0;
    a.srcs[a.nsrcs++] = slot + DCCL_SLOT_HEAD_BYTES;
  }
  if (!own_rank_placed && in) {
    a.own = a.nsrcs;
    a.srcs[a.nsrcs++] = in;
  }
  if (st.flags & DCCL_PRIM_RANK_ORDER) a.round_own = 1;
  if (st.flags & DCCL_PRIM_OUTPUT) a.dsts[a.ndsts++] = t.recvbuff + st.out_off * t.esize;
  int ll_staged = 0;
  for (int i = 0; i < DCCL_DEV_CONN_SLOTS; i++) {
    if (!((smask >> i) & 1)) continue;
    dccl_dev_conn *c = t.send[i];
    uint64_t pos = c->pos, nslots = c->desc.nslots;
    int gpu = c->same_gpu;
    const uint64_t *head = dccl_conn_word((char *const *)c->regions, c->desc.head);
    uint64_t seen = c->peer_seen; // `head` as last read: room then is room now
    if (pos - seen >= nslots) {
      if (!dev_wait(w, cta, c, [&] { return pos - (seen = conn_acquire(gpu, head)) < nslots; })) return 0;
      c->peer_seen = seen;
    }
    if (t.proto == DCCL_PROTO_LL) { // staged once in shared memory, written to every link's LL slot after
      cta->ll_slot[DCCL_DEV_CONN_SLOTS + i] = dccl_conn_ll_slot(&c->desc, (char *const *)c->regions, pos);
      cta->ll_pos[DCCL_DEV_CONN_SLOTS + i] = pos;
      if (!ll_staged) a.dsts[a.ndsts++] = cta->ll_send[half];
      ll_staged = 1;
      continue;
    }
    a.dsts[a.ndsts++] = dccl_conn_slot(&c->desc, (char *const *)c->regions, pos) + DCCL_SLOT_HEAD_BYTES;
  }
  a.n = st.nelem;
  a.kind = t.redop.kind;
  a.pre = t.redop.pre;
  if (t.redop.pre_ptr) { // a device scalar: read as the operation runs
    a.pre = 0;
    memcpy(&a.pre, (const void *)t.redop.pre_ptr, t.esize);
  }
  // The tree root forwards data that already had its input's premultiply: a plain copy.
  a.has_pre = t.redop.has_pre && !(st.flags & DCCL_PRIM_INPUT_FROM_OUTPUT);
  a.post_div = (st.flags & DCCL_PRIM_POST) ? t.redop.post_div : 0;
  return 1;
}

// Thread 0, where a peer sent the slot at `pos` as bulk while this CTA polled LL lines (their calls differ, or their
// DCCL_PROTO): reports the mismatch from the bulk header, once `tail` (release) publishes it, and returns 0. Cold,
// so out of line.
__device__ __noinline__ int dev_bulk_came(const dccl_dev_work *w, dev_cta *cta, const dccl_dev_conn *c, uint64_t pos,
                                          uint64_t want_seq, uint64_t bytes) {
  const uint64_t *tail = dccl_conn_word((char *const *)c->regions, c->desc.tail);
  const dccl_slot_header *bh = (const dccl_slot_header *)(dccl_conn_slot(&c->desc, (char *const *)c->regions, pos) + 8);
  cta->stop = 0; // set only to free the other pollers: the report below is what stops the launch
  if (dev_wait(w, cta, c, [&] { return conn_acquire(c->same_gpu, tail) > pos; })) {
    dccl_slot_header got = *bh;
    dev_other_protocol(w, cta, c, &got, want_seq, bytes);
  }
  return 0;
}

// The CTA polls the step's LL receptions into shared memory: thread j reads lines j, j + nthreads, ... of every
// slot (the header is the first DCCL_LL_HEADER_UNITS / 2 lines). Then thread 0 checks the headers. Returns 0 to
// stop. This and dev_ll_send are out of line: inlined, their registers crowded the bulk steps' reduction loop
// (ptxas spilled 468 bytes in dccl_kernel_t5 against 56 before LL grew; 100 with them out of line).
__device__ __noinline__ int dev_ll_receive(const dccl_dev_work *w, dev_cta *cta, int half, uint32_t rmask,
                                           uint64_t bytes, const dev_half &h) {
  const dccl_dev_task &t = cta->task;
  uint32_t lines = dccl_ll_units(bytes) / 2;
  int ok = 1;
  for (int i = 0; i < DCCL_DEV_CONN_SLOTS && ok; i++) {
    if (!((rmask >> i) & 1)) continue;
    const dccl_dev_conn *c = t.recv[i];
    const uint64_t *units = (const uint64_t *)cta->ll_slot[i];
    const uint64_t *bulk_unit0 = (const uint64_t *)dccl_conn_slot(&c->desc, (char *const *)c->regions, cta->ll_pos[i]);
    uint32_t flag = dccl_ll_flag(cta->ll_pos[i]);
    uint64_t bulk_mark = dccl_ll_unit(DCCL_SLOT_BULK_MARK, flag);
    for (uint32_t l = h.tid; l < lines && ok; l += h.nthreads) {
      uint32_t d0, d1, tries = 0;
      int beyond = 0;
      // A peer whose call differs may send what never fills this line. The first line's poller also watches the
      // bulk slot (the peer sent bulk): it stops the CTA and thread 0 reports the mismatch below. A payload line's
      // poller now and then reads the first line, whose bytes may say the slot ends before this line: it stops
      // waiting, and thread 0's header check reports the counts. Both only every 16th try: each is one more read
      // (over PCIe on staged links) between two of the line's.
      ok = dev_wait(w, cta, c, [&] {
        if (dccl_ll_load_line(units + 2 * l, flag, &d0, &d1)) return true;
        if (++tries % 16) return false;
        if (l == 0) {
          if (*(volatile const uint64_t *)bulk_unit0 != bulk_mark) return false;
          cta->ll_bulk_came[i] = 1;
          cta->stop = 1;
          return true;
        }
        uint32_t b0, b1;
        if (l < DCCL_LL_HEADER_UNITS / 2 || tries % 256 || !dccl_ll_load_line(units, flag, &b0, &b1)) return false;
        beyond = dccl_ll_units((uint64_t)b1 << 32 | b0) / 2 <= l;
        return (bool)beyond;
      });
      if (cta->ll_bulk_came[i] && l == 0) ok = 0;
      if (!ok || beyond) continue; // nothing to keep: the checks below fail the step
      if (l < DCCL_LL_HEADER_UNITS / 2) {
        cta->ll_head[i][2 * l] = d0;
        cta->ll_head[i][2 * l + 1] = d1;
      } else {
        uint32_t *dst = (uint32_t *)cta->ll_recv[i] + 2 * (l - DCCL_LL_HEADER_UNITS / 2);
        dst[0] = d0;
        dst[1] = d1;
      }
    }
  }
  half_barrier(h);
  __shared__ int go_of[2];
  int &go = go_of[half];
  if (h.tid == 0) {
    go = !cta->stop;
    for (int i = 0; i < DCCL_DEV_CONN_SLOTS; i++) {
      if (!((rmask >> i) & 1)) continue;
      const dccl_dev_conn *c = t.recv[i];
      if (cta->ll_bulk_came[i]) {
        go = dev_bulk_came(w, cta, c, cta->ll_pos[i], cta->seq[half][i], bytes);
        break;
      }
      if (!go) break;
      dccl_slot_header head;
      dccl_ll_header_from_words(cta->ll_head[i], &head);
      go = dev_check_header(w, cta, c, &head, cta->seq[half][i], bytes);
    }
  }
  half_barrier(h);
  return go;
}

// The CTA writes the staged payload into every LL send's slot, every unit with its flag: nothing to fence.
__device__ __noinline__ void dev_ll_send(dev_cta *cta, int half, uint32_t smask, uint64_t bytes,
                                         const dev_half &h) {
  uint32_t lines = dccl_ll_units(bytes) / 2;
  for (int i = 0; i < DCCL_DEV_CONN_SLOTS; i++) {
    if (!((smask >> i) & 1)) continue;
    uint64_t *units = (uint64_t *)cta->ll_slot[DCCL_DEV_CONN_SLOTS + i];
    uint64_t pos = cta->ll_pos[DCCL_DEV_CONN_SLOTS + i];
    uint32_t flag = dccl_ll_flag(pos);
    for (uint32_t l = h.tid; l < lines; l += h.nthreads) {
      uint32_t d[2];
      if (l < DCCL_LL_HEADER_UNITS / 2) {
        uint32_t words[DCCL_LL_HEADER_UNITS];
        dccl_slot_header head = cta->task.call;
        head.bytes = bytes;
        head.seq = cta->seq[half][DCCL_DEV_CONN_SLOTS + i];
        dccl_ll_header_words(&head, words);
        d[0] = words[2 * l];
        d[1] = words[2 * l + 1];
      } else {
        const uint32_t *src = (const uint32_t *)cta->ll_send[half] + 2 * (l - DCCL_LL_HEADER_UNITS / 2);
        d[0] = src[0];
        d[1] = src[1];
      }
      dccl_ll_store_line(units + 2 * l, d[0], d[1], flag);
    }
  }
}

// Thread 0, after an LL step: the positions move on; `tail` follows the sends (relaxed: no consumer of this slot
// reads it; a later bulk operation's consumer waits for that operation's own release), and the receptions go back,
// `head` relaxed too: the CTA's loads of the slot are done (their values reached shared memory before the
// barrier), so nothing is left for a fence to order before the producer may write the slot again. A release
// here was a fence per step, at system scope on staged links.
__device__ void dev_ll_release(dev_cta *cta, uint32_t smask, uint32_t rmask) {
  const dccl_dev_task &t = cta->task;
  for (int i = 0; i < DCCL_DEV_CONN_SLOTS; i++) {
    if ((smask >> i) & 1) {
      dccl_dev_conn *c = t.send[i];
      uint64_t *tail = dccl_conn_word((char *const *)c->regions, c->desc.tail);
      *(volatile uint64_t *)tail = c->pos + 1;
      c->pos++;
    }
    if ((rmask >> i) & 1) {
      dccl_dev_conn *c = t.recv[i];
      *(volatile uint64_t *)dccl_conn_word((char *const *)c->regions, c->desc.head) = c->pos + 1;
      c->pos++;
    }
  }
}

// Thread 0: publishes the step's sends and hands its receptions back.
__device__ void dev_step_release(dev_cta *cta, int half, const dccl_prim_step &st) {
  const dccl_dev_task &t = cta->task;
  uint32_t rmask, smask;
  dev_step_masks(st, t.sched.npeers, &rmask, &smask);
  // Every thread's slot writes (seen through the barrier) before the counters: a fence at the widest scope any of
  // the step's links needs.
  int all_gpu = 1;
  for (int i = 0; i < DCCL_DEV_CONN_SLOTS; i++) {
    if ((smask >> i) & 1) all_gpu &= t.send[i]->same_gpu;
    if ((rmask >> i) & 1) all_gpu &= t.recv[i]->same_gpu;
  }
  if (all_gpu)
    __threadfence();
  else
    __threadfence_system();
  for (int i = 0; i < DCCL_DEV_CONN_SLOTS; i++) {
    if (!((smask >> i) & 1)) continue;
    dccl_dev_conn *c = t.send[i];
    uint64_t pos = c->pos;
    char *slot = dccl_conn_slot(&c->desc, (char *const *)c->regions, pos);
    dccl_slot_header h = t.call;
    h.bytes = st.nelem * t.esize;
    h.seq = cta->seq[half][DCCL_DEV_CONN_SLOTS + i];
    if (c->same_gpu) { // a kernel reads the header after `tail`: plain stores, ordered by the release below
      *(dccl_slot_header *)(slot + 8) = h;
      *(uint64_t *)slot = dccl_ll_unit(DCCL_SLOT_BULK_MARK, dccl_ll_flag(pos));
    } else {
      dccl_bulk_write_head(slot, pos, &h);
    }
    conn_release(c->same_gpu, dccl_conn_word((char *const *)c->regions, c->desc.tail), pos + 1);
    c->pos = pos + 1;
  }
  for (int i = 0; i < DCCL_DEV_CONN_SLOTS; i++) {
    if (!((rmask >> i) & 1)) continue;
    dccl_dev_conn *c = t.recv[i];
    conn_release(c->same_gpu, dccl_conn_word((char *const *)c->regions, c->desc.head), c->pos + 1);
    c->pos++;
  }
}

template <int TYPE>
__device__ void dev_run_stream(const dccl_dev_work *w, dev_cta *cta, int s, const dev_half &h) {
  const dccl_dev_task &t = cta->task;
  __shared__ int go[2];
  for (uint64_t idx = 0; idx < t.nsteps[s]; idx++) {
    dccl_prim_step st;
    dccl_sched_step(&t.sched, s, idx, &st);
    if (h.tid == 0) {
      int ok = 1;
      while (st.wait_up >= 0 && cta->up_done <= (uint64_t)st.wait_up && !cta->stop) {
      }
      __threadfence_block(); // the up stream's writes after its up_done
      ok = !cta->stop && dev_step_acquire(w, cta, s, st);
      go[s] = ok;
    }
    half_barrier(h);
    if (!go[s]) return;
    int ll = t.proto == DCCL_PROTO_LL;
    uint32_t rmask = 0, smask = 0;
    if (ll) {
      dev_step_masks(st, t.sched.npeers, &rmask, &smask);
      if (rmask && !dev_ll_receive(w, cta, s, rmask, st.nelem * t.esize, h)) return;
    }
    if (st.nelem > 0) dev_reduce_copy_for<TYPE>(cta->args[s], t.redop.type, t.esize, h.tid, h.nthreads);
    half_barrier(h);
    if (ll) {
      if (smask) dev_ll_send(cta, s, smask, st.nelem * t.esize, h);
      if (h.tid == 0) {
        dev_ll_release(cta, smask, rmask);
        __threadfence_block(); // the half's output writes (seen through its barrier) before the other half's wait
        if (s == 0) cta->up_done = idx + 1;
      }
      continue;
    }
    if (h.tid == 0) {
      dev_step_release(cta, s, st);
      if (s == 0) cta->up_done = idx + 1;
    }
  }
}


// The direct all-reduce (DCCL_SCHED_DIRECT), for ranks on one GPU (in one process, or in windows): no FIFO,
// no copy through a slot. Channel c of the operation covers [begin, begin + count); rank r reduces slice r of it
// from every rank's input, in rank order, and writes the result into every rank's output: each input element is
// read once and each output element written once, the HBM floor's traffic (2 N S bytes for N ranks of S bytes).
// Thread 0 meets the other ranks' same channel on their boards (struct dccl_direct_slot): publish this call's
// buffers and then `seq` (release), read each peer's once its `seq` reaches the operation (acquire); after the
// CTA's writes, a fence and `done` (release), then wait for every peer's `done`, so no rank leaves (and lets its
// caller reuse the buffers) while another still reads its input or writes its output. A peer cannot publish the
// next operation before this rank's `done`, so the buffers read are this operation's.
__device__ __forceinline__ int dev_direct_meet(const dccl_dev_work *w, dev_cta *cta, const dccl_direct_slot *their,
                                               const uint64_t *word, uint64_t k, int peer) {
  for (unsigned polls = 1;; polls++) {
    if (dccl_ld_acquire_gpu_u64(word) >= k) return 1;
    if (polls % POLLS_PER_ABORT_CHECK) continue;
    if (*(volatile const uint64_t *)&their->aborted) {
      dev_fail(w, cta, NULL, DCCL_DEV_PEER_ABORTED, NULL, NULL, peer);
      return 0;
    }
    // Another channel of this rank failed (a peer that called with another count may lack this channel): stop.
    if (*(volatile const uint32_t *)w->abort_flag || cta->stop || *(volatile const uint32_t *)&w->status->error) {
      dev_fail(w, cta, NULL, DCCL_DEV_ABORTED, NULL, NULL, peer);
      return 0;
    }
    if (polls > 64 * POLLS_PER_ABORT_CHECK) __nanosleep(200);
  }
}

// Rank p's buffer at `at` (its address) as this process sees it: through window `win`'s mapping, or as it is.
__device__ __forceinline__ const char *dev_direct_here(const dccl_dev_task &t, const char *at, int32_t win, int p) {
  if (win < 0) return at;
  const dccl_win_peer *wins = (const dccl_win_peer *)(t.boards + t.sched.nranks);
  const dccl_win_peer e = wins[(size_t)win * t.sched.nranks + p];
  return (const char *)(uintptr_t)(e.local + ((uint64_t)(uintptr_t)at - e.owner));
}

// Under DCCL_DIRECT_PIECE_BYTES (t.sched.piece set) the channel's elements are pieces `stride` apart: after one,
// thread 0 moves every source and destination on to this rank's slice of the next. 0 when none is left.
__device__ __forceinline__ int dev_direct_next_piece(const dccl_dev_task &t, dccl_dev_args &a, uint64_t *at,
                                                     uint64_t *left, uint64_t *lo) {
  uint64_t from = *at + *lo, hi;
  if (!dccl_direct_next_piece(&t.sched, t.rank, t.esize, at, left, lo, &hi)) return 0;
  uint64_t delta = (*at + *lo - from) * t.esize;
  for (int s = 0; s < a.nsrcs; s++) a.srcs[s] = (const char *)a.srcs[s] + delta;
  for (int d = 0; d < a.ndsts; d++) a.dsts[d] = (char *)a.dsts[d] + delta;
  a.n = hi - *lo;
  return 1;
}

template <int TYPE>
__device__ void dev_direct(const dccl_dev_work *w, dev_cta *cta) {
  const dccl_dev_task &t = cta->task;
  dccl_dev_args &a = cta->args[0];
  const int n = t.sched.nranks, me = t.rank;
  __shared__ int go, more;
  __shared__ uint64_t piece_at, piece_left, piece_lo;
  if (threadIdx.x == 0) {
    dccl_direct_slot *mine = t.boards[me] + t.channel;
    uint64_t k = mine->ops + 1;
    mine->ops = k;
    mine->sendbuff = t.sendbuff;
    mine->recvbuff = t.recvbuff;
    mine->send_win = t.send_win;
    mine->recv_win = t.recv_win;
    mine->call = t.call;
    dccl_st_release_gpu_u64(&mine->seq, k);
    // This rank's slice of the channel's range (of its first piece). Block operations (reduce-scatter,
    // all-gather) take the channel's range of this rank's block instead.
    uint64_t lo, hi, len = t.sched.piece && t.sched.piece < t.sched.count ? t.sched.piece : t.sched.count;
    dccl_direct_slice(len, n, me, t.esize, &lo, &hi);
    const int block_op = t.direct_op == DCCL_DIRECT_OP_REDUCESCATTER || t.direct_op == DCCL_DIRECT_OP_ALLGATHER;
    if (block_op) lo = 0, hi = t.sched.count;
    piece_at = t.sched.begin;
    piece_left = t.sched.count;
    piece_lo = lo;
    uint64_t off = (t.sched.begin + lo) * t.esize, block_off = ((uint64_t)me * t.sched.block) * t.esize + off;
    int ok = 1;
    for (int p = 0; p < n && ok; p++) {
      const dccl_direct_slot *their = t.boards[p] + t.channel;
      ok = p == me || dev_direct_meet(w, cta, their, &their->seq, k, p);
      if (!ok) break;
      dccl_slot_header got = their->call, want = t.call;
      if (got.kind != want.kind || got.count != want.count || got.what != want.what || got.root != want.root) {
        want.seq = got.seq = k;
        dev_fail(w, cta, NULL, DCCL_DEV_MISMATCH, &want, &got, p);
        ok = 0;
        break;
      }
      const char *in = dev_direct_here(t, their->sendbuff, their->send_win, p);
      char *out = (char *)dev_direct_here(t, their->recvbuff, their->recv_win, p);
      switch (t.direct_op) {
        case DCCL_DIRECT_OP_REDUCESCATTER: a.srcs[p] = in + block_off; if (p == me) a.dsts[0] = out + off; break;
        case DCCL_DIRECT_OP_ALLGATHER: a.dsts[p] = out + block_off; if (p == me) a.srcs[0] = in + off; break;
        case DCCL_DIRECT_OP_BROADCAST: a.dsts[p] = out + off; if (p == t.sched.root) a.srcs[0] = in + off; break;
        case DCCL_DIRECT_OP_REDUCE: a.srcs[p] = in + off; if (p == t.sched.root) a.dsts[0] = out + off; break;
        default: a.srcs[p] = in + off; a.dsts[p] = out + off;
      }
    }
    a.nsrcs = t.direct_op == DCCL_DIRECT_OP_ALLGATHER || t.direct_op == DCCL_DIRECT_OP_BROADCAST ? 1 : n;
    a.ndsts = t.direct_op == DCCL_DIRECT_OP_REDUCESCATTER || t.direct_op == DCCL_DIRECT_OP_REDUCE ? 1 : n;
    a.own = me;
    a.round_own = 1; // as the one-shot: a premultiplied input is rounded to its type before the sum
    a.n = hi - lo;
    a.kind = t.redop.kind;
    a.pre = t.redop.pre;
    a.has_pre = t.redop.has_pre; // planned only for one scalar on every rank (an average)
    a.pre_all = 1;
    a.post_div = t.redop.post_div;
    go = ok;
    if (!ok) dccl_st_release_gpu_u64(&mine->aborted, 1); // the peers stop waiting for this rank
  }
  __syncthreads();
  if (!go) return;
  for (;;) {
    if (a.n > 0) dev_reduce_copy_for<TYPE>(a, t.redop.type, t.esize, threadIdx.x, blockDim.x);
    if (!t.sched.piece) break;
    __syncthreads(); // every thread is done with the piece before thread 0 moves `a` on
    if (threadIdx.x == 0) more = dev_direct_next_piece(t, a, &piece_at, &piece_left, &piece_lo);
    __syncthreads();
    if (!more) break;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    dccl_direct_slot *mine = t.boards[me] + t.channel;
    uint64_t k = mine->ops;
    __threadfence(); // the CTA's writes into every output, before `done`
    dccl_st_release_gpu_u64(&mine->done, k);
    for (int p = 0; p < n; p++) {
      const dccl_direct_slot *their = t.boards[p] + t.channel;
      if (p != me && !dev_direct_meet(w, cta, their, &their->done, k, p)) {
        dccl_st_release_gpu_u64(&mine->aborted, 1);
        break;
      }
    }
  }
  __syncthreads();
}

// A copy-engine collective's kernel part (dccl_ce_work): everything it reads has arrived, so it only combines or
// copies; CTA b takes the b-th 16-byte-aligned share of each range.
// Whether every rank called as this one did (a call's first round: the peers wrote their calls before their flags).
// A mismatch is recorded once per launch, naming the first such rank, as a kernel on links records one.
__device__ int dev_ce_calls_match(const dccl_dev_work *w, const dccl_ce_work &c) {
  if (!c.theirs) return 1;
  for (uint32_t q = 0; q < c.nranks; q++) {
    const volatile uint32_t *t = c.theirs + 4 * q;
    dccl_slot_header got = c.call;
    got.count = (uint64_t)t[0] | (uint64_t)t[1] << 32;
    got.what = t[2];
    got.kind = t[3] & 0xffu;
    got.root = (int32_t)(t[3] >> 8) - 1;
    if ((int32_t)q == c.own || (c.peer_only && (int32_t)q != c.peer_only - 1) ||
        (got.count == c.call.count && got.what == c.call.what && got.kind == c.call.kind && got.root == c.call.root))
      continue;
    if (atomicCAS_system(&w->status->error, 0u, (uint32_t)DCCL_DEV_RECORDING) == 0u) {
      w->status->peer = (int32_t)q;
      w->status->want = c.call;
      w->status->got = got;
      __threadfence_system();
      atomicExch_system(&w->status->error, (uint32_t)DCCL_DEV_MISMATCH);
    }
    return 0;
  }
  return 1;
}

template <int TYPE>
__device__ void dev_ce(const dccl_dev_work *w) {
  const dccl_ce_work &c = w->ce;
  __shared__ dccl_dev_args a;
  __shared__ int calls_match;
  if (threadIdx.x == 0) calls_match = dev_ce_calls_match(w, c);
  __syncthreads();
  if (!calls_match) return;
  if (c.mode == DCCL_CE_REDUCE) {
    if (threadIdx.x == 0) {
      uint64_t unit = 16 / c.esize, per = dccl_div_up(dccl_div_up(c.count[0], (uint64_t)gridDim.x), unit) * unit;
      uint64_t lo = blockIdx.x * per < c.count[0] ? blockIdx.x * per : c.count[0];
      uint64_t hi = lo + per < c.count[0] ? lo + per : c.count[0];
      for (uint32_t s = 0; s < c.n; s++) a.srcs[s] = (const char *)c.srcs[s] + lo * c.esize;
      a.dsts[0] = (char *)c.dsts[0] + lo * c.esize;
      a.nsrcs = (int)c.n;
      a.ndsts = 1;
      a.own = c.own;
      a.round_own = 1; // the direct all-reduce's bits: rank order, a premultiplied input rounded to its type
      a.pre_all = 1;   // planned only for one scalar on every rank (an average)
      a.kind = c.redop.kind;
      a.has_pre = c.redop.has_pre;
      a.pre = c.redop.pre;
      a.post_div = c.redop.post_div;
      a.n = hi - lo;
    }
    __syncthreads();
    if (a.n > 0) dev_reduce_copy_for<TYPE>(a, c.redop.type, c.esize, threadIdx.x, blockDim.x);
    return;
  }
  for (uint32_t i = 0; i < c.n; i++) {
    __syncthreads(); // every thread is done with the last copy's operands
    if (threadIdx.x == 0) {
      uint64_t per = dccl_div_up(dccl_div_up(c.count[i], (uint64_t)gridDim.x), (uint64_t)16) * 16;
      uint64_t lo = blockIdx.x * per < c.count[i] ? blockIdx.x * per : c.count[i];
      uint64_t hi = lo + per < c.count[i] ? lo + per : c.count[i];
      a.srcs[0] = (const char *)c.srcs[i] + lo;
      a.dsts[0] = (char *)c.dsts[i] + lo;
      a.ndsts = 1;
      a.n = hi - lo;
    }
    __syncthreads();
    if (a.n > 0) dev_copy(a, 1, threadIdx.x, blockDim.x);
  }
}

template <int TYPE>
__device__ __forceinline__ void dev_kernel_body(const dccl_dev_work *w) {
  __shared__ dev_cta cta;
  if (w->ce.mode != DCCL_CE_NONE) {
    dev_ce<TYPE>(w);
    __syncthreads();
    if (threadIdx.x == 0 && w->done_ctas) {
      __threadfence_system();
      atomicAdd_system(w->done_ctas, 1u);
    }
    return;
  }
  int first = w->cta_first[blockIdx.x], ntasks = w->cta_ntasks[blockIdx.x];
  const dccl_dev_task *tasks = w->tasks ? w->tasks : w->inline_tasks;
  for (int k = 0; k < ntasks; k++) {
    // The task into shared memory, a word per thread (from the parameter, or from host memory).
    const uint32_t *src = (const uint32_t *)&tasks[first + k];
    for (unsigned i = threadIdx.x; i < sizeof(dccl_dev_task) / 4; i += blockDim.x) ((uint32_t *)&cta.task)[i] = src[i];
    if (threadIdx.x == 0) {
      cta.up_done = 0;
      cta.stop = 0;
    }
    __syncthreads();
    // Each connection's operation count, the sequence number its slots carry, before any half moves it.
    if (threadIdx.x < 2 * DCCL_DEV_CONN_SLOTS) {
      int i = threadIdx.x;
      dccl_dev_conn *c = i < DCCL_DEV_CONN_SLOTS ? cta.task.recv[i] : cta.task.send[i - DCCL_DEV_CONN_SLOTS];
      cta.seq[0][i] = cta.seq[1][i] = c ? c->nops : 0;
    }
    __syncthreads();
    if (cta.task.sched.algo == DCCL_SCHED_DIRECT) {
      dev_direct<TYPE>(w, &cta);
      __syncthreads();
      if (cta.stop) break;
      continue;
    }
    int two = cta.task.nsteps[1] > 0;
    dev_half h;
    int s = two && threadIdx.x >= blockDim.x / 2;
    h.nthreads = two ? blockDim.x / 2 : blockDim.x;
    h.tid = threadIdx.x - s * h.nthreads;
    h.bar = 1 + s;
    dev_run_stream<TYPE>(w, &cta, s, h);
    __syncthreads();
    if (cta.stop) break;
    if (threadIdx.x < 2 * DCCL_DEV_CONN_SLOTS) {
      int i = threadIdx.x;
      dccl_dev_conn *c = i < DCCL_DEV_CONN_SLOTS ? cta.task.recv[i] : cta.task.send[i - DCCL_DEV_CONN_SLOTS];
      if (c) c->nops = cta.seq[0][i] + 1;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0 && w->done_ctas) {
    __threadfence_system();
    atomicAdd_system(w->done_ctas, 1u);
  }
}

// The kernels: one per element type, and one for groups that mix types. The host finds them by these names. The
// launch comes by value; __grid_constant__ lets the body address it in place instead of copying it per thread.
#define DCCL_DEV_KERNEL(name, type)                                                                  \
  extern "C" __global__ void __launch_bounds__(DCCL_DEV_THREADS, 1) name(const __grid_constant__ dccl_dev_work w) { \
    dev_kernel_body<type>(&w);                                                                       \
  }
DCCL_DEV_KERNEL(dccl_kernel_any, DCCL_DEV_ANY_TYPE)
DCCL_DEV_KERNEL(dccl_kernel_t0, 0)
DCCL_DEV_KERNEL(dccl_kernel_t1, 1)
DCCL_DEV_KERNEL(dccl_kernel_t2, 2)
DCCL_DEV_KERNEL(dccl_kernel_t3, 3)
DCCL_DEV_KERNEL(dccl_kernel_t4, 4)
DCCL_DEV_KERNEL(dccl_kernel_t5, 5)
DCCL_DEV_KERNEL(dccl_kernel_t6, 6)
DCCL_DEV_KERNEL(dccl_kernel_t7, 7)
DCCL_DEV_KERNEL(dccl_kernel_t8, 8)
DCCL_DEV_KERNEL(dccl_kernel_t9, 9)
DCCL_DEV_KERNEL(dccl_kernel_t10, 10)
DCCL_DEV_KERNEL(dccl_kernel_t11, 11)
