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
  uint32_t kind, has_pre, post_div;
  uint64_t pre; // bits of the premultiplier, in T
  uint64_t n;   // elements
};

// Element i: combine every source in order, then store into every destination.
template <typename R>
__device__ __forceinline__ void dev_reduce_elem(const dccl_dev_args &a, typename R::A scale, uint64_t i) {
  typedef typename R::T T;
  typedef typename R::A A;
  A acc = 0;
  for (int s = 0; s < a.nsrcs; s++) {
    A x = R::widen(((const T *)a.srcs[s])[i]);
    if (s == a.own && a.has_pre) {
      x = R::op(1, x, scale);
      if (a.round_own) x = R::widen(R::narrow(x));
    }
    acc = s == 0 ? x : R::op(a.kind, acc, x);
  }
  if (a.post_div > 1) acc = (A)(acc / (A)a.post_div);
  T out = R::narrow(acc);
  for (int d = 0; d < a.ndsts; d++) ((T *)a.dsts[d])[i] = out;
}

// The step, spread over `nthreads` threads (this is thread `tid`): 16-byte packs where every operand is 16-byte
// aligned, single elements elsewhere. Loads of a pack go first, so each thread has all its loads in flight.
template <typename R>
__device__ void dev_reduce_copy(const dccl_dev_args &a, int tid, int nthreads) {
  typedef typename R::T T;
  typedef typename R::A A;
  A scale = 0;
  if (a.has_pre) {
    T raw;
    memcpy(&raw, &a.pre, sizeof raw);
    scale = R::widen(raw);
  }
  const int per_pack = 16 / (int)sizeof(T);
  uintptr_t align = 0;
  for (int s = 0; s < a.nsrcs; s++) align |= (uintptr_t)a.srcs[s];
  for (int d = 0; d < a.ndsts; d++) align |= (uintptr_t)a.dsts[d];
  uint64_t packs = (align & 15) == 0 ? a.n / per_pack : 0;
  for (uint64_t p = tid; p < packs; p += nthreads) {
    union {
      uint4 v;
      T e[16 / sizeof(T)];
    } in[DCCL_DEV_MAX_SRCS], out;
    for (int s = 0; s < a.nsrcs; s++) in[s].v = ((const uint4 *)a.srcs[s])[p];
    for (int k = 0; k < per_pack; k++) {
      A acc = 0;
      for (int s = 0; s < a.nsrcs; s++) {
        A x = R::widen(in[s].e[k]);
        if (s == a.own && a.has_pre) {
          x = R::op(1, x, scale);
          if (a.round_own) x = R::widen(R::narrow(x));
        }
        acc = s == 0 ? x : R::op(a.kind, acc, x);
      }
      if (a.post_div > 1) acc = (A)(acc / (A)a.post_div);
      out.e[k] = R::narrow(acc);
    }
    for (int d = 0; d < a.ndsts; d++) ((uint4 *)a.dsts[d])[p] = out.v;
  }
  for (uint64_t i = packs * per_pack + tid; i < a.n; i += nthreads) dev_reduce_elem<R>(a, scale, i);
}

// A lone source with nothing to apply is copied as bytes (as on the host: a NaN's payload survives).
__device__ void dev_copy(const dccl_dev_args &a, uint32_t esize, int tid, int nthreads) {
  uint64_t bytes = a.n * esize;
  uintptr_t align = (uintptr_t)a.srcs[0];
  for (int d = 0; d < a.ndsts; d++) align |= (uintptr_t)a.dsts[d];
  uint64_t packs = (align & 15) == 0 ? bytes / 16 : 0;
  for (uint64_t p = tid; p < packs; p += nthreads) {
    uint4 v = ((const uint4 *)a.srcs[0])[p];
    for (int d = 0; d < a.ndsts; d++) ((uint4 *)a.dsts[d])[p] = v;
  }
  for (uint64_t i = packs * 16 + tid; i < bytes; i += nthreads) {
    unsigned char v = ((const unsigned char *)a.srcs[0])[i];
    for (int d = 0; d < a.ndsts; d++) ((unsigned char *)a.dsts[d])[i] = v;
  }
}

// Dispatch on the element type.
__device__ void dev_reduce_copy_any(const dccl_dev_args &a, uint32_t type, uint32_t esize, int tid, int nthreads) {
  if (a.nsrcs == 1 && !(a.own == 0 && a.has_pre) && a.post_div <= 1) {
    dev_copy(a, esize, tid, nthreads);
    return;
  }
  switch (type) {
    case DCCL_ELEM_I8: dev_reduce_copy<dev_i8>(a, tid, nthreads); break;
    case DCCL_ELEM_U8: dev_reduce_copy<dev_u8>(a, tid, nthreads); break;
    case DCCL_ELEM_I32: dev_reduce_copy<dev_i32>(a, tid, nthreads); break;
    case DCCL_ELEM_U32: dev_reduce_copy<dev_u32>(a, tid, nthreads); break;
    case DCCL_ELEM_I64: dev_reduce_copy<dev_i64>(a, tid, nthreads); break;
    case DCCL_ELEM_U64: dev_reduce_copy<dev_u64>(a, tid, nthreads); break;
    case DCCL_ELEM_FP16: dev_reduce_copy<dev_fp16>(a, tid, nthreads); break;
    case DCCL_ELEM_F32: dev_reduce_copy<dev_f32>(a, tid, nthreads); break;
    case DCCL_ELEM_F64: dev_reduce_copy<dev_f64>(a, tid, nthreads); break;
    case DCCL_ELEM_BF16: dev_reduce_copy<dev_bf16>(a, tid, nthreads); break;
    case DCCL_ELEM_E4M3: dev_reduce_copy<dev_e4m3>(a, tid, nthreads); break;
    case DCCL_ELEM_E5M2: dev_reduce_copy<dev_e5m2>(a, tid, nthreads); break;
  }
}

#endif
