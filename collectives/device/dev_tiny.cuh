// The tiny kernels (kernels.cu; collectives/device/kernel_choice.h, dccl_kernel_tiny): launches whose CTA b runs
// task b, one one-shot all-reduce of a single LL step of at most DCCL_DEV_TINY_BYTES, as one warp (and a second
// that only counts the CTA's exit). It speaks the LL one-shot's protocol exactly (the same slots, headers, flags,
// counters and checks: a peer on the LL path or on this one cannot tell them apart) without its machinery: no task
// copied into shared memory, no schedule, no barrier but the warp's and the exit count's; lane i holds link i. An
// 8-byte all-reduce between two processes under MPS spent about 6.6 us above kernels that only meet (dev_latency
// meet+sync), mostly in that machinery; this path took 1.1 us of it as a branch of the LL kernels
// (docs/performance.md).
#ifndef DCCL_DEV_TINY_CUH_
#define DCCL_DEV_TINY_CUH_

#include "collectives/device/dev_ll.cuh"
#include "collectives/device/kernel_choice.h"

// Lanes over the lines of every link's slot: line l of link p is item p * lines + l.
template <typename Body>
__device__ __forceinline__ void dev_tiny_lines(int lane, int npeers, uint32_t lines, Body body) {
  for (uint32_t j = lane; j < npeers * lines; j += 32) body(j / lines, j % lines);
}

// The 4 bytes at `p` (4-byte aligned), or the `left` of them that belong to the input, the rest 0.
__device__ __forceinline__ uint32_t dev_tiny_word(const char *p, uint64_t left) {
  if (left >= 4) return *(const uint32_t *)p;
  uint32_t w = 0;
  for (uint32_t b = 0; b < left; b++) w |= (uint32_t)(uint8_t)p[b] << 8 * b;
  return w;
}

// Warp 0 tells warp 1 (dev_tiny_count) that the links' counters are written, or that the task failed: the arrival
// releases warp 0's writes to the barrier's waiter (the PTX memory model's barrier synchronisation).
#define DEV_TINY_BAR 1
__device__ __forceinline__ void dev_tiny_counted() {
  __syncwarp();
  asm volatile("bar.arrive %0, %1;" ::"n"(DEV_TINY_BAR), "n"(DCCL_DEV_TINY_THREADS) : "memory");
}

// Warp 0 of a tiny kernel: the task. Every way out passes dev_tiny_counted once. Work: the launch's parameter
// (struct dccl_dev_work, or the slim kernels' struct dccl_dev_slim_work), read for CTA b's task b and rank words.
template <int TYPE, typename Work>
__device__ void dev_tiny(const Work *w, dev_cta *cta) {
  const int lane = threadIdx.x;
  const dccl_dev_task *t = &w->inline_tasks[blockIdx.x];
  const int npeers = t->sched.npeers;
  dccl_prim_step step;
  dccl_oneshot_step(&t->sched, 0, &step); // the send step; the receive step has the same counts and offsets
  const uint64_t bytes = step.nelem * t->esize;
  const uint32_t lines = dccl_ll_units(bytes) / 2;
  // The input, where no premultiply applies and it is 4-byte aligned, straight into registers (word `lane`) as the
  // kernel starts, beside the links' counters: staged after them, its load added a round trip to the path.
  const char *in = t->sendbuff + step.in_off * t->esize;
  const int raw = !t->redop.has_pre && ((uintptr_t)in & 3) == 0;
  uint32_t word = 0;
  if (raw && 4 * (uint64_t)lane < bytes) word = dev_tiny_word(in + 4 * lane, bytes - 4 * lane);

  // Each lane its link: the links' pointers and the call, where the failure paths (dev_fail, dev_wait,
  // dev_check_header) and the LL lines' helpers look for them, and its counters in registers. Every load goes out
  // before any store that waits on one: a store (or a lane's branch) waiting on a load puts the loads after it one
  // round trip later. So the link pointers are loaded before npeers is known and masked after, the rank's words are
  // loaded by every lane (uniform) beside them and stored by lane 31 last, and the links' counters follow their
  // pointers at once.
  dccl_dev_conn *r = NULL, *s = NULL;
  uint64_t rpos = 0, rseq = 0, spos = 0, sseen = 0, sseq = 0;
  int above = 0;
  if (lane < DCCL_DEV_CONN_SLOTS) {
    r = t->recv[lane];
    s = t->send[lane];
  }
  const dccl_dev_rank_words words = w->rank[w->cta_rank[blockIdx.x]]; // its index's load beside the pointers'
  if (lane >= npeers) r = s = NULL;
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
  if (lane < DCCL_DEV_CONN_SLOTS) {
    cta->task.recv[lane] = r;
    cta->task.send[lane] = s;
  }
  if (lane == 31) {
    cta->words = words;
    cta->task.call = t->call;
    cta->stop = 0;
  }
  DEV_STAGE(cta, DEV_STAGE_TASK);
  // The staged input, every send's payload and the own source: as it is, or premultiplied and rounded to the type.
  if (raw) {
    if (4 * (uint64_t)lane < bytes) ((uint32_t *)cta->ll_send[0])[lane] = word;
  } else {
    if (lane == 0) {
      uint64_t pre = t->redop.pre;
      if (t->redop.pre_ptr) {
        pre = 0;
        memcpy(&pre, (const void *)t->redop.pre_ptr, t->esize);
      }
      dev_stage_args(cta->args[0], in, cta->ll_send[0], step.nelem, t->redop, pre);
    }
    __syncwarp();
    dev_reduce_small<TYPE>(cta->args[0], t->esize, lane, 32);
  }
  __syncwarp(); // the links and the words in shared memory, seen by every lane before a wait may report through them

  // Room in every send's FIFO (`head` as last read usually says so), then the lines, then `tail`, before any
  // reception: a peer that expected bulk must still see the slot come.
  int ok = 1;
  if (s && spos - sseen >= s->desc.nslots) {
    const uint64_t *head = dccl_conn_word((char *const *)s->regions, s->desc.head);
    const uint64_t nslots = s->desc.nslots;
    const int gpu = s->same_gpu;
    ok = dev_wait(cta, s, [&] { return spos - (sseen = conn_acquire(gpu, head)) < nslots; });
  }
  if (!__all_sync(~0u, ok)) return dev_tiny_counted();
  DEV_STAGE(cta, DEV_STAGE_ACQUIRED);
  __syncwarp(); // the staged payload and every link's slots, seen by every lane
  dev_tiny_lines(lane, npeers, lines, [&](int p, uint32_t l) { dev_ll_store(cta, 0, 0, p, l, bytes); });
  if (s) *(volatile uint64_t *)dccl_conn_word((char *const *)s->regions, s->desc.tail) = spos + 1;
  DEV_STAGE(cta, DEV_STAGE_SENT);

  // Every reception's lines into shared memory (dev_ll_poll), then each lane checks its link's header.
  dev_tiny_lines(lane, npeers, lines, [&](int p, uint32_t l) {
    if (ok) ok = dev_ll_poll(cta, p, l);
  });
  const int polled = __all_sync(~0u, ok);
  __syncwarp();
  int good = 1;
  if (r) {
    if (cta->ll_bulk_came[lane]) {
      good = dev_bulk_came(cta, r, rpos, rseq, bytes);
    } else if (polled && !cta->stop) {
      dccl_slot_header head;
      dccl_ll_header_from_words(cta->ll_head[lane], &head);
      good = dev_check_header(cta, r, &head, rseq, bytes);
    } else {
      good = 0;
    }
  }
  if (s) { // the send went out whatever came back
    s->pos = spos + 1;
    s->peer_seen = sseen;
  }
  if (!__all_sync(~0u, good)) return dev_tiny_counted();
  DEV_STAGE(cta, DEV_STAGE_DATA_IN);

  // The reception handed back (its lines are in shared memory) and the operation counted on both links before the
  // reduction, so the exit count's fence (warp 1) runs while this warp reduces.
  if (r) {
    *(volatile uint64_t *)dccl_conn_word((char *const *)r->regions, r->desc.head) = rpos + 1;
    r->pos = rpos + 1;
    r->nops = rseq + 1;
    s->nops = sseq + 1;
  }
  dev_tiny_counted();
  DEV_STAGE(cta, DEV_STAGE_RELEASED);
  const uint32_t above_mask = __ballot_sync(~0u, above);
  const int own = above_mask ? __ffs(above_mask) - 1 : npeers; // the own source's place in rank order
  void *out = t->recvbuff + step.out_off * t->esize;
  const uint32_t kind = t->redop.kind, post_div = t->redop.post_div;
  dev_oneshot_reduce<TYPE>(cta, npeers, own, kind, post_div, out, step.nelem, lane, 32);
  DEV_STAGE(cta, DEV_STAGE_REDUCED);
  DEV_AGAIN(cta, dev_oneshot_reduce<TYPE>(cta, npeers, own, kind, post_div, out, step.nelem, lane, 32)); // warm
}

// Warp 1 of a tiny kernel: once warp 0 has written the links' counters back (or given up), the CTA's exit counted
// for the host (dev_count_exit). Its fence waits for those writes to reach the GPU's memory; on a warp of its own it
// overlaps warp 0's reduction and output instead of following them (it cost 0.75 us at the end of the path).
__device__ __forceinline__ void dev_tiny_count(dev_cta *cta) {
  asm volatile("bar.sync %0, %1;" ::"n"(DEV_TINY_BAR), "n"(DCCL_DEV_TINY_THREADS) : "memory");
  if (threadIdx.x == DCCL_DEV_TINY_THREADS - 32 && cta->words.done_ctas) dev_count_exit(cta->words.done_ctas);
}

#endif
