// The device executor's LL steps (collectives/device/kernels.cu). Operations whose steps all fit DCCL_DEV_LL_BYTES
// speak LL (task.proto): every 8-byte unit of a position's LL slot carries its own flag, so the producer's threads
// write their lines with no fence and no counter to publish, and the consumer's threads poll them. The payload goes
// through shared memory (ll_send per half, ll_recv per link: the tree's two streams use disjoint links), so the
// reduction is the bulk path's. Ranks whose calls differ may choose different protocols for one position: each
// consumer also watches the other protocol's slot, so the mismatch is reported, not waited on.
#ifndef DCCL_DEV_LL_CUH_
#define DCCL_DEV_LL_CUH_

#include "collectives/device/dev_cta.cuh"

// Thread 0, where a peer sent the slot at `pos` as LL while this rank expected bulk: their calls differ (or their
// DCCL_PROTO). Reports the mismatch from the LL slot's header and returns 0. Out of line: it is cold, and inlined
// its registers would crowd the steps' hot path.
__device__ __noinline__ int dev_ll_came(dev_cta *cta, const dccl_dev_conn *c, uint64_t pos,
                                        uint64_t want_seq, uint64_t bytes) {
  const uint64_t *units = (const uint64_t *)dccl_conn_ll_slot(&c->desc, (char *const *)c->regions, pos);
  uint32_t words[DCCL_LL_HEADER_UNITS], flag = dccl_ll_flag(pos);
  for (uint32_t i = 0; i < DCCL_LL_HEADER_UNITS; i += 2)
    if (!dev_wait(cta, c, [&] { return dccl_ll_load_line(units + i, flag, &words[i], &words[i + 1]); })) return 0;
  dccl_slot_header got;
  dccl_ll_header_from_words(words, &got);
  dev_other_protocol(cta, c, &got, want_seq, bytes);
  return 0;
}

// Thread 0, where a peer sent the slot at `pos` as bulk while this CTA polled LL lines (their calls differ, or their
// DCCL_PROTO): reports the mismatch from the bulk header, once `tail` (release) publishes it, and returns 0. Cold,
// so out of line.
__device__ __noinline__ int dev_bulk_came(dev_cta *cta, const dccl_dev_conn *c, uint64_t pos,
                                          uint64_t want_seq, uint64_t bytes) {
  const uint64_t *tail = dccl_conn_word((char *const *)c->regions, c->desc.tail);
  const dccl_slot_header *bh = (const dccl_slot_header *)(dccl_conn_slot(&c->desc, (char *const *)c->regions, pos) + 8);
  cta->stop = 0; // set only to free the other pollers: the report below is what stops the launch
  if (dev_wait(cta, c, [&] { return conn_acquire(c->same_gpu, tail) > pos; })) {
    dccl_slot_header got = *bh;
    dev_other_protocol(cta, c, &got, want_seq, bytes);
  }
  return 0;
}

// Line l of link i's LL reception, polled into shared memory (the header's words for the first
// DCCL_LL_HEADER_UNITS / 2 lines, the payload's into ll_recv[i] after). A peer whose call differs may send what never
// fills this line. The first line's poller also watches the bulk slot (the peer sent bulk): it stops the CTA and
// the header check reports the mismatch. A payload line's poller now and then reads the first line, whose bytes may
// say the slot ends before this line: it stops waiting, keeps nothing, and the header check reports the counts. Both
// only every 16th try: each is one more read (over PCIe on staged links) between two of the line's. Returns 0 to
// stop.
__device__ __forceinline__ int dev_ll_poll(dev_cta *cta, int i, uint32_t l) {
  const dccl_dev_conn *c = cta->task.recv[i];
  const uint64_t *units = (const uint64_t *)cta->ll_in_slot[i];
  const uint32_t flag = dccl_ll_flag(cta->ll_in_pos[i]);
  uint32_t d0, d1, tries = 0;
  int beyond = 0;
  int ok = dev_wait(cta, c, [&] {
    if (dccl_ll_load_line(units + 2 * l, flag, &d0, &d1)) return true;
    if (++tries % 16) return false;
    if (l == 0) {
      const uint64_t *bulk_unit0 =
          (const uint64_t *)dccl_conn_slot(&c->desc, (char *const *)c->regions, cta->ll_in_pos[i]);
      if (*(volatile const uint64_t *)bulk_unit0 != dccl_ll_unit(DCCL_SLOT_BULK_MARK, flag)) return false;
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
  if (!ok || beyond) return ok;
  if (l < DCCL_LL_HEADER_UNITS / 2) {
    cta->ll_head[i][2 * l] = d0;
    cta->ll_head[i][2 * l + 1] = d1;
  } else {
    uint32_t *dst = (uint32_t *)cta->ll_recv[i] + 2 * (l - DCCL_LL_HEADER_UNITS / 2);
    dst[0] = d0;
    dst[1] = d1;
  }
  return ok;
}

// Line l of link i's LL send, of the step's parity `odd`: the header's words (the call, `bytes`, the link's
// sequence number of `half`) for the first DCCL_LL_HEADER_UNITS / 2 lines, the payload staged in ll_send[half]
// after, every unit with its flag: nothing to fence.
__device__ __forceinline__ void dev_ll_store(dev_cta *cta, int half, int odd, int i, uint32_t l, uint64_t bytes) {
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
  dccl_ll_store_line((uint64_t *)cta->ll_out_slot[odd][i] + 2 * l, d[0], d[1], dccl_ll_flag(cta->ll_out_pos[odd][i]));
}

// The CTA polls the step's LL receptions into shared memory: thread j reads lines j, j + nthreads, ... of every
// slot (dev_ll_poll). Then thread 0 checks the headers. Returns 0 to stop. The generic kernels call this and
// dev_ll_send out of line (the _out forms below): inlined, their registers crowded the bulk steps' reduction loop
// (ptxas spilled 468 bytes in dccl_kernel_t5 against 56 before LL grew; 100 with them out of line). The LL kernels
// inline them: a call's cold jump costs a small operation more.
__device__ __forceinline__ int dev_ll_receive(dev_cta *cta, int half, uint32_t rmask,
                                           uint64_t bytes, const dev_half &h) {
  const dccl_dev_task &t = cta->task;
  uint32_t lines = dccl_ll_units(bytes) / 2;
  int ok = 1;
  for (uint32_t m = rmask; m && ok;) {
    int i = dev_next_link(&m);
    for (uint32_t l = h.tid; l < lines && ok; l += h.nthreads) ok = dev_ll_poll(cta, i, l);
  }
  half_barrier(h);
  __shared__ int go_of[2];
  int &go = go_of[half];
  if (h.tid == 0) {
    go = !cta->stop;
    for (uint32_t m = rmask; m;) {
      int i = dev_next_link(&m);
      const dccl_dev_conn *c = t.recv[i];
      if (cta->ll_bulk_came[i]) {
        go = dev_bulk_came(cta, c, cta->ll_in_pos[i], cta->seq[half][i], bytes);
        break;
      }
      if (!go) break;
      dccl_slot_header head;
      dccl_ll_header_from_words(cta->ll_head[i], &head);
      go = dev_check_header(cta, c, &head, cta->seq[half][i], bytes);
    }
  }
  half_barrier(h);
  return go;
}

// The CTA writes the staged payload into every LL send's slot (of the step's parity): thread j lines j, j +
// nthreads, ... (dev_ll_store).
__device__ __forceinline__ void dev_ll_send(dev_cta *cta, int half, int odd, uint32_t smask, uint64_t bytes,
                                         const dev_half &h) {
  uint32_t lines = dccl_ll_units(bytes) / 2;
  for (uint32_t m = smask; m;) {
    int i = dev_next_link(&m);
    for (uint32_t l = h.tid; l < lines; l += h.nthreads) dev_ll_store(cta, half, odd, i, l, bytes);
  }
}

// The one-shot's reduction, element i by thread i % nthreads: the own input staged in ll_send[0] (its premultiply
// applied and rounded to the type exactly as the reduction would) and every link's reception in ll_recv, in rank
// order, `own` being the own input's place (before the first link whose peer ranks above this one), read where they
// lie in shared memory. An operand list of their addresses (dev_reduce_small) made each source a chain of two
// loads: the tiny path's reduction took 0.71 us that way and 0.39 this way (stage timing, docs/performance.md).
template <int TYPE>
__device__ __forceinline__ void dev_oneshot_reduce(dev_cta *cta, int npeers, int own, uint32_t kind,
                                                   uint32_t post_div, void *out, uint64_t n, int tid, int nthreads) {
  typedef typename dev_elem<TYPE>::R R;
  typedef typename R::T T;
  for (uint64_t i = tid; i < n; i += nthreads)
    ((T *)out)[i] = dev_fold<R>(npeers + 1, kind, post_div, [&](int s) {
      const char *src = s == own ? cta->ll_send[0] : cta->ll_recv[s - (s > own)];
      return R::widen(((const T *)src)[i]);
    });
}

// Warp 0's lanes, link i's lane with `above` (its peer ranks above this rank): what task t's one-shot reduction
// needs, into args[1] (dev_oneshot_reduce reads it): the own input's place in rank order, `n` elements into `out`.
__device__ __forceinline__ void dev_oneshot_sources(dev_cta *cta, const dccl_dev_task &t, int lane, int above,
                                                    void *out, uint64_t n) {
  const uint32_t above_mask = __ballot_sync(~0u, above);
  dccl_dev_args &b = cta->args[1];
  if (lane == 31) {
    b.own = above_mask ? __ffs(above_mask) - 1 : t.sched.npeers;
    b.dsts[0] = out;
    b.n = n;
    b.kind = t.redop.kind;
    b.post_div = t.redop.post_div;
  }
}

__device__ __noinline__ int dev_ll_receive_out(dev_cta *cta, int half, uint32_t rmask,
                                               uint64_t bytes, const dev_half &h) {
  return dev_ll_receive(cta, half, rmask, bytes, h);
}
__device__ __noinline__ void dev_ll_send_out(dev_cta *cta, int half, int odd, uint32_t smask, uint64_t bytes,
                                             const dev_half &h) {
  dev_ll_send(cta, half, odd, smask, bytes, h);
}

// Thread 0, after an LL step: the positions move on; `tail` follows the sends (relaxed: no consumer of this slot
// reads it; a later bulk operation's consumer waits for that operation's own release), and the receptions go back,
// `head` relaxed too: the CTA's loads of the slot are done (their values reached shared memory before the
// barrier), so nothing is left for a fence to order before the producer may write the slot again. A release
// here was a fence per step, at system scope on staged links.
__device__ void dev_ll_release(dev_cta *cta, uint32_t smask, uint32_t rmask) {
  const dccl_dev_task &t = cta->task;
  for (uint32_t m = smask; m;) {
    dccl_dev_conn *c = t.send[dev_next_link(&m)];
    *(volatile uint64_t *)dccl_conn_word((char *const *)c->regions, c->desc.tail) = c->pos + 1;
    c->pos++;
  }
  for (uint32_t m = rmask; m;) {
    dccl_dev_conn *c = t.recv[dev_next_link(&m)];
    *(volatile uint64_t *)dccl_conn_word((char *const *)c->regions, c->desc.head) = c->pos + 1;
    c->pos++;
  }
}

#endif
