// The tiny path of the LL kernels (collectives/device/kernel_choice.h, dccl_kernel_tiny): launches whose every CTA
// runs one one-shot all-reduce of a single LL step of at most DCCL_DEV_TINY_BYTES, as one warp. It speaks the LL
// one-shot's protocol exactly (the same slots, headers, flags, counters and checks: a peer on the LL path or on
// this one cannot tell them apart) without its machinery: no task copied into shared memory, no schedule, no
// barrier but the warp's; lane i holds link i. An 8-byte all-reduce between two processes under MPS spent about 6.6
// us above kernels that only meet (dev_latency meet+sync), mostly in that machinery; this path takes 1.1 us of it
// (docs/performance.md).
#ifndef DCCL_DEV_TINY_CUH_
#define DCCL_DEV_TINY_CUH_

#include "collectives/device/dev_ll.cuh"

// Lanes over the lines of every link's slot: line l of link p is item p * lines + l.
template <typename Body>
__device__ __forceinline__ void dev_tiny_lines(int lane, int npeers, uint32_t lines, Body body) {
  for (uint32_t j = lane; j < npeers * lines; j += 32) body(j / lines, j % lines);
}

template <int TYPE>
__device__ void dev_tiny(const dccl_dev_work *w, dev_cta *cta) {
  const int lane = threadIdx.x;
  const dccl_dev_task *t = &w->inline_tasks[w->cta_first[blockIdx.x]];
  const int npeers = t->sched.npeers;
  dccl_prim_step step;
  dccl_oneshot_step(&t->sched, 0, &step); // the send step; the receive step has the same counts and offsets
  const uint64_t bytes = step.nelem * t->esize;
  const uint32_t lines = dccl_ll_units(bytes) / 2;

  // Each lane its link: the links' pointers and the call, where the failure paths (dev_fail, dev_wait,
  // dev_check_header) look for them, and its counters in registers.
  dccl_dev_conn *r = NULL, *s = NULL;
  uint64_t rpos = 0, rseq = 0, spos = 0, sseen = 0, sseq = 0;
  int above = 0;
  if (lane < DCCL_DEV_CONN_SLOTS) {
    r = lane < npeers ? t->recv[lane] : NULL;
    s = lane < npeers ? t->send[lane] : NULL;
    cta->task.recv[lane] = r;
    cta->task.send[lane] = s;
  }
  if (lane == 31) {
    cta->words = w->rank[w->cta_rank[blockIdx.x]];
    cta->task.call = t->call;
    cta->stop = 0;
  }
  if (r) {
    rpos = r->pos;
    rseq = r->nops;
    spos = s->pos;
    sseen = s->peer_seen;
    sseq = s->nops;
    above = r->peer > t->rank;
    cta->ll_in_slot[lane] = dccl_conn_ll_slot(&r->desc, (char *const *)r->regions, rpos);
    cta->ll_in_pos[lane] = rpos;
    cta->seq[0][lane] = rseq;
    cta->ll_bulk_came[lane] = 0;
    cta->ll_out_slot[0][lane] = dccl_conn_ll_slot(&s->desc, (char *const *)s->regions, spos);
    cta->ll_out_pos[0][lane] = spos;
    cta->seq[0][DCCL_DEV_CONN_SLOTS + lane] = sseq;
  }
  DEV_STAGE(cta, DEV_STAGE_TASK);
  if (lane == 0) { // the input, premultiplied and rounded to the type: every send's payload and the own source
    dccl_dev_args &a = cta->args[0];
    uint64_t pre = t->redop.pre;
    if (t->redop.pre_ptr) {
      pre = 0;
      memcpy(&pre, (const void *)t->redop.pre_ptr, t->esize);
    }
    a.srcs[0] = t->sendbuff + step.in_off * t->esize;
    a.nsrcs = 1;
    a.own = 0;
    a.dsts[0] = cta->ll_send[0];
    a.ndsts = 1;
    a.round_own = a.pre_all = a.post_div = 0;
    a.n = step.nelem;
    a.kind = t->redop.kind;
    a.pre = pre;
    a.has_pre = t->redop.has_pre;
  }
  __syncwarp();
  dev_reduce_small<TYPE>(cta->args[0], t->esize, lane, 32);

  // Room in every send's FIFO (`head` as last read usually says so), then the lines, then `tail`, before any
  // reception: a peer that expected bulk must still see the slot come.
  int ok = 1;
  if (s && spos - sseen >= s->desc.nslots) {
    const uint64_t *head = dccl_conn_word((char *const *)s->regions, s->desc.head);
    const uint64_t nslots = s->desc.nslots;
    const int gpu = s->same_gpu;
    ok = dev_wait(w, cta, s, [&] { return spos - (sseen = conn_acquire(gpu, head)) < nslots; });
  }
  if (!__all_sync(~0u, ok)) return;
  DEV_STAGE(cta, DEV_STAGE_ACQUIRED);
  __syncwarp(); // the staged payload and every link's slots, seen by every lane
  dev_tiny_lines(lane, npeers, lines, [&](int p, uint32_t l) {
    uint32_t d[2];
    if (l < DCCL_LL_HEADER_UNITS / 2) {
      uint32_t words[DCCL_LL_HEADER_UNITS];
      dccl_slot_header head = cta->task.call;
      head.bytes = bytes;
      head.seq = cta->seq[0][DCCL_DEV_CONN_SLOTS + p];
      dccl_ll_header_words(&head, words);
      d[0] = words[2 * l];
      d[1] = words[2 * l + 1];
    } else {
      const uint32_t *src = (const uint32_t *)cta->ll_send[0] + 2 * (l - DCCL_LL_HEADER_UNITS / 2);
      d[0] = src[0];
      d[1] = src[1];
    }
    dccl_ll_store_line((uint64_t *)cta->ll_out_slot[0][p] + 2 * l, d[0], d[1], dccl_ll_flag(cta->ll_out_pos[0][p]));
  });
  if (s) *(volatile uint64_t *)dccl_conn_word((char *const *)s->regions, s->desc.tail) = spos + 1;
  DEV_STAGE(cta, DEV_STAGE_SENT);

  // Every reception's lines into shared memory, each poll watching what dev_ll_receive watches: the first line
  // whether the peer sent bulk, a payload line whether the first says the slot ends before it.
  dev_tiny_lines(lane, npeers, lines, [&](int p, uint32_t l) {
    if (!ok) return;
    const dccl_dev_conn *c = cta->task.recv[p];
    const uint64_t *units = (const uint64_t *)cta->ll_in_slot[p];
    const uint32_t flag = dccl_ll_flag(cta->ll_in_pos[p]);
    uint32_t d0, d1, tries = 0;
    int beyond = 0;
    ok = dev_wait(w, cta, c, [&] {
      if (dccl_ll_load_line(units + 2 * l, flag, &d0, &d1)) return true;
      if (++tries % 16) return false;
      if (l == 0) {
        const uint64_t *bulk_unit0 =
            (const uint64_t *)dccl_conn_slot(&c->desc, (char *const *)c->regions, cta->ll_in_pos[p]);
        if (*(volatile const uint64_t *)bulk_unit0 != dccl_ll_unit(DCCL_SLOT_BULK_MARK, flag)) return false;
        cta->ll_bulk_came[p] = 1;
        cta->stop = 1;
        return true;
      }
      uint32_t b0, b1;
      if (l < DCCL_LL_HEADER_UNITS / 2 || tries % 256 || !dccl_ll_load_line(units, flag, &b0, &b1)) return false;
      beyond = dccl_ll_units((uint64_t)b1 << 32 | b0) / 2 <= l;
      return (bool)beyond;
    });
    if (cta->ll_bulk_came[p] && l == 0) ok = 0;
    if (!ok || beyond) return; // nothing to keep: the header check fails the call
    if (l < DCCL_LL_HEADER_UNITS / 2) {
      cta->ll_head[p][2 * l] = d0;
      cta->ll_head[p][2 * l + 1] = d1;
    } else {
      uint32_t *dst = (uint32_t *)cta->ll_recv[p] + 2 * (l - DCCL_LL_HEADER_UNITS / 2);
      dst[0] = d0;
      dst[1] = d1;
    }
  });
  const int polled = __all_sync(~0u, ok);
  __syncwarp();
  int good = 1;
  if (r) {
    if (cta->ll_bulk_came[lane]) {
      good = dev_bulk_came(w, cta, r, rpos, rseq, bytes);
    } else if (polled && !cta->stop) {
      dccl_slot_header head;
      dccl_ll_header_from_words(cta->ll_head[lane], &head);
      good = dev_check_header(w, cta, r, &head, rseq, bytes);
    } else {
      good = 0;
    }
  }
  if (s) { // the send went out whatever came back
    s->pos = spos + 1;
    s->peer_seen = sseen;
  }
  if (!__all_sync(~0u, good)) return;
  DEV_STAGE(cta, DEV_STAGE_DATA_IN);

  // The sources in rank order, the own one (the staged input) before the first link whose peer ranks above.
  const uint32_t above_mask = __ballot_sync(~0u, above);
  const int own = above_mask ? __ffs(above_mask) - 1 : npeers;
  dccl_dev_args &b = cta->args[1];
  if (r) b.srcs[lane + (lane >= own)] = cta->ll_recv[lane];
  if (lane == 31) {
    b.srcs[own] = cta->ll_send[0];
    b.nsrcs = npeers + 1;
    b.own = own;
    b.round_own = b.pre_all = b.has_pre = 0;
    b.dsts[0] = t->recvbuff + step.out_off * t->esize;
    b.ndsts = 1;
    b.n = step.nelem;
    b.kind = t->redop.kind;
    b.post_div = t->redop.post_div;
  }
  __syncwarp();
  dev_reduce_small<TYPE>(b, t->esize, lane, 32);
  DEV_STAGE(cta, DEV_STAGE_REDUCED);
  if (r) { // the reception handed back (its lines are in shared memory), and the operation counted on both links
    *(volatile uint64_t *)dccl_conn_word((char *const *)r->regions, r->desc.head) = rpos + 1;
    r->pos = rpos + 1;
    r->nops = rseq + 1;
    s->nops = sseq + 1;
  }
  DEV_STAGE(cta, DEV_STAGE_RELEASED);
}

#endif
