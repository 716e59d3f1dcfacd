// The device executor's share of the copy-engine collectives (collectives/device/kernels.cu,
// collectives/device/ce_collectives.h).
#ifndef DCCL_DEV_CE_CUH_
#define DCCL_DEV_CE_CUH_

#include "collectives/device/dev_cta.cuh"

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
    dccl_dev_status *status = w->rank[0].status; // a copy-engine collective's launch is one rank's
    if (atomicCAS_system(&status->error, 0u, (uint32_t)DCCL_DEV_RECORDING) == 0u) {
      status->peer = (int32_t)q;
      status->want = c.call;
      status->got = got;
      __threadfence_system();
      atomicExch_system(&status->error, (uint32_t)DCCL_DEV_MISMATCH);
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

#endif
