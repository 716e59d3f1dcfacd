/* Element math (reduce_math.h) and host reductions (reduce_host.c) against independent references:
 * conversions exhaustively and at every rounding boundary, binary ops, and dccl_reduce_host for every type, kind
 * and operand shape, with aliasing, odd lengths and unaligned starts. Prints a throughput line (not asserted). */
/* The reference must round like the code under test: no fused multiply-add whatever -march is used. */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives/reduce.h"
#include "pure/reduce_math.h"

static int n_passed, n_failed;

/* One named check; `detail` printed on failure only. */
static void check(int ok, const char *what, const char *detail) {
  if (ok) {
    n_passed++;
    return;
  }
  n_failed++;
  if (n_failed <= 40) printf("FAIL: %s%s%s\n", what, detail && *detail ? ": " : "", detail ? detail : "");
}

/* ---- an independent model of each narrow format ---------------------------------------------------------- */

enum fmt_id { FMT_FP16, FMT_BF16, FMT_E4M3, FMT_E5M2, FMT_COUNT };
struct fmt {
  const char *name;
  int ebits, mbits, bias;
  int ieee_specials; /* top exponent is inf/NaN (else: e4m3, only all-ones is NaN) */
  int saturate;      /* finite overflow gives the largest finite value instead of inf */
  unsigned max_bits; /* largest finite magnitude */
  double *value;     /* value[k] for magnitude bits k = 0..max_bits, increasing */
};
static struct fmt fmts[FMT_COUNT] = {
    {"fp16", 5, 10, 15, 1, 0, 0x7bff, NULL},
    {"bf16", 8, 7, 127, 1, 0, 0x7f7f, NULL},
    {"e4m3", 4, 3, 7, 0, 1, 0x7e, NULL},
    {"e5m2", 5, 2, 15, 1, 1, 0x7b, NULL},
};

static unsigned fmt_sign_bit(const struct fmt *f) {
  return 1u << (f->ebits + f->mbits);
}

/* Decodes with ldexp from the format's definition (NaN for NaN, +-inf for inf). */
static double ref_decode(const struct fmt *f, unsigned bits) {
  unsigned sign = bits & fmt_sign_bit(f);
  unsigned e = (bits >> f->mbits) & ((1u << f->ebits) - 1u);
  unsigned m = bits & ((1u << f->mbits) - 1u);
  unsigned emax = (1u << f->ebits) - 1u;
  double v;
  if (f->ieee_specials && e == emax)
    v = m ? NAN : INFINITY;
  else if (!f->ieee_specials && e == emax && m == (1u << f->mbits) - 1u)
    v = NAN;
  else if (e == 0)
    v = ldexp((double)m, 1 - f->bias - f->mbits);
  else
    v = ldexp((double)(m | (1u << f->mbits)), (int)e - f->bias - f->mbits);
  return sign ? -v : v;
}

static int is_nan_bits(const struct fmt *f, unsigned bits) {
  return isnan(ref_decode(f, bits));
}

/* Nearest-even rounding of x into the format, by search over its value table, with the overflow rules. */
static unsigned ref_round(const struct fmt *f, double x) {
  unsigned sign = signbit(x) ? fmt_sign_bit(f) : 0u;
  double ax = fabs(x);
  unsigned maxb = f->max_bits;
  unsigned inf_bits = f->ieee_specials ? ((1u << f->ebits) - 1u) << f->mbits : 0u;
  if (isnan(x)) return sign | (f->ieee_specials ? inf_bits | (1u << (f->mbits - 1)) : 0x7fu);
  double top = f->value[maxb];
  if (ax > top) {
    if (f->saturate && !(isinf(ax) && f->ieee_specials)) return sign | maxb;
    if (isinf(ax)) return sign | inf_bits;
    double next = top + (top - f->value[maxb - 1]); /* where the next binade would start */
    return sign | (ax >= (top + next) / 2 ? inf_bits : maxb);
  }
  unsigned lo = 0, hi = maxb; /* largest k with value[k] <= ax */
  while (lo < hi) {
    unsigned mid = (lo + hi + 1) / 2;
    if (f->value[mid] <= ax)
      lo = mid;
    else
      hi = mid - 1;
  }
  if (lo == maxb || f->value[lo] == ax) return sign | lo;
  double dlo = ax - f->value[lo], dhi = f->value[lo + 1] - ax;
  unsigned k = dlo < dhi ? lo : dhi < dlo ? lo + 1 : ((lo & 1u) ? lo + 1 : lo);
  return sign | k;
}

static unsigned to_fmt(int id, float x) {
  switch (id) {
    case FMT_FP16:
      return dccl_f32_to_fp16(x);
    case FMT_BF16:
      return dccl_f32_to_bf16(x);
    case FMT_E4M3:
      return dccl_f32_to_e4m3(x);
    default:
      return dccl_f32_to_e5m2(x);
  }
}
static float from_fmt(int id, unsigned bits) {
  switch (id) {
    case FMT_FP16:
      return dccl_fp16_to_f32((uint16_t)bits);
    case FMT_BF16:
      return dccl_bf16_to_f32((uint16_t)bits);
    case FMT_E4M3:
      return dccl_e4m3_to_f32((uint8_t)bits);
    default:
      return dccl_e5m2_to_f32((uint8_t)bits);
  }
}

static void build_tables(void) {
  for (int id = 0; id < FMT_COUNT; id++) {
    struct fmt *f = &fmts[id];
    f->value = malloc(sizeof(double) * (f->max_bits + 1));
    for (unsigned k = 0; k <= f->max_bits; k++) f->value[k] = ref_decode(f, k);
  }
}

static int same_float(double a, double b) {
  return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

/* Every bit pattern widens to its defined value and narrows back to itself (NaN: to a NaN of the same sign). */
static void test_exhaustive_roundtrip(void) {
  for (int id = 0; id < FMT_COUNT; id++) {
    const struct fmt *f = &fmts[id];
    unsigned count = fmt_sign_bit(f) << 1;
    int bad_widen = 0, bad_back = 0;
    char msg[160] = "";
    for (unsigned b = 0; b < count; b++) {
      float w = from_fmt(id, b);
      if (!same_float(w, ref_decode(f, b))) {
        if (!bad_widen++) snprintf(msg, sizeof msg, "0x%x widens to %a, expected %a", b, w, ref_decode(f, b));
      }
      unsigned back = to_fmt(id, w);
      int ok =
          is_nan_bits(f, b) ? (is_nan_bits(f, back) && (back & fmt_sign_bit(f)) == (b & fmt_sign_bit(f))) : back == b;
      if (!ok && !bad_back++) snprintf(msg, sizeof msg, "0x%x -> %a -> 0x%x", b, w, back);
    }
    char what[80];
    snprintf(what, sizeof what, "%s: all %u patterns widen exactly and round-trip", f->name, count);
    check(!bad_widen && !bad_back, what, msg);
  }
}

/* At every midpoint between neighbours (and one float either side of it), in both signs. */
static void test_rounding_boundaries(void) {
  for (int id = 0; id < FMT_COUNT; id++) {
    const struct fmt *f = &fmts[id];
    int bad = 0;
    char msg[200] = "";
    for (unsigned k = 0; k < f->max_bits; k++) {
      double mid = (f->value[k] + f->value[k + 1]) / 2;
      float fm = (float)mid;
      if ((double)fm != mid) {
        bad++;
        snprintf(msg, sizeof msg, "midpoint %a not a float", mid);
        continue;
      }
      unsigned even = (k & 1u) ? k + 1 : k;
      float probes[3] = {fm, nextafterf(fm, 0.0f), nextafterf(fm, INFINITY)};
      unsigned expect[3] = {even, k, k + 1};
      for (int p = 0; p < 3; p++) {
        for (int s = 0; s < 2; s++) {
          float x = s ? -probes[p] : probes[p];
          unsigned want = expect[p] | (s ? fmt_sign_bit(f) : 0u), got = to_fmt(id, x);
          if (got != want && !bad++) snprintf(msg, sizeof msg, "%a -> 0x%x, expected 0x%x", x, got, want);
        }
      }
    }
    char what[80];
    snprintf(what, sizeof what, "%s: ties to even and neighbours at all %u midpoints", f->name, f->max_bits);
    check(!bad, what, msg);
  }
}

/* A sweep over float bit patterns (every 4099th, plus the last ones before each binade) against ref_round. */
static void test_float_sweep(void) {
  for (int id = 0; id < FMT_COUNT; id++) {
    const struct fmt *f = &fmts[id];
    int bad = 0;
    char msg[200] = "";
    for (uint64_t u = 0; u <= 0xffffffffu; u += 4099) {
      for (int j = 0; j < 2; j++) {
        uint32_t bits = j ? (uint32_t)u | 0x7fffu : (uint32_t)u; /* the second probe lands near binade ends */
        float x = dccl_f32_from_bits(bits);
        unsigned got = to_fmt(id, x), want = ref_round(f, x);
        int ok = isnan(x) ? is_nan_bits(f, got) && !!(got & fmt_sign_bit(f)) == !!signbit(x) : got == want;
        if (!ok && !bad++) snprintf(msg, sizeof msg, "%a (0x%08x) -> 0x%x, expected 0x%x", x, bits, got, want);
      }
    }
    char what[80];
    snprintf(what, sizeof what, "%s: float sweep matches nearest-even reference", f->name);
    check(!bad, what, msg);
  }
#ifdef __FLT16_MAX__
  /* A second, unrelated reference for fp16: the compiler's own _Float16 conversion. */
  int bad = 0;
  char msg[160] = "";
  for (uint64_t u = 0; u <= 0xffffffffu; u += 1031) {
    float x = dccl_f32_from_bits((uint32_t)u);
    if (isnan(x)) continue;
    _Float16 h = (_Float16)x;
    uint16_t want, got = dccl_f32_to_fp16(x);
    memcpy(&want, &h, sizeof want);
    if (got != want && !bad++) snprintf(msg, sizeof msg, "%a -> 0x%x, _Float16 gives 0x%x", x, got, want);
  }
  check(!bad, "fp16: matches the compiler's _Float16 conversion", msg);
#endif
}

static void expect_bits(int id, float x, unsigned want) {
  unsigned got = to_fmt(id, x);
  char what[120];
  snprintf(what, sizeof what, "%s(%a) = 0x%x (got 0x%x)", fmts[id].name, x, want, got);
  check(got == want, what, NULL);
}

/* Named cases: halfway points, saturation and specials, as documented in reduce_math.h. */
static void test_named_cases(void) {
  expect_bits(FMT_FP16, 1.0f + 0x1p-11f, 0x3c00);     /* tie, even stays */
  expect_bits(FMT_FP16, 1.0f + 3 * 0x1p-11f, 0x3c02); /* tie, odd rounds up */
  expect_bits(FMT_FP16, 65504.0f, 0x7bff);
  expect_bits(FMT_FP16, 65519.996f, 0x7bff);
  expect_bits(FMT_FP16, 65520.0f, 0x7c00); /* overflow to inf */
  expect_bits(FMT_FP16, -INFINITY, 0xfc00);
  expect_bits(FMT_FP16, 0x1p-25f, 0x0000); /* half the smallest subnormal: tie to zero */
  expect_bits(FMT_FP16, 0x1.8p-25f, 0x0001);
  expect_bits(FMT_FP16, 0x1.8p-24f, 0x0002); /* 1.5 units: tie to even 2 */
  expect_bits(FMT_FP16, -0x1p-14f, 0x8400);  /* smallest normal */
  expect_bits(FMT_FP16, 0x1p-140f, 0x0000);  /* float subnormal */
  expect_bits(FMT_FP16, -0.0f, 0x8000);
  expect_bits(FMT_BF16, 1.0f + 0x1p-8f, 0x3f80);
  expect_bits(FMT_BF16, 1.0f + 3 * 0x1p-8f, 0x3f82);
  expect_bits(FMT_BF16, 0x1.fffffep127f, 0x7f80); /* overflow to inf */
  expect_bits(FMT_BF16, 0x1p-149f, 0x0000);
  expect_bits(FMT_BF16, 0x1.8p-134f, 0x0001); /* bf16 subnormals are float subnormals */
  expect_bits(FMT_E4M3, 448.0f, 0x7e);
  expect_bits(FMT_E4M3, 464.0f, 0x7e); /* would round to 480: saturates */
  expect_bits(FMT_E4M3, 1e30f, 0x7e);
  expect_bits(FMT_E4M3, -1e30f, 0xfe);
  expect_bits(FMT_E4M3, INFINITY, 0x7e);
  expect_bits(FMT_E4M3, -INFINITY, 0xfe);
  expect_bits(FMT_E4M3, NAN, 0x7f);
  expect_bits(FMT_E4M3, -NAN, 0xff);
  expect_bits(FMT_E4M3, 1.0625f, 0x38); /* tie between 1 and 1.125 */
  expect_bits(FMT_E4M3, 1.1875f, 0x3a); /* tie between 1.125 and 1.25 */
  expect_bits(FMT_E4M3, 0x1p-10f, 0x00);
  expect_bits(FMT_E4M3, 0x1.8p-10f, 0x01);
  expect_bits(FMT_E4M3, 0x1p-9f, 0x01);
  expect_bits(FMT_E5M2, 57344.0f, 0x7b);
  expect_bits(FMT_E5M2, 61440.0f, 0x7b); /* tie with the next binade: saturates */
  expect_bits(FMT_E5M2, 1e30f, 0x7b);
  expect_bits(FMT_E5M2, -1e30f, 0xfb);
  expect_bits(FMT_E5M2, INFINITY, 0x7c);
  expect_bits(FMT_E5M2, -INFINITY, 0xfc);
  expect_bits(FMT_E5M2, 0x1p-17f, 0x00);
  expect_bits(FMT_E5M2, 0x1.8p-17f, 0x01);
  check(isnan(dccl_e5m2_to_f32(dccl_f32_to_e5m2(NAN))), "e5m2: NaN stays NaN", NULL);
  check(isnan(dccl_fp16_to_f32(dccl_f32_to_fp16(NAN))), "fp16: NaN stays NaN", NULL);
  check(isnan(dccl_bf16_to_f32(dccl_f32_to_bf16(-NAN))) && (dccl_f32_to_bf16(-NAN) & 0x8000),
        "bf16: -NaN stays negative NaN", NULL);
  check(dccl_e4m3_to_f32(0x7e) == 448.0f && isnan(dccl_e4m3_to_f32(0x7f)) && dccl_e4m3_to_f32(0x78) == 256.0f,
        "e4m3: 0x78 is 256 (not inf), 0x7e is 448, 0x7f NaN", NULL);
}

/* Narrow binary ops against the exact result rounded by ref_round, over random and special operands. */
static void test_narrow_ops(void) {
  srand(7);
  for (int id = 0; id < FMT_COUNT; id++) {
    const struct fmt *f = &fmts[id];
    unsigned mask = (fmt_sign_bit(f) << 1) - 1u;
    int bad = 0;
    char msg[200] = "";
    for (int t = 0; t < 200000; t++) {
      unsigned a = (unsigned)rand() & mask, b = (unsigned)rand() & mask;
      if (t % 4 == 1) b = a ^ fmt_sign_bit(f); /* cancellation to zero */
      double x = ref_decode(f, a), y = ref_decode(f, b);
      for (int kind = 0; kind < 4; kind++) {
        double r = kind == 0 ? x + y : x * y;
        unsigned want;
        if (kind >= 2) {
          int take_b = isnan(x) || (!isnan(y) && (kind == 2 ? y > x : y < x));
          want = ref_round(f, take_b ? y : x);
        } else {
          want = ref_round(f, r);
        }
        int type = id == FMT_FP16   ? ncclFloat16
                   : id == FMT_BF16 ? ncclBfloat16
                   : id == FMT_E4M3 ? ncclFloat8e4m3
                                    : ncclFloat8e5m2;
        /* 8-byte operands, of which the type uses the low bytes (little-endian). */
        uint64_t ua = a, ub = b, uo = 0;
        dccl_apply_op(type, kind, &ua, &ub, &uo);
        unsigned got = (unsigned)uo;
        int ok = isnan(ref_decode(f, want)) ? is_nan_bits(f, got) : got == want;
        if (!ok && !bad++)
          snprintf(msg, sizeof msg, "kind %d on 0x%x, 0x%x: got 0x%x, expected 0x%x", kind, a, b, got, want);
      }
    }
    /* Products are exact in double; sums too except for bf16 operands far apart, where rounding to double
     * first is harmless (53 >= 2*8+2 bits). */
    char what[80];
    snprintf(what, sizeof what, "%s: sum/prod/max/min equal the exactly rounded result", f->name);
    check(!bad, what, msg);
  }
}

/* ---- dccl_reduce_host against an element-by-element reference ------------------------------------------ */

static const ncclDataType_t all_types[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                           ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                           ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
#define NTYPES ((int)(sizeof all_types / sizeof all_types[0]))

static int is_int_type(ncclDataType_t t) {
  return t <= ncclUint64;
}
static int is_signed_int(ncclDataType_t t) {
  return t == ncclInt8 || t == ncclInt32 || t == ncclInt64;
}
static int narrow_id(ncclDataType_t t) {
  return t == ncclFloat16      ? FMT_FP16
         : t == ncclBfloat16   ? FMT_BF16
         : t == ncclFloat8e4m3 ? FMT_E4M3
         : t == ncclFloat8e5m2 ? FMT_E5M2
                               : -1;
}

/* A value in the reference's arithmetic: integers as 64-bit, fp64 as double, all other floats as float. */
union val {
  int64_t i;
  uint64_t u;
  double d;
  float f;
};

static union val load(ncclDataType_t t, const void *p, size_t i) {
  union val v;
  memset(&v, 0, sizeof v);
  const unsigned char *b = (const unsigned char *)p + i * dccl_type_size(t);
  int8_t i8;
  uint8_t u8;
  int32_t i32;
  uint32_t u32;
  uint16_t u16;
  switch (t) {
    case ncclInt8:
      memcpy(&i8, b, 1), v.i = i8;
      break;
    case ncclUint8:
      memcpy(&u8, b, 1), v.u = u8;
      break;
    case ncclInt32:
      memcpy(&i32, b, 4), v.i = i32;
      break;
    case ncclUint32:
      memcpy(&u32, b, 4), v.u = u32;
      break;
    case ncclInt64:
      memcpy(&v.i, b, 8);
      break;
    case ncclUint64:
      memcpy(&v.u, b, 8);
      break;
    case ncclFloat32:
      memcpy(&v.f, b, 4);
      break;
    case ncclFloat64:
      memcpy(&v.d, b, 8);
      break;
    case ncclFloat16:
    case ncclBfloat16:
      memcpy(&u16, b, 2), v.f = from_fmt(narrow_id(t), u16);
      break;
    default:
      memcpy(&u8, b, 1), v.f = from_fmt(narrow_id(t), u8);
      break;
  }
  return v;
}

/* Wraps an integer result to the type's width (two's complement), as the type would hold it. */
static union val wrap(ncclDataType_t t, union val v) {
  switch (t) {
    case ncclInt8:
      v.i = (int8_t)(uint8_t)(v.u & 0xff);
      break;
    case ncclUint8:
      v.u &= 0xff;
      break;
    case ncclInt32:
      v.i = (int32_t)(uint32_t)(v.u & 0xffffffffu);
      break;
    case ncclUint32:
      v.u &= 0xffffffffu;
      break;
    default:
      break;
  }
  return v;
}

static void store(ncclDataType_t t, void *p, size_t i, union val v) {
  unsigned char *b = (unsigned char *)p + i * dccl_type_size(t);
  int id = narrow_id(t);
  if (id >= 0) {
    unsigned bits = to_fmt(id, v.f);
    uint16_t u16 = (uint16_t)bits;
    uint8_t u8 = (uint8_t)bits;
    if (dccl_type_size(t) == 2)
      memcpy(b, &u16, 2);
    else
      memcpy(b, &u8, 1);
    return;
  }
  memcpy(b,
         is_int_type(t)     ? (const void *)&v.u
         : t == ncclFloat64 ? (const void *)&v.d
                            : (const void *)&v.f,
         dccl_type_size(t));
}

static union val combine(ncclDataType_t t, int kind, union val a, union val b) {
  union val r = a;
  if (is_int_type(t)) {
    int sgn = is_signed_int(t);
    if (kind == DCCL_RED_SUM) r.u = a.u + b.u;
    if (kind == DCCL_RED_PROD) r.u = a.u * b.u;
    if (kind == DCCL_RED_MAX) r = (sgn ? b.i > a.i : b.u > a.u) ? b : a;
    if (kind == DCCL_RED_MIN) r = (sgn ? b.i < a.i : b.u < a.u) ? b : a;
    return wrap(t, r);
  }
  if (t == ncclFloat64) {
    if (kind == DCCL_RED_SUM) r.d = a.d + b.d;
    if (kind == DCCL_RED_PROD) r.d = a.d * b.d;
    if (kind >= DCCL_RED_MAX)
      r.d = isnan(a.d) ? b.d : isnan(b.d) ? a.d : (kind == DCCL_RED_MAX ? b.d > a.d : b.d < a.d) ? b.d : a.d;
    return r;
  }
  if (kind == DCCL_RED_SUM) r.f = a.f + b.f;
  if (kind == DCCL_RED_PROD) r.f = a.f * b.f;
  if (kind >= DCCL_RED_MAX)
    r.f = isnan(a.f) ? b.f : isnan(b.f) ? a.f : (kind == DCCL_RED_MAX ? b.f > a.f : b.f < a.f) ? b.f : a.f;
  return r;
}

static union val divide(ncclDataType_t t, union val a, int div) {
  if (is_signed_int(t))
    a.i /= div;
  else if (is_int_type(t))
    a.u /= (uint64_t)div;
  else if (t == ncclFloat64)
    a.d /= div;
  else
    a.f /= (float)div;
  return a;
}

static void ref_reduce(const struct dccl_redop *op, void *dst, const void *input, const void *const *srcs, int nsrcs,
                       size_t n, int apply_post) {
  ncclDataType_t t = op->type;
  union val pre = load(t, op->pre, 0);
  for (size_t i = 0; i < n; i++) {
    union val acc;
    int k = 0;
    if (input) {
      acc = load(t, input, i);
      if (op->has_pre) acc = combine(t, DCCL_RED_PROD, acc, pre);
    } else {
      acc = load(t, srcs[k++], i);
    }
    for (; k < nsrcs; k++) acc = combine(t, op->kind, acc, load(t, srcs[k], i));
    if (apply_post && op->post_div) acc = divide(t, acc, op->post_div);
    store(t, dst, i, acc);
  }
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return rng_state;
}

/* Test data: random bits for integers (so sums and products wrap); for floats mostly moderate values with a
 * sprinkling of NaN, inf, -0, subnormals and huge values. */
static void fill(ncclDataType_t t, void *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rng();
    union val v;
    v.u = r;
    if (!is_int_type(t)) {
      int special = (int)(r % 64);
      double x = ((double)(r >> 11) / (double)(1ull << 53) - 0.5) * 8;
      if (special == 0) x = NAN;
      if (special == 1) x = INFINITY;
      if (special == 2) x = -0.0;
      if (special == 3) x = 1e-42;
      if (special == 4) x = -3e38;
      if (t == ncclFloat64)
        v.d = x;
      else
        v.f = (float)x;
    }
    store(t, p, i, v);
  }
}

static int same_bits_or_nan(ncclDataType_t t, const void *a, const void *b, size_t n, size_t *where) {
  size_t es = dccl_type_size(t);
  for (size_t i = 0; i < n; i++) {
    if (!memcmp((const char *)a + i * es, (const char *)b + i * es, es)) continue;
    if (!is_int_type(t) && isnan(t == ncclFloat64 ? load(t, a, i).d : load(t, a, i).f) &&
        isnan(t == ncclFloat64 ? load(t, b, i).d : load(t, b, i).f))
      continue; /* which NaN payload survives a + b is not specified */
    *where = i;
    return 0;
  }
  return 1;
}

enum alias_mode { ALIAS_NONE, ALIAS_INPUT, ALIAS_SRC0, ALIAS_SRC_LAST, ALIAS_MODES };
static const char *alias_names[] = {"none", "dst==input", "dst==srcs[0]", "dst==srcs[last]"};

#define MAXSRC 5
#define MAXLEN 1100

static void test_reduce_host(void) {
  static const size_t lens[] = {1, 7, 33, 257, 1029};
  static const int offsets[] = {0, 1, 3};
  static const int nsrcs_list[] = {0, 1, 2, 3, 5};
  /* One region per operand, with room for the offsets. */
  static unsigned char bufs[MAXSRC + 2][(MAXLEN + 8) * 8], orig[MAXSRC + 2][(MAXLEN + 8) * 8];
  static unsigned char out[(MAXLEN + 8) * 8], want[(MAXLEN + 8) * 8];
  long cases = 0, bad = 0;
  for (int ti = 0; ti < NTYPES; ti++) {
    ncclDataType_t t = all_types[ti];
    size_t es = dccl_type_size(t);
    for (int r = 0; r < MAXSRC + 2; r++) fill(t, orig[r], MAXLEN + 8);
    for (int kind = 0; kind < 4; kind++)
      for (int si = 0; si < 5; si++)
        for (int with_input = 0; with_input < 2; with_input++)
          for (int pre = 0; pre < 2; pre++)
            for (int post = 0; post < 3; post++) /* 0: none; 1: post_div set, not applied; 2: applied */
              for (int alias = 0; alias < ALIAS_MODES; alias++)
                for (int li = 0; li < 5; li++)
                  for (int oi = 0; oi < 3; oi++) {
                    int nsrcs = nsrcs_list[si];
                    if (!with_input && nsrcs == 0) continue;
                    if (alias == ALIAS_INPUT && !with_input) continue;
                    if ((alias == ALIAS_SRC0 && nsrcs < 1) || (alias == ALIAS_SRC_LAST && nsrcs < 2)) continue;
                    size_t n = lens[li];
                    int off = offsets[oi];
                    struct dccl_redop op;
                    memset(&op, 0, sizeof op);
                    op.type = t;
                    op.kind = (enum dccl_red_kind)kind;
                    if (pre) {
                      union val s;
                      if (is_int_type(t))
                        s.i = is_signed_int(t) ? -3 : 3;
                      else if (t == ncclFloat64)
                        s.d = 1.0 / 3;
                      else
                        s.f = 0.25f;
                      op.has_pre = 1;
                      store(t, op.pre, 0, s);
                    }
                    op.post_div = post ? 3 : 0;
                    /* Operands start at different element offsets, so their alignments differ. */
                    unsigned char *in = with_input ? bufs[0] + (size_t)(off + 1) * es : NULL;
                    const void *srcs[MAXSRC];
                    for (int k = 0; k < nsrcs; k++) srcs[k] = bufs[1 + k] + (size_t)((off + 2 + k) % 4) * es;
                    unsigned char *dst = bufs[MAXSRC + 1] + (size_t)off * es;
                    if (alias == ALIAS_INPUT) dst = in;
                    if (alias == ALIAS_SRC0) dst = (unsigned char *)srcs[0];
                    if (alias == ALIAS_SRC_LAST) dst = (unsigned char *)srcs[nsrcs - 1];
                    memcpy(bufs, orig, sizeof bufs);
                    ref_reduce(&op, want, in, srcs, nsrcs, n, post == 2);
                    /* Elements just past the end must stay untouched. */
                    unsigned char guard[8];
                    memcpy(guard, dst + n * es, es);
                    dccl_reduce_host(&op, dst, in, srcs, nsrcs, n, post == 2);
                    memcpy(out, dst, n * es);
                    size_t where = 0;
                    int ok = same_bits_or_nan(t, out, want, n, &where) && !memcmp(guard, dst + n * es, es);
                    /* Sources other than an aliased destination must be unchanged. */
                    for (int k = 0; ok && k < nsrcs; k++)
                      if ((const void *)dst != srcs[k])
                        ok = !memcmp(srcs[k], orig[1 + k] + ((const unsigned char *)srcs[k] - bufs[1 + k]), n * es);
                    /* Every case is one check; the first few failures are described. */
                    cases++;
                    char msg[240] = "";
                    if (!ok && bad++ < 10)
                      snprintf(msg, sizeof msg,
                               "%s kind %d nsrcs %d input %d pre %d post %d alias %s n %zu off %d, first "
                               "difference at %zu",
                               dccl_type_name(t), kind, nsrcs, with_input, pre, post, alias_names[alias], n, off,
                               where);
                    if (ok || bad <= 10)
                      check(ok, "dccl_reduce_host vs reference", msg);
                    else
                      n_failed++;
                  }
  }
  printf("dccl_reduce_host: %ld cases (type x kind x shape x alias x length x offset), %ld differ\n", cases, bad);
}

static void test_builtin_ops(void) {
  struct dccl_redop op;
  int ok = 1;
  for (int ti = 0; ti < NTYPES; ti++) {
    ncclDataType_t t = all_types[ti];
    const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin};
    for (int k = 0; k < 4; k++) {
      dccl_redop_builtin(&op, ops[k], t, 4);
      ok &= op.type == t && (int)op.kind == k && !op.has_pre && !op.post_div;
    }
    dccl_redop_builtin(&op, ncclAvg, t, 4);
    if (is_int_type(t)) {
      ok &= op.kind == DCCL_RED_SUM && !op.has_pre && op.post_div == 4;
    } else {
      union val s = load(t, op.pre, 0);
      ok &= op.kind == DCCL_RED_SUM && op.has_pre && !op.post_div && (t == ncclFloat64 ? s.d == 0.25 : s.f == 0.25f);
    }
  }
  check(ok, "dccl_redop_builtin: kinds, float avg premultiplies by 1/n, integer avg divides", NULL);
  dccl_redop_builtin(&op, ncclAvg, ncclFloat32, 3);
  float third;
  memcpy(&third, op.pre, 4);
  check(third == 1.0f / 3.0f, "dccl_redop_builtin: float avg of 3 ranks stores 1/3", NULL);

  /* Integer average over 4 "ranks": wrapped sum, then C truncation toward zero. */
  int32_t a[3] = {-7, 7, 2147483647}, b[3] = {0, 0, 1}, c[3] = {0, 1, 0}, d[3] = {0, 0, 0}, res[3];
  const void *srcs[3] = {b, c, d};
  dccl_redop_builtin(&op, ncclAvg, ncclInt32, 4);
  dccl_reduce_host(&op, res, a, srcs, 3, 3, 1);
  check(res[0] == -1 && res[1] == 2 && res[2] == INT32_MIN / 4, "int32 avg: truncates toward zero after a wrapped sum",
        NULL);
  uint8_t ua[2] = {200, 255}, ub[2] = {100, 1}, ures[2];
  const void *usrc[1] = {ub};
  dccl_redop_builtin(&op, ncclAvg, ncclUint8, 2);
  dccl_reduce_host(&op, ures, ua, usrc, 1, 2, 1);
  check(ures[0] == 22 && ures[1] == 0, "uint8 avg: (200+100) mod 256 / 2 = 22, (255+1) mod 256 / 2 = 0", NULL);

  check(dccl_type_size(ncclInt8) == 1 && dccl_type_size(ncclFloat16) == 2 && dccl_type_size(ncclBfloat16) == 2 &&
            dccl_type_size(ncclFloat32) == 4 && dccl_type_size(ncclUint64) == 8 &&
            dccl_type_size(ncclFloat8e5m2) == 1 && dccl_type_size((ncclDataType_t)12) == 0 &&
            dccl_type_size((ncclDataType_t)-1) == 0,
        "dccl_type_size", NULL);
  check(!strcmp(dccl_type_name(ncclBfloat16), "bfloat16") && !strcmp(dccl_type_name(ncclFloat8e4m3), "float8e4m3") &&
            !strcmp(dccl_type_name((ncclDataType_t)99), "unknown"),
        "dccl_type_name", NULL);

  /* Copies, and bad calls that must leave dst alone. */
  float x[5] = {1, 2, 3, 4, 5}, y[5] = {0};
  const void *one[1] = {x};
  dccl_redop_builtin(&op, ncclSum, ncclFloat32, 2);
  dccl_reduce_host(&op, y, NULL, one, 1, 5, 1);
  check(!memcmp(x, y, sizeof x), "a single source is copied", NULL);
  dccl_reduce_host(&op, x, NULL, one, 1, 5, 1);
  check(x[4] == 5, "a single source onto itself is a no-op", NULL);
  memset(y, 0, sizeof y);
  op.type = (ncclDataType_t)42;
  dccl_reduce_host(&op, y, x, one, 1, 5, 0);
  op.type = ncclFloat32;
  op.kind = (enum dccl_red_kind)9;
  dccl_reduce_host(&op, y, x, one, 1, 5, 0);
  op.kind = DCCL_RED_SUM;
  dccl_reduce_host(&op, y, NULL, NULL, 0, 5, 0);
  dccl_reduce_host(&op, y, NULL, NULL, 1, 5, 0);
  dccl_reduce_host(&op, y, x, one, -1, 5, 0);
  check(y[0] == 0 && y[4] == 0, "invalid type, kind or operands: nothing written", NULL);
  dccl_reduce_host(NULL, y, x, one, 1, 5, 0);
  dccl_reduce_host(&op, NULL, x, one, 1, 5, 0);
  check(1, "NULL op or dst: no crash", NULL);
}

/* ---- throughput (reported, not asserted) ---------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best of several runs of `reps` calls; returns GB/s of memory traffic (bytes read + written). */
static double measure(ncclDataType_t t, void *dst, void *a, void *b, size_t bytes, int memcpy_only) {
  size_t n = bytes / dccl_type_size(t);
  struct dccl_redop op;
  dccl_redop_builtin(&op, ncclSum, t, 2);
  const void *srcs[2] = {a, b};
  double best = 1e30;
  for (int run = 0; run < 5; run++) {
    int reps = 8;
    double t0 = now_s();
    for (int r = 0; r < reps; r++) {
      if (memcpy_only)
        memcpy(dst, a, bytes);
      else
        dccl_reduce_host(&op, dst, NULL, srcs, 2, n, 0);
    }
    double dt = (now_s() - t0) / reps;
    if (dt < best) best = dt;
  }
  return (double)bytes * (memcpy_only ? 2 : 3) / best / 1e9;
}

/* 8 MiB arrays as asked of the library; also 64 MiB, beyond the caches of smaller machines, where memcpy and
 * the reduction are both limited by DRAM. Narrow types only at 8 MiB, to keep the test short. */
static void report_throughput(void) {
  for (size_t mib = 8; mib <= 64; mib *= 8) {
    size_t bytes = mib << 20;
    void *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes), *d = aligned_alloc(64, bytes);
    if (!a || !b || !d) {
      check(0, "allocating benchmark buffers", NULL);
      free(a), free(b), free(d);
      return;
    }
    memset(a, 0x3c, bytes), memset(b, 0x3c, bytes), memset(d, 0, bytes); /* finite values in every type */
    double mc = measure(ncclFloat32, d, a, b, bytes, 1);
    double f32 = measure(ncclFloat32, d, a, b, bytes, 0);
    printf(
        "throughput, %zu MiB arrays, GB/s of memory traffic (bytes read + written): memcpy %.1f; float32 sum "
        "of 2 srcs %.1f (%.0f%% of memcpy)",
        mib, mc, f32, 100 * f32 / mc);
    if (mib == 8) {
      printf("; int32 %.1f, float16 %.1f, bfloat16 %.1f, float8e4m3 %.1f", measure(ncclInt32, d, a, b, bytes, 0),
             measure(ncclFloat16, d, a, b, bytes, 0), measure(ncclBfloat16, d, a, b, bytes, 0),
             measure(ncclFloat8e4m3, d, a, b, bytes, 0));
    }
    printf("\n");
    free(a), free(b), free(d);
  }
}

int main(void) {
  build_tables();
  test_exhaustive_roundtrip();
  test_rounding_boundaries();
  test_named_cases();
  test_float_sweep();
  test_narrow_ops();
  test_builtin_ops();
  test_reduce_host();
  report_throughput();
  printf("test_reduce: %d passed, %d failed\n", n_passed, n_failed);
  for (int id = 0; id < FMT_COUNT; id++) free(fmts[id].value);
  return n_failed ? 1 : 0;
}
