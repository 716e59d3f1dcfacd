// The kernels' arithmetic: one step's `acc = pre(input) op src_1 op ... ; post; copy to every destination`, for
// every element type and reduction, with the bits of the host executor (collectives/reduce_host.c): narrow floats
// are combined in float and rounded once when stored; a premultiply is applied to the own input only; an integer
// average divides once at the end. Element math comes from pure/reduce_math.h, shared with the host.
#ifndef DCCL_DEV_REDUCE_CUH_
#define DCCL_DEV_REDUCE_CUH_

#include <stdint.h>

#include "pure/reduce_math.h"

// Per element type: its storage T, the type A it is combined in, and the conversions.
#define DCCL_PLAIN_TYPE(name, T_, tag)                                        \
  struct name {                                                               \
    typedef T_ T;                                                             \
    typedef T_ A;                                                             \
    __device__ static A widen(T x) { return x; }                              \
    __device__ static T narrow(A x) { return x; }                             \
    __device__ static A op(int kind, A a, A b) {                              \
      return kind == 0 ? dccl_##tag##_sum(a, b) : kind == 1 ? dccl_##tag##_prod(a, b) \
             : kind == 2 ? dccl_##tag##_max(a, b) : dccl_##tag##_min(a, b);    \
    }                                                                         \
  };
#define DCCL_NARROW_TYPE(name, T_, tag)                                       \
  struct name {                                                               \
    typedef T_ T;                                                             \
    typedef float A;                                                          \
    __device__ static A widen(T x) { return dccl_##tag##_to_f32(x); }         \
    __device__ static T narrow(A x) { return dccl_f32_to_##tag(x); }          \
    __device__ static A op(int kind, A a, A b) {                              \
      return kind == 0 ? dccl_f32_sum(a, b) : kind == 1 ? dccl_f32_prod(a, b) \
             : kind == 2 ? dccl_f32_max(a, b) : dccl_f32_min(a, b);            \
    }                                                                         \
  };
DCCL_PLAIN_TYPE(dev_i8, int8_t, i8)
DCCL_PLAIN_TYPE(dev_u8, uint8_t, u8)
DCCL_PLAIN_TYPE(dev_i32, int32_t, i32)
DCCL_PLAIN_TYPE(dev_u32, uint32_t, u32)
DCCL_PLAIN_TYPE(dev_i64, int64_t, i64)
DCCL_PLAIN_TYPE(dev_u64, uint64_t, u64)
DCCL_PLAIN_TYPE(dev_f32, float, f32)
DCCL_PLAIN_TYPE(dev_f64, double, f64)
DCCL_NARROW_TYPE(dev_fp16, uint16_t, fp16)
DCCL_NARROW_TYPE(dev_bf16, uint16_t, bf16)
DCCL_NARROW_TYPE(dev_e4m3, uint8_t, e4m3)
DCCL_NARROW_TYPE(dev_e5m2, uint8_t, e5m2)
#undef DCCL_PLAIN_TYPE
#undef DCCL_NARROW_TYPE

#define DCCL_DEV_MAX_SRCS 10 // the own input and up to 8 receptions (one-shot), plus one spare
#define DCCL_DEV_MAX_DSTS 10 // the output and up to 8 sends

// One step's operands. srcs[own] is the user's input (own < 0: none), which alone gets the premultiply; the others
// arrived premultiplied. round_own: round pre(input) to T before combining (the one-shot's rank-order sum does,
// as the host does).
struct dccl_dev_args {
  const void *srcs[DCCL_DEV_MAX_SRCS];
  void *dsts[DCCL_DEV_MAX_DSTS];
  int nsrcs, ndsts, own, round_own;
  int pre_all; // the premultiply applies to every source (the direct all-reduce's average: one scalar for all)
  uint32_t kind, has_pre, post_div;
  uint64_t pre; // bits of the premultiplier, in T
  uint64_t n;   // elements
};

// One element of `nsrcs` sources combined in order (x_of(s): source s's value, widened), then divided where the
// op averages and narrowed: the one order and the one set of functions every element path uses, so their results
// are the same bits.
template <typename R, typename Source>
__device__ __forceinline__ typename R::T dev_fold(int nsrcs, int kind, uint32_t post_div, Source x_of) {
  typedef typename R::A A;
  A acc = 0;
  for (int s = 0; s < nsrcs; s++) {
    A x = x_of(s);
    acc = s == 0 ? x : R::op(kind, acc, x);
  }
  if (post_div > 1) acc = (A)(acc / (A)post_div);
  return R::narrow(acc);
}

// Element i: combine every source in order, then store into every destination.
template <typename R>
__device__ __forceinline__ void dev_reduce_elem(const dccl_dev_args &a, typename R::A scale, uint64_t i) {
  typedef typename R::T T;
  typedef typename R::A A;
  T out = dev_fold<R>(a.nsrcs, a.kind, a.post_div, [&](int s) {
    A x = R::widen(((const T *)a.srcs[s])[i]);
    if ((s == a.own || a.pre_all) && a.has_pre) {
      x = R::op(1, x, scale);
      if (a.round_own) x = R::widen(R::narrow(x));
    }
    return x;
  });
  for (int d = 0; d < a.ndsts; d++) ((T *)a.dsts[d])[i] = out;
}

#define DCCL_DEV_UNROLL 4      // packs in flight per thread (4- and 8-byte types) while reducing
#define DCCL_DEV_COPY_UNROLL 8 // and while copying, which needs no accumulators

// The step's 16-byte packs, spread over `nthreads` threads (this is thread `tid`), DCCL_DEV_UNROLL packs per thread
// at a time. Each source is loaded for all of a thread's packs before it is combined, so the loads overlap; the
// accumulators stay in registers (every index is known once the loops are unrolled).
template <typename R>
__device__ __forceinline__ void dev_reduce_packs(const dccl_dev_args &a, typename R::A scale, uint64_t packs, int tid,
                                              int nthreads) {
  typedef typename R::T T;
  typedef typename R::A A;
  const int E = 16 / sizeof(T);
  // About 16 accumulators per thread whatever the type: narrow types hold more elements per pack.
  const int U = sizeof(T) >= 4 ? DCCL_DEV_UNROLL : sizeof(T) == 2 ? DCCL_DEV_UNROLL / 2 : 1;
  union pack {
    uint4 v;
    T e[16 / sizeof(T)];
  };
  for (uint64_t base = tid; base < packs; base += (uint64_t)nthreads * U) {
    A acc[U][16 / sizeof(T)];
    // Two sources' loads are issued before either is used (a ring step reduces two: the input and a slot), so
    // twice the bytes are in flight: a step's speed is bytes in flight over the memory's latency.
    pack in[2][U];
    for (int s = 0; s < a.nsrcs; s += 2) {
      const int two = s + 1 < a.nsrcs;
#pragma unroll
      for (int u = 0; u < U; u++) {
        uint64_t p = base + (uint64_t)u * nthreads;
        if (p < packs) {
          in[0][u].v = ((const uint4 *)a.srcs[s])[p];
          if (two) in[1][u].v = ((const uint4 *)a.srcs[s + 1])[p];
        }
      }
#pragma unroll
      for (int h = 0; h < 2; h++) { // unrolled: in[h] stays in registers
        if (h == 1 && !two) break;
        const int pre = (s + h == a.own || a.pre_all) && a.has_pre;
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
          for (int k = 0; k < E; k++) {
            A x = R::widen(in[h][u].e[k]);
            if (pre) {
              x = R::op(1, x, scale);
              if (a.round_own) x = R::widen(R::narrow(x));
            }
            acc[u][k] = s + h == 0 ? x : R::op(a.kind, acc[u][k], x);
          }
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      uint64_t p = base + (uint64_t)u * nthreads;
      if (p >= packs) continue;
      pack out;
#pragma unroll
      for (int k = 0; k < E; k++) {
        A x = acc[u][k];
        if (a.post_div > 1) x = (A)(x / (A)a.post_div);
        out.e[k] = R::narrow(x);
      }
      for (int d = 0; d < a.ndsts; d++) ((uint4 *)a.dsts[d])[p] = out.v;
    }
  }
}

// The premultiplier, widened (0 without one).
template <typename R>
__device__ __forceinline__ typename R::A dev_scale(const dccl_dev_args &a) {
  typename R::A scale = 0;
  if (a.has_pre) {
    typename R::T raw;
    memcpy(&raw, &a.pre, sizeof raw);
    scale = R::widen(raw);
  }
  return scale;
}

// The step: packs where every operand is 16-byte aligned, single elements elsewhere.
template <typename R>
__device__ void dev_reduce_copy(const dccl_dev_args &a, int tid, int nthreads) {
  typedef typename R::T T;
  typename R::A scale = dev_scale<R>(a);
  const int per_pack = 16 / (int)sizeof(T);
  uintptr_t align = 0;
  for (int s = 0; s < a.nsrcs; s++) align |= (uintptr_t)a.srcs[s];
  for (int d = 0; d < a.ndsts; d++) align |= (uintptr_t)a.dsts[d];
  uint64_t packs = (align & 15) == 0 ? a.n / per_pack : 0;
  dev_reduce_packs<R>(a, scale, packs, tid, nthreads);
  for (uint64_t i = packs * per_pack + tid; i < a.n; i += nthreads) dev_reduce_elem<R>(a, scale, i);
}

// A lone source with nothing to apply is copied as bytes (as on the host: a NaN's payload survives).
__device__ __forceinline__ void dev_copy(const dccl_dev_args &a, uint32_t esize, int tid, int nthreads) {
  uint64_t bytes = a.n * esize;
  uintptr_t align = (uintptr_t)a.srcs[0];
  for (int d = 0; d < a.ndsts; d++) align |= (uintptr_t)a.dsts[d];
  uint64_t packs = (align & 15) == 0 ? bytes / 16 : 0;
  const uint4 *src = (const uint4 *)a.srcs[0];
  const int U = DCCL_DEV_COPY_UNROLL;
  for (uint64_t base = tid; base < packs; base += (uint64_t)nthreads * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      uint64_t p = base + (uint64_t)u * nthreads;
      if (p < packs) v[u] = src[p];
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      uint64_t p = base + (uint64_t)u * nthreads;
      if (p < packs)
        for (int d = 0; d < a.ndsts; d++) ((uint4 *)a.dsts[d])[p] = v[u];
    }
  }
  for (uint64_t i = packs * 16 + tid; i < bytes; i += nthreads) {
    unsigned char v = ((const unsigned char *)a.srcs[0])[i];
    for (int d = 0; d < a.ndsts; d++) ((unsigned char *)a.dsts[d])[i] = v;
  }
}

// The element type's arithmetic by its number (enum dccl_elem_type).
template <int TYPE> struct dev_elem;
template <> struct dev_elem<DCCL_ELEM_I8> { typedef dev_i8 R; };
template <> struct dev_elem<DCCL_ELEM_U8> { typedef dev_u8 R; };
template <> struct dev_elem<DCCL_ELEM_I32> { typedef dev_i32 R; };
template <> struct dev_elem<DCCL_ELEM_U32> { typedef dev_u32 R; };
template <> struct dev_elem<DCCL_ELEM_I64> { typedef dev_i64 R; };
template <> struct dev_elem<DCCL_ELEM_U64> { typedef dev_u64 R; };
template <> struct dev_elem<DCCL_ELEM_FP16> { typedef dev_fp16 R; };
template <> struct dev_elem<DCCL_ELEM_F32> { typedef dev_f32 R; };
template <> struct dev_elem<DCCL_ELEM_F64> { typedef dev_f64 R; };
template <> struct dev_elem<DCCL_ELEM_BF16> { typedef dev_bf16 R; };
template <> struct dev_elem<DCCL_ELEM_E4M3> { typedef dev_e4m3 R; };
template <> struct dev_elem<DCCL_ELEM_E5M2> { typedef dev_e5m2 R; };
#define DCCL_DEV_ANY_TYPE (-1)

// One step's arithmetic: a kernel built for one element type (TYPE) has only that type's code, so its registers
// go to that loop; the kernel for groups mixing types (DCCL_DEV_ANY_TYPE) dispatches at run time.
template <int TYPE>
__device__ __forceinline__ void dev_reduce_copy_for(const dccl_dev_args &a, uint32_t type, uint32_t esize, int tid,
                                                    int nthreads) {
  if (a.nsrcs == 1 && !((a.own == 0 || a.pre_all) && a.has_pre) && a.post_div <= 1) {
    dev_copy(a, esize, tid, nthreads);
    return;
  }
  if constexpr (TYPE != DCCL_DEV_ANY_TYPE) {
    dev_reduce_copy<typename dev_elem<TYPE>::R>(a, tid, nthreads);
  } else {
    switch (type) {
#define DCCL_DEV_CASE(t) \
  case t: dev_reduce_copy<dev_elem<t>::R>(a, tid, nthreads); break;
      DCCL_DEV_CASE(DCCL_ELEM_I8) DCCL_DEV_CASE(DCCL_ELEM_U8) DCCL_DEV_CASE(DCCL_ELEM_I32)
      DCCL_DEV_CASE(DCCL_ELEM_U32) DCCL_DEV_CASE(DCCL_ELEM_I64) DCCL_DEV_CASE(DCCL_ELEM_U64)
      DCCL_DEV_CASE(DCCL_ELEM_FP16) DCCL_DEV_CASE(DCCL_ELEM_F32) DCCL_DEV_CASE(DCCL_ELEM_F64)
      DCCL_DEV_CASE(DCCL_ELEM_BF16) DCCL_DEV_CASE(DCCL_ELEM_E4M3) DCCL_DEV_CASE(DCCL_ELEM_E5M2)
#undef DCCL_DEV_CASE
    }
  }
}

// An LL step's arithmetic (at most DCCL_DEV_LL_BYTES: a few elements per thread): one loop over elements, with the
// packs' bits (every element is combined in the same order), in a fraction of their code. A lone source with
// nothing to apply is copied as bytes, as dev_copy does.
template <int TYPE>
__device__ __forceinline__ void dev_reduce_small(const dccl_dev_args &a, uint32_t esize, int tid, int nthreads) {
  if (a.nsrcs == 1 && !((a.own == 0 || a.pre_all) && a.has_pre) && a.post_div <= 1) {
    for (uint64_t i = tid; i < a.n * esize; i += nthreads) {
      unsigned char v = ((const unsigned char *)a.srcs[0])[i];
      for (int d = 0; d < a.ndsts; d++) ((unsigned char *)a.dsts[d])[i] = v;
    }
    return;
  }
  typedef typename dev_elem<TYPE>::R R;
  typename R::A scale = dev_scale<R>(a);
  for (uint64_t i = tid; i < a.n; i += nthreads) dev_reduce_elem<R>(a, scale, i);
}

#endif
