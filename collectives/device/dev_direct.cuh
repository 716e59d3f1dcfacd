// The device executor's direct collectives (collectives/device/kernels.cu): ranks that map each other's buffers
// reduce and copy straight between them, meeting on boards instead of passing slots.
#ifndef DCCL_DEV_DIRECT_CUH_
#define DCCL_DEV_DIRECT_CUH_

#include "collectives/device/dev_cta.cuh"

// The direct all-reduce (DCCL_SCHED_DIRECT), for ranks on one GPU (in one process, or in windows): no FIFO,
// no copy through a slot. Rank r reduces slice r of the elements (dccl_direct_part; its channels' CTAs stride
// through it together) from every rank's input, in rank order, and writes it into every rank's output: each input
// element is read once and each output element written once, the HBM floor's traffic (2 N S bytes for N ranks of S
// bytes).
// Warp 0 meets the other ranks' same channel on their boards (struct dccl_direct_slot), lane p with rank p, all
// ranks at once (a thread meeting them one after the other paid each peer's few trips to memory in turn): lane `me`
// publishes this call's buffers and then `seq` (release); lane p reads rank p's once its `seq` reaches the operation
// (acquire). After the CTA's writes and a barrier, lane `me` publishes `done` (a release store, cumulative over the
// barrier) and lane p waits for rank p's `done`, so no rank leaves (and lets its caller reuse the buffers) while
// another still reads its input or writes its output. A peer cannot publish the next operation before this rank's
// `done`, so the buffers read are this operation's.
__device__ __forceinline__ int dev_direct_meet(dev_cta *cta, const dccl_direct_slot *their,
                                               const uint64_t *word, uint64_t k, int peer) {
  for (unsigned polls = 1;; polls++) {
    if (dccl_ld_acquire_gpu_u64(word) >= k) return 1;
    if (polls % POLLS_PER_ABORT_CHECK) continue;
    if (*(volatile const uint64_t *)&their->aborted) {
      dev_fail(cta, NULL, DCCL_DEV_PEER_ABORTED, NULL, NULL, peer);
      return 0;
    }
    // Another channel of this rank failed (a peer that called with another count may lack this channel): stop.
    if (*(volatile const uint32_t *)cta->words.abort_flag || cta->stop ||
        *(volatile const uint32_t *)&cta->words.status->error) {
      dev_fail(cta, NULL, DCCL_DEV_ABORTED, NULL, NULL, peer);
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

// Lane p's part of the meeting: rank p's buffers (this rank's own for p == me) as operands of the operation.
__device__ __forceinline__ void dev_direct_operands(const dccl_dev_task &t, dccl_dev_args &a, int p, const char *in,
                                                   char *out, uint64_t off, uint64_t block_off) {
  switch (t.direct_op) {
    case DCCL_DIRECT_OP_REDUCESCATTER: a.srcs[p] = in + block_off; if (p == t.rank) a.dsts[0] = out + off; break;
    case DCCL_DIRECT_OP_ALLGATHER: a.dsts[p] = out + block_off; if (p == t.rank) a.srcs[0] = in + off; break;
    case DCCL_DIRECT_OP_BROADCAST: a.dsts[p] = out + off; if (p == t.sched.root) a.srcs[0] = in + off; break;
    case DCCL_DIRECT_OP_REDUCE: a.srcs[p] = in + off; if (p == t.sched.root) a.dsts[0] = out + off; break;
    default: a.srcs[p] = in + off; a.dsts[p] = out + off;
  }
}

template <int TYPE>
__device__ void dev_direct(dev_cta *cta) {
  const dccl_dev_task &t = cta->task;
  dccl_dev_args &a = cta->args[0];
  const int n = t.sched.nranks, me = t.rank, lane = (int)threadIdx.x;
  __shared__ int go;
  // Warp 0's lanes keep their boards and the operation's number in registers through the reduction.
  dccl_direct_slot *mine = NULL, *their = NULL;
  uint64_t k = 0;
  if (lane < 32) {
    mine = t.boards[me] + t.channel;
    if (lane < n) their = t.boards[lane] + t.channel;
    if (lane == me) k = mine->ops + 1;
    k = __shfl_sync(~0u, k, me);
    if (lane == me) {
      mine->ops = k;
      mine->sendbuff = t.sendbuff;
      mine->recvbuff = t.recvbuff;
      mine->send_win = t.send_win;
      mine->recv_win = t.recv_win;
      mine->call = t.call;
      dccl_st_release_gpu_u64(&mine->seq, k);
    }
    // This rank's part: its slice, or (reduce-scatter, all-gather) its block, which every channel walks.
    const int block_op = t.direct_op == DCCL_DIRECT_OP_REDUCESCATTER || t.direct_op == DCCL_DIRECT_OP_ALLGATHER;
    uint64_t lo, hi;
    dccl_direct_part(&t.sched, me, t.esize, block_op, &lo, &hi);
    uint64_t off = (t.sched.begin + lo) * t.esize, block_off = ((uint64_t)me * t.sched.block) * t.esize + off;
    int ok = 1;
    if (lane < n) {
      const char *in = t.sendbuff;
      char *out = t.recvbuff;
      int32_t in_win = t.send_win, out_win = t.recv_win;
      if (lane != me) {
        ok = dev_direct_meet(cta, their, &their->seq, k, lane);
        if (ok) {
          dccl_slot_header got = their->call, want = t.call;
          in = their->sendbuff;
          out = their->recvbuff;
          in_win = their->send_win;
          out_win = their->recv_win;
          if (got.kind != want.kind || got.count != want.count || got.what != want.what || got.root != want.root) {
            want.seq = got.seq = k;
            dev_fail(cta, NULL, DCCL_DEV_MISMATCH, &want, &got, lane);
            ok = 0;
          }
        }
      }
      if (ok)
        dev_direct_operands(t, a, lane, dev_direct_here(t, in, in_win, lane),
                            (char *)dev_direct_here(t, out, out_win, lane), off, block_off);
    }
    ok = __all_sync(~0u, ok);
    if (lane == 0) {
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
    }
    if (!ok && lane == me) dccl_st_release_gpu_u64(&mine->aborted, 1); // the peers stop waiting for this rank
  }
  __syncthreads();
  if (!go) return;
  DEV_STAGE(cta, DEV_STAGE_ACQUIRED);
  // The operation's channels stride together through the part (a CTA running several channels takes each in turn):
  // their CTAs stay in the same few pages of every buffer. CTAs each streaming pieces of their own, far apart, ran
  // 4 ranks' 1 GiB all-reduce between processes on cudaMalloc buffers 4% slower in place and 9-14% out of place.
  const int ways = t.sched.direct_channels;
  if (a.n > 0)
    dev_reduce_copy_for<TYPE>(a, t.redop.type, t.esize, (int)t.channel * blockDim.x + threadIdx.x, ways * blockDim.x);
  __syncthreads();
  DEV_STAGE(cta, DEV_STAGE_REDUCED);
  if (lane < 32) {
    int ok = 1;
    if (lane == me)
      dccl_st_release_gpu_u64(&mine->done, k); // after the CTA's writes into every output (the barrier above)
    else if (lane < n)
      ok = dev_direct_meet(cta, their, &their->done, k, lane);
    if (!ok) dccl_st_release_gpu_u64(&mine->aborted, 1);
    __syncwarp();
    DEV_STAGE(cta, DEV_STAGE_RELEASED);
  }
  __syncthreads();
}

#endif
