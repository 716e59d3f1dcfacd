// The device executor: a kernel runs a launch's tasks (collectives/device/dev_work.h). A task is one channel of
// one operation; it runs the schedule of pure/schedule.h step by step, exactly as collectives/executor.c does on
// the host: per step, thread 0 of the CTA waits until every FIFO the step reads has a slot and every FIFO it
// writes has room, the CTA's threads reduce and copy with 16-byte accesses, and thread 0 publishes. A channel with
// two streams (the trees' up and down) runs them in the two halves of the CTA, each with its own barrier, so
// neither can block the other. No CTA ever waits for another CTA of its launch. The LL steps are in dev_ll.cuh,
// the direct collectives in dev_direct.cuh, the copy-engine collectives' part in dev_ce.cuh, what they share in
// dev_cta.cuh.
//
// Memory ordering (docs/design.md): a producer's threads write a slot, the CTA meets at a barrier, and thread 0
// publishes `tail` with a fence and a release store; the consumer's thread 0 reads `tail` with an acquire before
// its CTA (after a barrier) reads the slot, and hands the slot back by a release store of `head`. The scope is
// the GPU's when both ends of the link are kernels on one GPU, the system's otherwise (dccl_dev_conn.same_gpu).
#include <stdint.h>

#include "collectives/device/dev_ce.cuh"
#include "collectives/device/dev_cta.cuh"
#include "collectives/device/dev_direct.cuh"
#include "collectives/device/dev_ll.cuh"
#include "collectives/device/dev_tiny.cuh"
#include "collectives/device/kernel_choice.h"

// Thread 0: waits for the step's FIFOs and fills the half's operands (for LL, the slots the CTA polls and writes
// next; the sends' under the step's parity `odd`). Returns 0 to stop. LL: built for LL steps only.
template <int LL>
__device__ int dev_step_acquire(dev_cta *cta, int half, int odd, const dccl_prim_step &st) {
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
  for (uint32_t m = rmask; m;) {
    int i = dev_next_link(&m);
    dccl_dev_conn *c = t.recv[i];
    uint64_t pos = c->pos;
    if (!own_rank_placed && c->peer > t.rank) { // one-shot: the own input at its rank's place
      a.own = a.nsrcs;
      a.srcs[a.nsrcs++] = in;
      own_rank_placed = 1;
    }
    if (LL || t.proto == DCCL_PROTO_LL) { // the CTA polls the LL slot next (dev_ll_receive), into shared memory
      cta->ll_in_slot[i] = dccl_conn_ll_slot(&c->desc, (char *const *)c->regions, pos);
      cta->ll_in_pos[i] = pos;
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
      if (!dev_wait(cta, c, [&] { return (seen = conn_acquire(gpu, tail)) > pos; })) return 0;
      c->peer_seen = seen;
    }
    if (c->desc.ll_bytes && *(volatile const uint64_t *)slot != dccl_ll_unit(DCCL_SLOT_BULK_MARK, dccl_ll_flag(pos)))
      return dev_ll_came(cta, c, pos, cta->seq[half][i], bytes);
    if (!dev_check_header(cta, c, (const dccl_slot_header *)(slot + 8), cta->seq[half][i], bytes)) return 0;
    a.srcs[a.nsrcs++] = slot + DCCL_SLOT_HEAD_BYTES;
  }
  if (!own_rank_placed && in) {
    a.own = a.nsrcs;
    a.srcs[a.nsrcs++] = in;
  }
  if (st.flags & DCCL_PRIM_RANK_ORDER) a.round_own = 1;
  if (st.flags & DCCL_PRIM_OUTPUT) a.dsts[a.ndsts++] = t.recvbuff + st.out_off * t.esize;
  int ll_staged = 0;
  for (uint32_t m = smask; m;) {
    int i = dev_next_link(&m);
    dccl_dev_conn *c = t.send[i];
    uint64_t pos = c->pos, nslots = c->desc.nslots;
    int gpu = c->same_gpu;
    const uint64_t *head = dccl_conn_word((char *const *)c->regions, c->desc.head);
    uint64_t seen = c->peer_seen; // `head` as last read: room then is room now
    if (pos - seen >= nslots) {
      if (!dev_wait(cta, c, [&] { return pos - (seen = conn_acquire(gpu, head)) < nslots; })) return 0;
      c->peer_seen = seen;
    }
    if (LL || t.proto == DCCL_PROTO_LL) { // staged once in shared memory, written to every link's LL slot after
      cta->ll_out_slot[odd][i] = dccl_conn_ll_slot(&c->desc, (char *const *)c->regions, pos);
      cta->ll_out_pos[odd][i] = pos;
      if (!ll_staged) a.dsts[a.ndsts++] = cta->ll_send[half];
      ll_staged = 1;
      continue;
    }
    a.dsts[a.ndsts++] = dccl_conn_slot(&c->desc, (char *const *)c->regions, pos) + DCCL_SLOT_HEAD_BYTES;
  }
  a.n = st.nelem;
  a.kind = t.redop.kind;
  a.pre = t.redop.pre; // a scalar in GPU memory was read at the task's start
  // The tree root forwards data that already had its input's premultiply: a plain copy.
  a.has_pre = t.redop.has_pre && !(st.flags & DCCL_PRIM_INPUT_FROM_OUTPUT);
  a.post_div = (st.flags & DCCL_PRIM_POST) ? t.redop.post_div : 0;
  return 1;
}

// Thread 0: publishes the step's sends and hands its receptions back.
__device__ void dev_step_release(dev_cta *cta, int half, const dccl_prim_step &st) {
  const dccl_dev_task &t = cta->task;
  uint32_t rmask, smask;
  dev_step_masks(st, t.sched.npeers, &rmask, &smask);
  // Every thread's slot writes (seen through the barrier) before the counters: a fence at the widest scope any of
  // the step's links needs.
  int all_gpu = 1;
  for (uint32_t m = smask; m;) all_gpu &= t.send[dev_next_link(&m)]->same_gpu;
  for (uint32_t m = rmask; m;) all_gpu &= t.recv[dev_next_link(&m)]->same_gpu;
  dev_fence(all_gpu);
  for (uint32_t m = smask; m;) {
    int i = dev_next_link(&m);
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
  for (uint32_t m = rmask; m;) {
    dccl_dev_conn *c = t.recv[dev_next_link(&m)];
    conn_release(c->same_gpu, dccl_conn_word((char *const *)c->regions, c->desc.head), c->pos + 1);
    c->pos++;
  }
}

// An LL step's receptions and sends: inlined in the LL kernels, out of line in the generic ones (dev_ll.cuh).
template <int LL>
__device__ __forceinline__ int dev_ll_in(dev_cta *cta, int half, uint32_t rmask, uint64_t bytes,
                                         const dev_half &h) {
  if constexpr (LL)
    return dev_ll_receive(cta, half, rmask, bytes, h);
  else
    return dev_ll_receive_out(cta, half, rmask, bytes, h);
}
template <int LL>
__device__ __forceinline__ void dev_ll_out(dev_cta *cta, int half, int odd, uint32_t smask, uint64_t bytes,
                                           const dev_half &h) {
  if constexpr (LL)
    dev_ll_send(cta, half, odd, smask, bytes, h);
  else
    dev_ll_send_out(cta, half, odd, smask, bytes, h);
}

template <int TYPE, int LL>
__device__ void dev_run_stream(dev_cta *cta, int s, const dev_half &h) {
  const dccl_dev_task &t = cta->task;
  __shared__ int go[2];
  for (uint64_t idx = 0; idx < t.nsteps[s]; idx++) {
    DEV_STAGE(cta, DEV_STAGE_STEP);
    dccl_prim_step st;
    dccl_sched_step(&t.sched, s, idx, &st);
    DEV_STAGE(cta, DEV_STAGE_SCHED);
    DEV_AGAIN(cta, dccl_sched_step(&t.sched, s, idx, &st));
    if (h.tid == 0) {
      if (st.wait_up >= 0) { // a tree's down step after its up stream's: that stream's writes after its up_done
        while (cta->up_done <= (uint64_t)st.wait_up && !cta->stop) {
        }
        __threadfence_block();
      }
      go[s] = !cta->stop && dev_step_acquire<LL>(cta, s, (int)(idx & 1), st);
      DEV_STAGE(cta, DEV_STAGE_T0_READY);
      DEV_AGAIN(cta, go[s] = go[s] && dev_step_acquire<LL>(cta, s, (int)(idx & 1), st));
    }
    half_barrier(h);
    if (!go[s]) return;
    DEV_STAGE(cta, DEV_STAGE_ACQUIRED);
    int ll = LL || t.proto == DCCL_PROTO_LL;
    uint32_t rmask = 0, smask = 0;
    if (ll) {
      dev_step_masks(st, t.sched.npeers, &rmask, &smask);
      if (rmask && !dev_ll_in<LL>(cta, s, rmask, st.nelem * t.esize, h)) return;
      if (rmask) DEV_STAGE(cta, DEV_STAGE_DATA_IN);
    }
    if (st.nelem > 0) {
      if constexpr (LL)
        dev_reduce_small<TYPE>(cta->args[s], t.esize, h.tid, h.nthreads);
      else
        dev_reduce_copy_for<TYPE>(cta->args[s], t.redop.type, t.esize, h.tid, h.nthreads);
    }
    half_barrier(h);
    DEV_STAGE(cta, DEV_STAGE_REDUCED);
    if (ll) {
      // No barrier after the lines: a warp may still write them while thread 0 acquires the next step, whose send
      // slots go to the other parity (one slot set for both let a lagging warp write into the next position's
      // slot, and the receiver waited at this one forever). Two steps on, the step's first barrier has passed.
      if (smask) {
        dev_ll_out<LL>(cta, s, (int)(idx & 1), smask, st.nelem * t.esize, h);
        DEV_STAGE(cta, DEV_STAGE_SENT);
        DEV_AGAIN(cta, dev_ll_out<LL>(cta, s, (int)(idx & 1), smask, st.nelem * t.esize, h));
      }
      if (h.tid == 0) {
        dev_ll_release(cta, smask, rmask);
        if (s == 0 && t.nsteps[1] > 0) { // a down stream waits: the half's output writes (seen through its
          __threadfence_block();          // barrier) before its up_done
          cta->up_done = idx + 1;
        }
        DEV_STAGE(cta, DEV_STAGE_RELEASED);
      }
      continue;
    }
    if (h.tid == 0) {
      dev_step_release(cta, s, st);
      if (s == 0) cta->up_done = idx + 1;
      DEV_STAGE(cta, DEV_STAGE_RELEASED);
    }
  }
}

// Warp 0 (h.tid < 32), a one-shot chunk's links and the receive step's operands in the LL kernel: what
// dev_step_acquire does for the send step (INPUT | SEND_ALL) and the receive step (RECV_ALL | INPUT | RANK_ORDER |
// POST | OUTPUT), lane i taking link i's reception and send, lane 31 the operands. Thread 0 alone walked every link
// in turn: 1.2 us at 2 ranks, growing with the peers. The sources go in rank order, the own one before the first
// link whose peer ranks above this one; the own one is the staged input (dev_oneshot_stage), its premultiply
// applied and rounded to the type there exactly as the reduction would. Returns 0 to stop, in every lane.
__device__ __forceinline__ int dev_oneshot_acquire(dev_cta *cta, int lane, int odd,
                                                   const dccl_prim_step &in) {
  const dccl_dev_task &t = cta->task;
  const int npeers = t.sched.npeers;
  int ok = !cta->stop, above = 0;
  if (lane < npeers) {
    const dccl_dev_conn *r = t.recv[lane];
    cta->ll_in_slot[lane] = dccl_conn_ll_slot(&r->desc, (char *const *)r->regions, r->pos);
    cta->ll_in_pos[lane] = r->pos;
    cta->ll_bulk_came[lane] = 0;
    above = r->peer > t.rank;
    dccl_dev_conn *c = t.send[lane];
    uint64_t pos = c->pos, nslots = c->desc.nslots, seen = c->peer_seen; // `head` as last read
    if (ok && pos - seen >= nslots) {
      const uint64_t *head = dccl_conn_word((char *const *)c->regions, c->desc.head);
      int gpu = c->same_gpu;
      ok = dev_wait(cta, c, [&] { return pos - (seen = conn_acquire(gpu, head)) < nslots; });
      if (ok) c->peer_seen = seen;
    }
    cta->ll_out_slot[odd][lane] = dccl_conn_ll_slot(&c->desc, (char *const *)c->regions, pos);
    cta->ll_out_pos[odd][lane] = pos;
  }
  dev_oneshot_sources(cta, t, lane, above, t.recvbuff + in.out_off * t.esize, in.nelem);
  return __all_sync(~0u, ok);
}

// Warps 1 and up (h.tid >= 32), meanwhile: the chunk's input into shared memory with its premultiply, the payload
// of every send and the own source of the reduction. It needs no link, so it runs beside warp 0's acquire.
template <int TYPE>
__device__ __forceinline__ void dev_oneshot_stage(dev_cta *cta, const dccl_prim_step &out, const dev_half &h) {
  const dccl_dev_task &t = cta->task;
  dccl_dev_args &a = cta->args[0];
  if (h.tid == 32) dev_stage_args(a, t.sendbuff + out.in_off * t.esize, cta->ll_send[0], out.nelem, t.redop, t.redop.pre);
  asm volatile("bar.sync 3, %0;" ::"r"(h.nthreads - 32) : "memory"); // barrier 3: warps 1 and up
  dev_reduce_small<TYPE>(a, t.esize, h.tid - 32, h.nthreads - 32);
}

// LL kernels, the one-shot all-reduce: each chunk's send step and receive step (pure/schedule.h) run as one, with
// one acquire and one pass of the step loop instead of two (a small operation's time is mostly such bookkeeping).
// Taking both steps' links at once cannot stall: an LL receive's acquire waits for nothing, its lines are polled
// once this rank's own are out. Warp 0 takes the links while the other warps stage the input; the send step's
// operands are in args[0], the receive step's in args[1] (seq[1] holds the same counts as seq[0]).
template <int TYPE>
__device__ void dev_run_oneshot(dev_cta *cta, const dev_half &h) {
  const dccl_dev_task &t = cta->task;
  __shared__ int go;
  for (uint64_t idx = 0; idx + 1 < t.nsteps[0]; idx += 2) {
    DEV_STAGE(cta, DEV_STAGE_STEP);
    dccl_prim_step out, in;
    dccl_oneshot_step(&t.sched, idx, &out); // not through dccl_sched_step: its switch cost 1 us of cold code
    dccl_oneshot_step(&t.sched, idx + 1, &in);
    DEV_STAGE(cta, DEV_STAGE_SCHED);
    const int odd = (int)(idx / 2 & 1);
    if (h.tid < 32) {
      int ok = dev_oneshot_acquire(cta, h.tid, odd, in);
      if (h.tid == 0) go = ok;
      DEV_STAGE(cta, DEV_STAGE_T0_READY);
    } else {
      dev_oneshot_stage<TYPE>(cta, out, h);
    }
    half_barrier(h);
    if (!go) return;
    DEV_STAGE(cta, DEV_STAGE_ACQUIRED);
    uint32_t rmask, smask, none;
    dev_step_masks(out, t.sched.npeers, &none, &smask);
    dev_step_masks(in, t.sched.npeers, &rmask, &none);
    const uint64_t bytes = out.nelem * t.esize;
    dev_ll_send(cta, 0, odd, smask, bytes, h);
    // The sends' `tail` before the receptions, as the send step's release came before: a peer that expected bulk
    // sees the LL slot come (and reports the mismatch) though this rank may stop at its own receive.
    if (h.tid == 0) dev_ll_release(cta, smask, 0);
    DEV_STAGE(cta, DEV_STAGE_SENT);
    if (rmask && !dev_ll_receive(cta, 1, rmask, bytes, h)) return;
    DEV_STAGE(cta, DEV_STAGE_DATA_IN);
    const dccl_dev_args &b = cta->args[1];
    dev_oneshot_reduce<TYPE>(cta, t.sched.npeers, b.own, b.kind, b.post_div, b.dsts[0], b.n, h.tid, h.nthreads);
    half_barrier(h); // every thread is done with the operands and the staged input before they are refilled
    DEV_STAGE(cta, DEV_STAGE_REDUCED);
    if (h.tid == 0) {
      dev_ll_release(cta, 0, rmask);
      DEV_STAGE(cta, DEV_STAGE_RELEASED);
    }
  }
}

// LL: the kernel for launches whose tasks all run LL steps on one stream (kernel_choice.c): only that path's
// code, compact, so that the few microseconds of a small operation are not spent fetching instructions. Each part
// of a launch's path runs once, on an SM whose instruction cache has not seen it: the generic kernel's path
// jumps across some 300 KiB of code.
template <int TYPE, int LL>
__device__ __forceinline__ void dev_kernel_body(const dccl_dev_work *w) {
  __shared__ dev_cta cta;
  if (!LL && w->ce.mode != DCCL_CE_NONE) {
    dev_ce<TYPE>(w);
    __syncthreads();
    if (threadIdx.x == 0 && w->rank[0].done_ctas) dev_count_exit(w->rank[0].done_ctas);
    return;
  }
  DEV_STAGES_BEGIN(&cta);
  DEV_AGAIN(&cta, (void)0); // what a mark itself costs
  dev_words_in(w, &cta);
  int first = w->cta_first[blockIdx.x], ntasks = w->cta_ntasks[blockIdx.x];
  const dccl_dev_task *tasks = w->tasks ? w->tasks : w->inline_tasks;
  for (int k = 0; k < ntasks; k++) {
    // The task into shared memory, a word per thread (from the parameter, or from host memory), and its links
    // with it where the parameter holds it (from host memory their addresses are read once, from the copy).
    const uint32_t *src = (const uint32_t *)&tasks[first + k];
    for (unsigned i = threadIdx.x; i < sizeof(dccl_dev_task) / 4; i += blockDim.x) ((uint32_t *)&cta.task)[i] = src[i];
    if (!w->tasks) dev_conns_in(&cta, &tasks[first + k]);
    if (threadIdx.x == 0) {
      cta.up_done = 0;
      cta.stop = 0;
    }
    __syncthreads();
    if (w->tasks) {
      dev_conns_in(&cta, &cta.task);
      __syncthreads();
    }
    // A scalar in GPU memory (ncclScalarDevice) is read once per task, as the operation starts: every step scales
    // by the same value, and no step's acquire waits for a load from global memory.
    if (threadIdx.x == 0 && cta.task.redop.pre_ptr) {
      cta.task.redop.pre = 0;
      memcpy(&cta.task.redop.pre, (const void *)cta.task.redop.pre_ptr, cta.task.esize);
      cta.task.redop.pre_ptr = 0;
    }
    if (threadIdx.x == 0 && cta.task.ctas > 1) cta.task.channel += blockIdx.x - cta.task.cta0; // a shared task
    dev_conns_point(&cta);
    __syncthreads();
    DEV_STAGE(&cta, DEV_STAGE_TASK);
    if (!LL && cta.task.sched.algo == DCCL_SCHED_DIRECT) {
      dev_direct<TYPE>(&cta);
      __syncthreads();
      if (cta.stop) break;
      continue;
    }
    int two = !LL && cta.task.nsteps[1] > 0;
    dev_half h;
    int s = two && threadIdx.x >= blockDim.x / 2;
    h.nthreads = two ? blockDim.x / 2 : blockDim.x;
    h.tid = threadIdx.x - s * h.nthreads;
    h.bar = 1 + s;
    if constexpr (LL) {
      if (cta.task.sched.algo == DCCL_SCHED_ONESHOT_ALLREDUCE)
        dev_run_oneshot<TYPE>(&cta, h);
      else
        dev_run_stream<TYPE, LL>(&cta, s, h);
    } else {
      dev_run_stream<TYPE, LL>(&cta, s, h);
    }
    __syncthreads();
    dev_conns_out(&cta, !cta.stop);
    __syncthreads(); // the links written back before the next task reads them, or before the exit count
    if (cta.stop) break;
  }
  DEV_STAGE(&cta, DEV_STAGE_TASKS_DONE);
  if (ntasks == 0) __syncthreads(); // the words (a task's first barrier shows them otherwise)
  if (threadIdx.x == 0 && cta.words.done_ctas) dev_count_exit_launch(w, cta.words.done_ctas);
  DEV_STAGES_END(&cta);
}

// The kernels: one per element type, one for groups that mix types, and an LL kernel per element type. The host
// finds them by these names (collectives/device/kernel_choice.c). The launch comes by value; __grid_constant__ lets
// the body address it in place instead of copying it per thread.
#define DCCL_DEV_KERNEL(name, type, ll)                                                              \
  extern "C" __global__ void __launch_bounds__(DCCL_DEV_THREADS, 1) name(const __grid_constant__ dccl_dev_work w) { \
    dev_kernel_body<type, ll>(&w);                                                                   \
  }
DCCL_DEV_KERNEL(dccl_kernel_any, DCCL_DEV_ANY_TYPE, 0)
DCCL_DEV_KERNEL(dccl_kernel_t0, 0, 0)
DCCL_DEV_KERNEL(dccl_kernel_t1, 1, 0)
DCCL_DEV_KERNEL(dccl_kernel_t2, 2, 0)
DCCL_DEV_KERNEL(dccl_kernel_t3, 3, 0)
DCCL_DEV_KERNEL(dccl_kernel_t4, 4, 0)
DCCL_DEV_KERNEL(dccl_kernel_t5, 5, 0)
DCCL_DEV_KERNEL(dccl_kernel_t6, 6, 0)
DCCL_DEV_KERNEL(dccl_kernel_t7, 7, 0)
DCCL_DEV_KERNEL(dccl_kernel_t8, 8, 0)
DCCL_DEV_KERNEL(dccl_kernel_t9, 9, 0)
DCCL_DEV_KERNEL(dccl_kernel_t10, 10, 0)
DCCL_DEV_KERNEL(dccl_kernel_t11, 11, 0)
DCCL_DEV_KERNEL(dccl_kernel_ll_t0, 0, 1)
DCCL_DEV_KERNEL(dccl_kernel_ll_t1, 1, 1)
DCCL_DEV_KERNEL(dccl_kernel_ll_t2, 2, 1)
DCCL_DEV_KERNEL(dccl_kernel_ll_t3, 3, 1)
DCCL_DEV_KERNEL(dccl_kernel_ll_t4, 4, 1)
DCCL_DEV_KERNEL(dccl_kernel_ll_t5, 5, 1)
DCCL_DEV_KERNEL(dccl_kernel_ll_t6, 6, 1)
DCCL_DEV_KERNEL(dccl_kernel_ll_t7, 7, 1)
DCCL_DEV_KERNEL(dccl_kernel_ll_t8, 8, 1)
DCCL_DEV_KERNEL(dccl_kernel_ll_t9, 9, 1)
DCCL_DEV_KERNEL(dccl_kernel_ll_t10, 10, 1)
DCCL_DEV_KERNEL(dccl_kernel_ll_t11, 11, 1)

// The tiny kernels (dev_tiny.cuh): a warp a CTA and one that counts its exit, the smallest one-shot all-reduces
// only. Kernels of their own, so that a launch fetches only this path's few instructions, cold on whichever SM it
// lands. Each type has two: one takes the whole launch (struct dccl_dev_work), the slim one only what it reads of
// a launch of up to DCCL_DEV_SLIM_CTAS CTAs (struct dccl_dev_slim_work), a shorter launch call.
#define DCCL_DEV_TINY_KERNEL(name, type, Work)                                                            \
  extern "C" __global__ void __launch_bounds__(DCCL_DEV_TINY_THREADS, 1) name(const __grid_constant__ Work w) { \
    __shared__ dev_cta cta;                                                                                \
    DEV_STAGES_BEGIN(&cta);                                                                                \
    if (threadIdx.x < 32)                                                                                  \
      dev_tiny<type>(&w, &cta);                                                                            \
    else                                                                                                   \
      dev_tiny_count(&cta);                                                                                \
    DEV_STAGES_END(&cta);                                                                                  \
  }
DCCL_DEV_TINY_KERNEL(dccl_kernel_tiny_t0, 0, dccl_dev_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_tiny_t1, 1, dccl_dev_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_tiny_t2, 2, dccl_dev_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_tiny_t3, 3, dccl_dev_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_tiny_t4, 4, dccl_dev_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_tiny_t5, 5, dccl_dev_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_tiny_t6, 6, dccl_dev_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_tiny_t7, 7, dccl_dev_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_tiny_t8, 8, dccl_dev_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_tiny_t9, 9, dccl_dev_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_tiny_t10, 10, dccl_dev_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_tiny_t11, 11, dccl_dev_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_slim_t0, 0, dccl_dev_slim_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_slim_t1, 1, dccl_dev_slim_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_slim_t2, 2, dccl_dev_slim_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_slim_t3, 3, dccl_dev_slim_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_slim_t4, 4, dccl_dev_slim_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_slim_t5, 5, dccl_dev_slim_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_slim_t6, 6, dccl_dev_slim_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_slim_t7, 7, dccl_dev_slim_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_slim_t8, 8, dccl_dev_slim_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_slim_t9, 9, dccl_dev_slim_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_slim_t10, 10, dccl_dev_slim_work)
DCCL_DEV_TINY_KERNEL(dccl_kernel_slim_t11, 11, dccl_dev_slim_work)
