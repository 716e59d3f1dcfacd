/* Element arithmetic for every NCCL data type, shared by the host executor and the CUDA kernels.
 *
 * Header-only; compiles as C11 on the host and as CUDA device code. The narrow float formats (fp16, bf16, fp8
 * e4m3, fp8 e5m2) are converted with integer bit manipulation plus float operations whose results are exact,
 * so host and device give the same bits whatever their rounding mode or flush-to-zero setting. Every
 * float-to-narrow conversion rounds to nearest, ties to even, with subnormals kept:
 *   fp16  IEEE binary16: finite overflow gives inf.
 *   bf16  the top half of a float: finite overflow gives inf.
 *   e4m3  OCP "FN" variant: no inf, NaN is 0x7f/0xff, largest finite 448; finite overflow and inf saturate to
 *         +-448 (NVIDIA's satfinite).
 *   e5m2  IEEE-like with inf; finite overflow saturates to +-57344, inf stays inf.
 * NaN converts to a quiet NaN of the same sign in every format.
 *
 * Binary ops on raw storage (uint16_t for fp16/bf16, uint8_t for fp8) compute in float and round once, which
 * for + and * equals the correctly rounded result in the narrow format (float has at least 2p+2 significand bits).
 * max/min ignore a NaN operand (like fmaxf/fminf) and return the first operand when the two compare equal.
 * Integer sum/prod wrap modulo 2^bits. */
#ifndef DCCL_REDUCE_MATH_H_
#define DCCL_REDUCE_MATH_H_

#include <stdint.h>
#include <string.h>

/* The element types, numbered as ncclDataType_t (collectives/reduce.h checks they agree): this layer includes
 * nothing of the project, not even the API header. */
enum dccl_elem_type {
  DCCL_ELEM_I8 = 0,
  DCCL_ELEM_U8 = 1,
  DCCL_ELEM_I32 = 2,
  DCCL_ELEM_U32 = 3,
  DCCL_ELEM_I64 = 4,
  DCCL_ELEM_U64 = 5,
  DCCL_ELEM_FP16 = 6,
  DCCL_ELEM_F32 = 7,
  DCCL_ELEM_F64 = 8,
  DCCL_ELEM_BF16 = 9,
  DCCL_ELEM_E4M3 = 10,
  DCCL_ELEM_E5M2 = 11,
};

#ifndef DCCL_HD
#ifdef __CUDACC__
#define DCCL_HD static __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define DCCL_HD static inline __attribute__((always_inline))
#else
#define DCCL_HD static inline
#endif
#endif

/* ---- float <-> bits ---------------------------------------------------------------------------------------- */

DCCL_HD uint32_t dccl_f32_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

DCCL_HD float dccl_f32_from_bits(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

DCCL_HD uint64_t dccl_f64_bits(double d) {
#ifdef __CUDA_ARCH__
  return (uint64_t)__double_as_longlong(d);
#else
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
#endif
}

#define DCCL_F32_INF_BITS 0x7f800000u

/* Branch-free selection: all ones if cond, else zero; then a where the mask is set, b elsewhere. Written with
 * masks rather than ?: so that GCC keeps both sides computed and vectorises the loops calling these. */
DCCL_HD uint32_t dccl_mask(int cond) {
  return 0u - (uint32_t)(cond != 0);
}
DCCL_HD uint32_t dccl_select(uint32_t mask, uint32_t a, uint32_t b) {
  return (a & mask) | (b & ~mask);
}

/* ---- generic narrow <-> float, for a format with `mbits` stored mantissa bits and exponent bias `bias` ------- */

/* Rounds the finite magnitude `ax` (float bits, sign clear) to nearest even in the narrow format and returns its
 * magnitude bits, exponent unbounded above: callers saturate. Both paths are computed and one is picked with a
 * mask, so loops over it vectorise without branches. */
DCCL_HD uint32_t dccl_narrow_round(uint32_t ax, int mbits, int bias) {
  /* Normal in the target: re-bias the exponent, then drop 23 - mbits bits with a round-half-even carry. */
  int drop = 23 - mbits;
  uint32_t y = ax - ((uint32_t)(127 - bias) << 23);
  uint32_t normal = (y + ((1u << (drop - 1)) - 1u) + ((y >> drop) & 1u)) >> drop;
  /* Subnormal in the target: t2 = twice the value in units of the smallest subnormal, truncated. Scaling by a
   * power of two and truncating are exact, so nothing depends on the rounding mode. The last bit of t2 is the
   * half; `inexact` says whether anything lies below it. */
  uint32_t sub_mask = dccl_mask(ax < ((uint32_t)(128 - bias) << 23));
  float s2 = dccl_f32_from_bits(ax & sub_mask) * dccl_f32_from_bits((uint32_t)(127 + bias + mbits) << 23);
  uint32_t t2 = (uint32_t)(int32_t)s2;
  uint32_t inexact = (uint32_t)(dccl_f32_bits((float)(int32_t)t2) != dccl_f32_bits(s2));
  uint32_t t = t2 >> 1;
  uint32_t sub = t + (t2 & (t | inexact) & 1u);
  return dccl_select(sub_mask, sub, normal);
}

/* The finite magnitude `h` (narrow bits, sign clear) as float bits. Subnormals: an integer times a power of two,
 * exact in float (the product is a normal float, so flush-to-zero cannot touch it). */
DCCL_HD uint32_t dccl_narrow_widen(uint32_t h, int mbits, int bias) {
  uint32_t normal = (h << (23 - mbits)) + ((uint32_t)(127 - bias) << 23);
  float sub = (float)(int32_t)h * dccl_f32_from_bits((uint32_t)(128 - bias - mbits) << 23);
  return dccl_select(dccl_mask((h >> mbits) == 0), dccl_f32_bits(sub), normal);
}

/* ---- fp16 (IEEE binary16) -------------------------------------------------------------------------------- */

DCCL_HD float dccl_fp16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t mag = h & 0x7fffu;
  uint32_t frac = mag & 0x3ffu;
  uint32_t special = DCCL_F32_INF_BITS | (frac << 13) | (dccl_mask(frac != 0) & 0x400000u); /* inf, quiet NaN */
  uint32_t bits = dccl_select(dccl_mask(mag >= 0x7c00u), special, dccl_narrow_widen(mag, 10, 15));
  return dccl_f32_from_bits(sign | bits);
}

DCCL_HD uint16_t dccl_f32_to_fp16(float f) {
  uint32_t x = dccl_f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  uint32_t mag = dccl_narrow_round(ax, 10, 15);
  mag = mag > 0x7c00u ? 0x7c00u : mag;            /* overflow (and inf) -> inf */
  uint32_t nan = 0x7e00u | ((ax >> 13) & 0x3ffu); /* quiet, top payload bits kept */
  return (uint16_t)(sign | dccl_select(dccl_mask(ax > DCCL_F32_INF_BITS), nan, mag));
}

/* ---- bf16 ------------------------------------------------------------------------------------------------- */

DCCL_HD float dccl_bf16_to_f32(uint16_t h) {
  return dccl_f32_from_bits((uint32_t)h << 16);
}

DCCL_HD uint16_t dccl_f32_to_bf16(float f) {
  uint32_t x = dccl_f32_bits(f);
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16; /* carries into the exponent, up to inf */
  uint32_t nan = (x >> 16) | 0x40u;
  return (uint16_t)dccl_select(dccl_mask((x & 0x7fffffffu) > DCCL_F32_INF_BITS), nan, rounded);
}

/* ---- fp8 e4m3 (OCP FN: no inf, 0x7f/0xff NaN, max 448) -------------------------------------------------- */

DCCL_HD float dccl_e4m3_to_f32(uint8_t v) {
  uint32_t sign = (uint32_t)(v & 0x80u) << 24;
  uint32_t mag = v & 0x7fu;
  uint32_t bits = dccl_select(dccl_mask(mag == 0x7fu), 0x7fc00000u, dccl_narrow_widen(mag, 3, 7));
  return dccl_f32_from_bits(sign | bits);
}

DCCL_HD uint8_t dccl_f32_to_e4m3(float f) {
  uint32_t x = dccl_f32_bits(f);
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t ax = x & 0x7fffffffu;
  uint32_t mag = dccl_narrow_round(ax, 3, 7);
  mag = mag > 0x7eu ? 0x7eu : mag; /* satfinite: overflow and inf -> 448 */
  return (uint8_t)(sign | dccl_select(dccl_mask(ax > DCCL_F32_INF_BITS), 0x7fu, mag));
}

/* ---- fp8 e5m2 (IEEE-like: inf 0x7c, NaN above, max finite 57344) ---------------------------------------- */

DCCL_HD float dccl_e5m2_to_f32(uint8_t v) {
  uint32_t sign = (uint32_t)(v & 0x80u) << 24;
  uint32_t mag = v & 0x7fu;
  uint32_t frac = mag & 0x3u;
  uint32_t special = DCCL_F32_INF_BITS | (frac << 21) | (dccl_mask(frac != 0) & 0x400000u);
  uint32_t bits = dccl_select(dccl_mask(mag >= 0x7cu), special, dccl_narrow_widen(mag, 2, 15));
  return dccl_f32_from_bits(sign | bits);
}

DCCL_HD uint8_t dccl_f32_to_e5m2(float f) {
  uint32_t x = dccl_f32_bits(f);
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t ax = x & 0x7fffffffu;
  uint32_t mag = dccl_narrow_round(ax, 2, 15);
  mag = mag > 0x7bu ? 0x7bu : mag; /* finite overflow -> 57344 */
  mag = dccl_select(dccl_mask(ax == DCCL_F32_INF_BITS), 0x7cu, mag);
  return (uint8_t)(sign | dccl_select(dccl_mask(ax > DCCL_F32_INF_BITS), 0x7eu, mag));
}

/* ---- binary ops ------------------------------------------------------------------------------------------- */

/* max/min skip a NaN operand, as compare-and-select so loops over them vectorise. NaN is tested on the bits:
 * GCC reasons about `a != a` across nested selects and then fails to vectorise them. */
DCCL_HD float dccl_f32_sum(float a, float b) {
  return a + b;
}
DCCL_HD float dccl_f32_prod(float a, float b) {
  return a * b;
}
DCCL_HD int dccl_f32_isnan(float a) {
  return (dccl_f32_bits(a) & 0x7fffffffu) > DCCL_F32_INF_BITS;
}
DCCL_HD float dccl_f32_max(float a, float b) {
  return (b > a || dccl_f32_isnan(a)) ? b : a;
}
DCCL_HD float dccl_f32_min(float a, float b) {
  return (b < a || dccl_f32_isnan(a)) ? b : a;
}
DCCL_HD double dccl_f64_sum(double a, double b) {
  return a + b;
}
DCCL_HD double dccl_f64_prod(double a, double b) {
  return a * b;
}
DCCL_HD int dccl_f64_isnan(double a) {
  return (dccl_f64_bits(a) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}
DCCL_HD double dccl_f64_max(double a, double b) {
  return (b > a || dccl_f64_isnan(a)) ? b : a;
}
DCCL_HD double dccl_f64_min(double a, double b) {
  return (b < a || dccl_f64_isnan(a)) ? b : a;
}

/* Integers: sum and prod in the unsigned type of the same width (wrapping, no undefined overflow). */
#define DCCL_INT_OPS(tag, T, U)           \
  DCCL_HD T dccl_##tag##_sum(T a, T b) {  \
    return (T)(U)((U)a + (U)b);           \
  }                                       \
  DCCL_HD T dccl_##tag##_prod(T a, T b) { \
    return (T)(U)((U)a * (U)b);           \
  }                                       \
  DCCL_HD T dccl_##tag##_max(T a, T b) {  \
    return b > a ? b : a;                 \
  }                                       \
  DCCL_HD T dccl_##tag##_min(T a, T b) {  \
    return b < a ? b : a;                 \
  }
DCCL_INT_OPS(i8, int8_t, uint32_t)
DCCL_INT_OPS(u8, uint8_t, uint32_t)
DCCL_INT_OPS(i32, int32_t, uint32_t)
DCCL_INT_OPS(u32, uint32_t, uint32_t)
DCCL_INT_OPS(i64, int64_t, uint64_t)
DCCL_INT_OPS(u64, uint64_t, uint64_t)
#undef DCCL_INT_OPS

/* Narrow floats: widen, operate in float, round once. */
#define DCCL_NARROW_OPS(tag, T)                                                             \
  DCCL_HD T dccl_##tag##_sum(T a, T b) {                                                    \
    return dccl_f32_to_##tag(dccl_##tag##_to_f32(a) + dccl_##tag##_to_f32(b));              \
  }                                                                                         \
  DCCL_HD T dccl_##tag##_prod(T a, T b) {                                                   \
    return dccl_f32_to_##tag(dccl_##tag##_to_f32(a) * dccl_##tag##_to_f32(b));              \
  }                                                                                         \
  DCCL_HD T dccl_##tag##_max(T a, T b) {                                                    \
    return dccl_f32_to_##tag(dccl_f32_max(dccl_##tag##_to_f32(a), dccl_##tag##_to_f32(b))); \
  }                                                                                         \
  DCCL_HD T dccl_##tag##_min(T a, T b) {                                                    \
    return dccl_f32_to_##tag(dccl_f32_min(dccl_##tag##_to_f32(a), dccl_##tag##_to_f32(b))); \
  }
DCCL_NARROW_OPS(fp16, uint16_t)
DCCL_NARROW_OPS(bf16, uint16_t)
DCCL_NARROW_OPS(e4m3, uint8_t)
DCCL_NARROW_OPS(e5m2, uint8_t)
#undef DCCL_NARROW_OPS

/* ---- one element, any type: for generic code and tests --------------------------------------------------- */

/* *out = a (op) b for elements of `type` (enum dccl_elem_type) and `kind` (0 sum, 1 prod, 2 max, 3 min: the values
 * of enum dccl_red_kind and of ncclSum..ncclMin). Returns 0, or -1 (out untouched) for an unknown type/kind. */
DCCL_HD int dccl_apply_op(int type, int kind, const void *a, const void *b, void *out) {
  if (kind < 0 || kind > 3) return -1;
#define DCCL_APPLY_CASE(nccl_type, tag, T)    \
  case nccl_type: {                           \
    T x, y, r;                                \
    memcpy(&x, a, sizeof x);                  \
    memcpy(&y, b, sizeof y);                  \
    r = kind == 0   ? dccl_##tag##_sum(x, y)  \
        : kind == 1 ? dccl_##tag##_prod(x, y) \
        : kind == 2 ? dccl_##tag##_max(x, y)  \
                    : dccl_##tag##_min(x, y); \
    memcpy(out, &r, sizeof r);                \
    return 0;                                 \
  }
  switch (type) {
    DCCL_APPLY_CASE(DCCL_ELEM_I8, i8, int8_t)
    DCCL_APPLY_CASE(DCCL_ELEM_U8, u8, uint8_t)
    DCCL_APPLY_CASE(DCCL_ELEM_I32, i32, int32_t)
    DCCL_APPLY_CASE(DCCL_ELEM_U32, u32, uint32_t)
    DCCL_APPLY_CASE(DCCL_ELEM_I64, i64, int64_t)
    DCCL_APPLY_CASE(DCCL_ELEM_U64, u64, uint64_t)
    DCCL_APPLY_CASE(DCCL_ELEM_FP16, fp16, uint16_t)
    DCCL_APPLY_CASE(DCCL_ELEM_F32, f32, float)
    DCCL_APPLY_CASE(DCCL_ELEM_F64, f64, double)
    DCCL_APPLY_CASE(DCCL_ELEM_BF16, bf16, uint16_t)
    DCCL_APPLY_CASE(DCCL_ELEM_E4M3, e4m3, uint8_t)
    DCCL_APPLY_CASE(DCCL_ELEM_E5M2, e5m2, uint8_t)
    default:
      return -1;
  }
#undef DCCL_APPLY_CASE
}

#endif
