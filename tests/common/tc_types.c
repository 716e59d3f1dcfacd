#include "tc_types.h"

#include <math.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

static const struct tc_type_info tc_types[ncclNumTypes] = {
    {ncclInt8, "int8", 1, TC_KIND_INT, 0, 0, 0, 0, 0.0},
    {ncclUint8, "uint8", 1, TC_KIND_UINT, 0, 0, 0, 0, 0.0},
    {ncclInt32, "int32", 4, TC_KIND_INT, 0, 0, 0, 0, 0.0},
    {ncclUint32, "uint32", 4, TC_KIND_UINT, 0, 0, 0, 0, 0.0},
    {ncclInt64, "int64", 8, TC_KIND_INT, 0, 0, 0, 0, 0.0},
    {ncclUint64, "uint64", 8, TC_KIND_UINT, 0, 0, 0, 0, 0.0},
    {ncclFloat16, "half", 2, TC_KIND_FLOAT, 5, 10, 15, 0, 0x1p-11},
    {ncclFloat32, "float", 4, TC_KIND_FLOAT, 8, 23, 127, 0, 0x1p-24},
    {ncclFloat64, "double", 8, TC_KIND_FLOAT, 11, 52, 1023, 0, 0x1p-53},
    {ncclBfloat16, "bfloat16", 2, TC_KIND_FLOAT, 8, 7, 127, 0, 0x1p-8},
    {ncclFloat8e4m3, "f8e4m3", 1, TC_KIND_FLOAT, 4, 3, 7, 1, 0x1p-4},
    {ncclFloat8e5m2, "f8e5m2", 1, TC_KIND_FLOAT, 5, 2, 15, 0, 0x1p-3},
};

static double tc_minifloat_decode(const struct tc_type_info *ti, uint64_t bits);

const struct tc_type_info *tc_type(ncclDataType_t type) {
  if ((int)type < 0 || (int)type >= ncclNumTypes) return NULL;
  return &tc_types[type];
}

int tc_type_from_name(const char *name, ncclDataType_t *out) {
  static const struct {
    const char *alias;
    ncclDataType_t type;
  } aliases[] = {{"char", ncclInt8},          {"int", ncclInt32},         {"float16", ncclFloat16},
                 {"fp16", ncclFloat16},       {"float32", ncclFloat32},   {"float64", ncclFloat64},
                 {"bf16", ncclBfloat16},      {"e4m3", ncclFloat8e4m3},   {"e5m2", ncclFloat8e5m2},
                 {"fp8e4m3", ncclFloat8e4m3}, {"fp8e5m2", ncclFloat8e5m2}};
  for (int t = 0; t < ncclNumTypes; t++) {
    if (strcasecmp(name, tc_types[t].name) == 0) {
      *out = tc_types[t].type;
      return 0;
    }
  }
  for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
    if (strcasecmp(name, aliases[i].alias) == 0) {
      *out = aliases[i].type;
      return 0;
    }
  }
  return -1;
}

int64_t tc_int_signed(const struct tc_type_info *ti, uint64_t bits) {
  unsigned width = 8u * (unsigned)ti->size;
  bits &= tc_type_mask(ti);
  if (ti->kind == TC_KIND_INT && width < 64 && (bits >> (width - 1)) & 1) bits |= ~tc_type_mask(ti);
  return (int64_t)bits;
}

/* The 8- and 16-bit formats decode through tables (every bit pattern), built once from the generic decoder. */
static double tc_decode_fp16[1 << 16], tc_decode_bf16[1 << 16], tc_decode_e4m3[1 << 8], tc_decode_e5m2[1 << 8];
static pthread_once_t tc_decode_once = PTHREAD_ONCE_INIT;

static void tc_build_decode_tables(void) {
  for (uint64_t b = 0; b < (1u << 16); b++) {
    tc_decode_fp16[b] = tc_minifloat_decode(&tc_types[ncclFloat16], b);
    tc_decode_bf16[b] = tc_minifloat_decode(&tc_types[ncclBfloat16], b);
  }
  for (uint64_t b = 0; b < (1u << 8); b++) {
    tc_decode_e4m3[b] = tc_minifloat_decode(&tc_types[ncclFloat8e4m3], b);
    tc_decode_e5m2[b] = tc_minifloat_decode(&tc_types[ncclFloat8e5m2], b);
  }
}

double tc_float_from_bits(const struct tc_type_info *ti, uint64_t bits) {
  switch (ti->type) {
    case ncclFloat16:
      pthread_once(&tc_decode_once, tc_build_decode_tables);
      return tc_decode_fp16[bits & 0xffff];
    case ncclBfloat16:
      pthread_once(&tc_decode_once, tc_build_decode_tables);
      return tc_decode_bf16[bits & 0xffff];
    case ncclFloat8e4m3:
      pthread_once(&tc_decode_once, tc_build_decode_tables);
      return tc_decode_e4m3[bits & 0xff];
    case ncclFloat8e5m2:
      pthread_once(&tc_decode_once, tc_build_decode_tables);
      return tc_decode_e5m2[bits & 0xff];
    default:
      return tc_minifloat_decode(ti, bits);
  }
}

static double tc_minifloat_decode(const struct tc_type_info *ti, uint64_t bits) {
  if (ti->kind != TC_KIND_FLOAT) return 0.0;
  if (ti->type == ncclFloat32) {
    float f;
    uint32_t b = (uint32_t)bits;
    memcpy(&f, &b, 4);
    return f;
  }
  if (ti->type == ncclFloat64) {
    double d;
    memcpy(&d, &bits, 8);
    return d;
  }
  const int m = ti->mant_bits, e = ti->exp_bits;
  const uint64_t mant = bits & ((1ull << m) - 1);
  const uint64_t expf = (bits >> m) & ((1ull << e) - 1);
  const int negative = (int)((bits >> (m + e)) & 1);
  const uint64_t exp_all_ones = (1ull << e) - 1;
  double v;
  if (ti->finite_only && expf == exp_all_ones && mant == (1ull << m) - 1) {
    v = NAN;
  } else if (!ti->finite_only && expf == exp_all_ones) {
    v = mant ? NAN : INFINITY;
  } else if (expf == 0) {
    v = ldexp((double)mant, 1 - ti->bias - m);
  } else {
    v = ldexp((double)(mant | (1ull << m)), (int)expf - ti->bias - m);
  }
  return negative ? -v : v;
}

uint64_t tc_float_to_bits(const struct tc_type_info *ti, double v) {
  if (ti->kind != TC_KIND_FLOAT) return 0;
  if (ti->type == ncclFloat32) {
    float f = (float)v;
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
  }
  if (ti->type == ncclFloat64) {
    uint64_t b;
    memcpy(&b, &v, 8);
    return b;
  }
  const int m = ti->mant_bits, e = ti->exp_bits;
  const uint64_t sign = (uint64_t)(signbit(v) ? 1 : 0) << (m + e);
  const uint64_t exp_all_ones = (1ull << e) - 1;
  const uint64_t nan_bits =
      ti->finite_only ? (exp_all_ones << m) | ((1ull << m) - 1) : (exp_all_ones << m) | 1ull << (m - 1);
  const uint64_t overflow_bits = ti->finite_only ? nan_bits : exp_all_ones << m;
  if (isnan(v)) return sign | nan_bits;
  double a = fabs(v);
  if (a == 0.0) return sign;
  if (isinf(a)) return sign | overflow_bits;
  const int emin = 1 - ti->bias; /* exponent of the smallest normal */
  int fexp;
  frexp(a, &fexp);
  int lead = fexp - 1; /* a is in [2^lead, 2^(lead+1)) */
  if (lead < emin) lead = emin;
  int quantum_exp = lead - m;
  double q = rint(ldexp(a, -quantum_exp)); /* exact scaling, then round to nearest even */
  if (q >= ldexp(1.0, m + 1)) {            /* rounding carried into the next binade */
    q /= 2;
    quantum_exp++;
  }
  uint64_t r = (uint64_t)q;
  uint64_t expf, mant;
  if (r < (1ull << m)) { /* subnormal (only when lead == emin) */
    expf = 0;
    mant = r;
  } else {
    expf = (uint64_t)(quantum_exp + m + ti->bias);
    mant = r - (1ull << m);
  }
  const uint64_t max_exp = ti->finite_only ? exp_all_ones : exp_all_ones - 1;
  if (expf > max_exp || (ti->finite_only && expf == exp_all_ones && mant == (1ull << m) - 1))
    return sign | overflow_bits;
  return sign | expf << m | mant;
}
