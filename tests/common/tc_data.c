/* Ranges (why the double reference is exact and nothing overflows):
 * - floats, sum class: sign, exponent in {-2,-1,0}, and up to 23 random mantissa bits (40 for double, so a
 *   sum of 8 terms times a 3-bit scalar still fits the 53 bits of a double); largest |sum| over 8 ranks is 16.
 * - floats, prod class: |x| in [0.75, 1.5) with at most 4 mantissa bits: a product of 8 has at most 40
 *   significant bits and lies in [0.1, 26], inside every format's normal range (e4m3: 2^-6 .. 448).
 * - ints: sums and products wrap, and the reference wraps the same way (exact modular arithmetic). */
#include "tc_data.h"

#include <math.h>
#include <string.h>

uint64_t tc_seed_combine(uint64_t seed, uint64_t v) {
  return tc_mix64(seed ^ tc_mix64(v + 0x632be59bd9b4e019ull));
}

/* One mix per element: consecutive elements of a rank walk a splitmix64 sequence, and ranks (and cases) start at
 * unrelated points of it. */
static inline uint64_t tc_element_hash(uint64_t seed, int rank, uint64_t idx) {
  return tc_mix64(seed + (uint64_t)(unsigned)rank * 0xd1b54a32d192ed03ull + idx * 0x9e3779b97f4a7c15ull);
}

static inline void tc_gen_float(const struct tc_type_info *ti, enum tc_input_class cls, uint64_t h,
                                struct tc_value *out) {
  const int m = ti->mant_bits;
  int random_bits, exponent;
  uint64_t mant;
  const int negative = (int)(h & 1);
  h >>= 1;
  if (cls == TC_INPUT_PROD) {
    random_bits = m < 4 ? m : 4;
    exponent = (int)(h & 1) - 1; /* -1 or 0 */
    h >>= 1;
    mant = (h & ((1ull << random_bits) - 1)) << (m - random_bits);
    /* [0.75, 1) below 1, [1, 1.5) from 1: the top mantissa bit decides the half */
    if (exponent == -1)
      mant |= 1ull << (m - 1);
    else
      mant &= ~(1ull << (m - 1));
  } else {
    random_bits = ti->type == ncclFloat64 ? 40 : m;
    exponent = (int)(h % 3) - 2; /* -2, -1 or 0 */
    h >>= 2;
    mant = (h & ((1ull << random_bits) - 1)) << (m - random_bits);
  }
  out->bits = (uint64_t)negative << (m + ti->exp_bits) | (uint64_t)(exponent + ti->bias) << m | mant;
  /* the same number as a double, built from its fields: exact, and much cheaper than ldexp */
  uint64_t dbits = (uint64_t)negative << 63 | (uint64_t)(exponent + 1023) << 52 | mant << (52 - m);
  memcpy(&out->f, &dbits, 8);
}

static inline void tc_gen_inline(const struct tc_type_info *ti, enum tc_input_class cls, uint64_t seed, int rank,
                                 uint64_t idx, struct tc_value *out) {
  uint64_t h = tc_element_hash(seed, rank, idx);
  const uint64_t mask = tc_type_mask(ti);
  if (cls == TC_INPUT_BITS) {
    out->bits = h & mask;
    out->f = ti->kind == TC_KIND_FLOAT ? tc_float_from_bits(ti, out->bits) : 0.0;
    return;
  }
  if (ti->kind == TC_KIND_FLOAT) {
    tc_gen_float(ti, cls, h, out);
    return;
  }
  out->f = 0.0;
  if (cls == TC_INPUT_PROD) {
    int64_t v = (int64_t)(1 + (h >> 8) % 3);
    if (ti->kind == TC_KIND_INT && (h & 1)) v = -v;
    out->bits = (uint64_t)v & mask;
  } else {
    out->bits = h & mask;
  }
}

void tc_gen(const struct tc_type_info *ti, enum tc_input_class cls, uint64_t seed, int rank, uint64_t idx,
            struct tc_value *out) {
  tc_gen_inline(ti, cls, seed, rank, idx, out);
}

void tc_gen_ranks(const struct tc_type_info *ti, enum tc_input_class cls, uint64_t seed, int nranks, uint64_t idx,
                  struct tc_value *out) {
  for (int r = 0; r < nranks; r++) tc_gen_inline(ti, cls, seed, r, idx, &out[r]);
}

void tc_fill(void *buf, const struct tc_type_info *ti, enum tc_input_class cls, uint64_t seed, int rank, uint64_t idx0,
             size_t count) {
  unsigned char *p = buf;
  struct tc_value v;
  for (size_t i = 0; i < count; i++) {
    tc_gen_inline(ti, cls, seed, rank, idx0 + i, &v);
    tc_store_bits(p + i * ti->size, ti->size, v.bits);
  }
}

size_t tc_first_input_mismatch(const void *buf, const struct tc_type_info *ti, enum tc_input_class cls, uint64_t seed,
                               int rank, uint64_t idx0, size_t count) {
  const unsigned char *p = buf;
  struct tc_value v;
  for (size_t i = 0; i < count; i++) {
    tc_gen_inline(ti, cls, seed, rank, idx0 + i, &v);
    if (tc_load_bits(p + i * ti->size, ti->size) != v.bits) return i;
  }
  return count;
}

void tc_premul_scalar(const struct tc_type_info *ti, uint64_t seed, struct tc_value *out) {
  if (ti->kind == TC_KIND_FLOAT) {
    static const double choices[3] = {1.25, -0.75, 0.5};
    out->f = choices[tc_mix64(seed) % 3];
    out->bits = tc_float_to_bits(ti, out->f);
  } else {
    int64_t v = (ti->kind == TC_KIND_INT && (tc_mix64(seed) & 1)) ? -3 : 3;
    out->bits = (uint64_t)v & tc_type_mask(ti);
    out->f = 0.0;
  }
}

uint64_t tc_hash(const void *data, size_t bytes) {
  const unsigned char *p = data;
  uint64_t h = 0x84222325cbf29ce4ull ^ bytes;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  memcpy(&tail, p + i, bytes - i);
  return tc_mix64(h ^ tail);
}
