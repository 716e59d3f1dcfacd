/* Self-test of the checker itself, with no library involved:
 *  1. the minifloat codec against known encodings and a bit-pattern round trip;
 *  2. soundness: reductions simulated in each type's own arithmetic (rounding after every operation, in ring,
 *     reversed and tree orders, avg both as premultiply-then-sum and sum-then-divide) are all accepted;
 *  3. sensitivity: one corrupted element is rejected by the value check, and one changed element (even a
 *     one-bit change inside the tolerance) makes the cross-rank bitwise comparison name the rank. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tc_check.h"
#include "tc_data.h"
#include "tc_types.h"

static int failures;

#define EXPECT(cond, ...)                                  \
  do {                                                     \
    if (!(cond)) {                                         \
      failures++;                                          \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fputc('\n', stderr);                                 \
    }                                                      \
  } while (0)

static void test_codec_known_values(void) {
  const struct tc_type_info *h = tc_type(ncclFloat16), *b = tc_type(ncclBfloat16);
  const struct tc_type_info *e4 = tc_type(ncclFloat8e4m3), *e5 = tc_type(ncclFloat8e5m2);
  EXPECT(tc_float_to_bits(h, 1.0) == 0x3C00, "fp16 1.0");
  EXPECT(tc_float_to_bits(h, -2.0) == 0xC000, "fp16 -2.0");
  EXPECT(tc_float_to_bits(h, 65504.0) == 0x7BFF, "fp16 max");
  EXPECT(tc_float_to_bits(h, 1.0 + 0x1p-11) == 0x3C00, "fp16 tie rounds to even (down)");
  EXPECT(tc_float_to_bits(h, 1.0 + 3 * 0x1p-11) == 0x3C02, "fp16 tie rounds to even (up)");
  EXPECT(tc_float_to_bits(h, 0x1p-24) == 0x0001, "fp16 smallest subnormal");
  EXPECT(tc_float_to_bits(h, 1e6) == 0x7C00, "fp16 overflow is inf");
  EXPECT(tc_float_to_bits(b, 1.0) == 0x3F80, "bf16 1.0");
  EXPECT(tc_float_to_bits(b, 1.0 + 0x1p-8) == 0x3F80, "bf16 tie to even");
  EXPECT(tc_float_to_bits(e4, 448.0) == 0x7E, "e4m3 max");
  EXPECT(tc_float_to_bits(e4, 1.0) == 0x38, "e4m3 1.0");
  EXPECT(tc_float_to_bits(e4, 0x1p-9) == 0x01, "e4m3 smallest subnormal");
  EXPECT(isnan(tc_float_from_bits(e4, 0x7F)), "e4m3 0x7f is NaN");
  EXPECT(tc_float_from_bits(e4, 0x78) == 256.0, "e4m3 exponent 15 is a number");
  EXPECT(tc_float_to_bits(e5, 57344.0) == 0x7B, "e5m2 max");
  EXPECT(tc_float_to_bits(e5, 1.0) == 0x3C, "e5m2 1.0");
  EXPECT(isinf(tc_float_from_bits(e5, 0x7C)), "e5m2 0x7c is inf");
  EXPECT(tc_float_from_bits(e5, 0x01) == 0x1p-16, "e5m2 smallest subnormal");
}

static void test_codec_round_trip(void) {
  const ncclDataType_t small[] = {ncclFloat16, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  for (size_t t = 0; t < 4; t++) {
    const struct tc_type_info *ti = tc_type(small[t]);
    uint64_t patterns = 1ull << (8 * ti->size);
    for (uint64_t bits = 0; bits < patterns; bits++) {
      double v = tc_float_from_bits(ti, bits);
      if (isnan(v)) continue;
      uint64_t back = tc_float_to_bits(ti, v);
      EXPECT(back == bits, "%s round trip 0x%llx -> %g -> 0x%llx", ti->name, (unsigned long long)bits, v,
             (unsigned long long)back);
    }
  }
}

/* One operation in the type's own arithmetic: exact in double for these inputs, then rounded to the type. */
static double round_to(const struct tc_type_info *ti, double v) {
  return tc_float_from_bits(ti, tc_float_to_bits(ti, v));
}

static uint64_t int_combine(const struct tc_type_info *ti, enum tc_op op, uint64_t a, uint64_t b) {
  switch (op) {
    case TC_OP_PROD:
      return (a * b) & tc_type_mask(ti);
    case TC_OP_MAX:
    case TC_OP_MIN: {
      int a_greater = ti->kind == TC_KIND_INT ? tc_int_signed(ti, a) > tc_int_signed(ti, b) : a > b;
      return (a_greater == (op == TC_OP_MAX)) ? a : b;
    }
    default:
      return (a + b) & tc_type_mask(ti);
  }
}

static double float_combine(const struct tc_type_info *ti, enum tc_op op, double a, double b) {
  switch (op) {
    case TC_OP_PROD:
      return round_to(ti, a * b);
    case TC_OP_MAX:
      return a > b ? a : b;
    case TC_OP_MIN:
      return a < b ? a : b;
    default:
      return round_to(ti, a + b);
  }
}

/* A library-style reduction of in[] in `order` (0 ring from rank start, 1 reversed, 2 pairwise tree), with the
 * premultiply of avg/premulsum applied per rank first, avg's division (ints, or floats when divide_last) at the
 * end. Returns the output bits. */
static uint64_t simulate(const struct tc_reduction *red, const struct tc_value *in, int order, int start,
                         int divide_last) {
  const struct tc_type_info *ti = red->type;
  const int n = red->nranks;
  struct tc_value v[16] = {{0, 0}};
  for (int r = 0; r < n; r++) {
    v[r] = in[r];
    if (ti->kind == TC_KIND_FLOAT) {
      if (red->op == TC_OP_PREMULSUM) v[r].f = round_to(ti, in[r].f * red->scalar.f);
      if (red->op == TC_OP_AVG && !divide_last) v[r].f = round_to(ti, in[r].f * round_to(ti, 1.0 / n));
    } else if (red->op == TC_OP_PREMULSUM) {
      v[r].bits = (in[r].bits * red->scalar.bits) & tc_type_mask(ti);
    }
  }
  int idx[16] = {0};
  for (int k = 0; k < n; k++) idx[k] = order == 1 ? (start + n - k) % n : (start + k) % n;
  struct tc_value acc;
  if (order == 2) { /* tree: combine neighbours level by level */
    int live = n;
    struct tc_value level[16];
    for (int k = 0; k < n; k++) level[k] = v[idx[k]];
    while (live > 1) {
      int next = 0;
      for (int k = 0; k < live; k += 2) {
        if (k + 1 < live) {
          if (ti->kind == TC_KIND_FLOAT)
            level[next].f = float_combine(ti, red->op, level[k].f, level[k + 1].f);
          else
            level[next].bits = int_combine(ti, red->op, level[k].bits, level[k + 1].bits);
        } else {
          level[next] = level[k];
        }
        next++;
      }
      live = next;
    }
    acc = level[0];
  } else {
    acc = v[idx[0]];
    for (int k = 1; k < n; k++) {
      if (ti->kind == TC_KIND_FLOAT)
        acc.f = float_combine(ti, red->op, acc.f, v[idx[k]].f);
      else
        acc.bits = int_combine(ti, red->op, acc.bits, v[idx[k]].bits);
    }
  }
  if (ti->kind == TC_KIND_FLOAT) {
    if (red->op == TC_OP_AVG && divide_last) acc.f = round_to(ti, acc.f / n);
    return tc_float_to_bits(ti, acc.f);
  }
  if (red->op == TC_OP_AVG) {
    if (ti->kind == TC_KIND_INT)
      acc.bits = (uint64_t)(tc_int_signed(ti, acc.bits) / n) & tc_type_mask(ti);
    else
      acc.bits /= (uint64_t)n;
  }
  return acc.bits;
}

/* A value the checker must reject: far outside the tolerance (floats) or off by one (integers). */
static uint64_t corrupt(const struct tc_reduction *red, const struct tc_expected *exp, uint64_t good) {
  const struct tc_type_info *ti = red->type;
  if (ti->kind != TC_KIND_FLOAT) return (good + 1) & tc_type_mask(ti);
  double bad =
      exp->value >= 0 ? -(fabs(exp->value) + 2 * exp->tolerance + 1.0) : fabs(exp->value) + 2 * exp->tolerance + 1.0;
  return tc_float_to_bits(ti, bad);
}

static void test_reductions(void) {
  const int rank_counts[] = {1, 2, 3, 4, 5, 8};
  const size_t elements = 3000;
  for (int t = 0; t < ncclNumTypes; t++) {
    const struct tc_type_info *ti = tc_type((ncclDataType_t)t);
    for (int op = 0; op < TC_NUM_OPS; op++) {
      for (size_t nc = 0; nc < sizeof(rank_counts) / sizeof(rank_counts[0]); nc++) {
        uint64_t seed = tc_seed_combine(tc_seed_combine(12345, (uint64_t)t), (uint64_t)(op * 16 + rank_counts[nc]));
        struct tc_value scalar;
        tc_premul_scalar(ti, seed, &scalar);
        struct tc_reduction red;
        tc_reduction_init(&red, ti, (enum tc_op)op, rank_counts[nc], &scalar);
        int accepted = 0, rejected_bad = 0;
        for (size_t i = 0; i < elements; i++) {
          struct tc_value in[16];
          for (int r = 0; r < red.nranks; r++) {
            tc_gen(ti, tc_op_input_class(red.op), seed, r, i, &in[r]);
            if (ti->kind == TC_KIND_FLOAT) {
              EXPECT(isfinite(in[r].f) && tc_float_from_bits(ti, in[r].bits) == in[r].f, "%s input %zu not exact",
                     ti->name, i);
            }
          }
          struct tc_expected exp;
          tc_reference(&red, in, &exp);
          for (int order = 0; order < 3; order++) {
            for (int divide_last = 0; divide_last < 2; divide_last++) {
              uint64_t out = simulate(&red, in, order, (int)(i % (size_t)red.nranks), divide_last);
              if (tc_accept(&red, &exp, out)) {
                accepted++;
              } else {
                char why[160];
                tc_describe_mismatch(&red, &exp, out, why, sizeof(why));
                EXPECT(0, "%s %s N=%d element %zu order %d: a correct reduction was rejected: %s", ti->name,
                       tc_op_name(red.op), red.nranks, i, order, why);
              }
            }
          }
          uint64_t good = simulate(&red, in, 0, 0, 0);
          if (!tc_accept(&red, &exp, corrupt(&red, &exp, good))) rejected_bad++;
        }
        EXPECT(rejected_bad == (int)elements, "%s %s N=%d: only %d of %zu corrupted elements were caught", ti->name,
               tc_op_name(red.op), red.nranks, rejected_bad, elements);
        (void)accepted;
      }
    }
  }
}

/* The acceptance of a whole buffer, as the suite applies it: one corrupted element among many is found. */
static void test_one_corrupted_element_in_buffer(void) {
  const struct tc_type_info *ti = tc_type(ncclFloat32);
  struct tc_reduction red;
  tc_reduction_init(&red, ti, TC_OP_SUM, 4, NULL);
  enum { N = 4096 };
  static float out[N];
  struct tc_expected exp[N];
  for (size_t i = 0; i < N; i++) {
    struct tc_value in[4];
    for (int r = 0; r < 4; r++) tc_gen(ti, TC_INPUT_SUM, 99, r, i, &in[r]);
    tc_reference(&red, in, &exp[i]);
    tc_store_bits(&out[i], 4, simulate(&red, in, 0, 0, 0));
  }
  out[1234] += 0.5f;
  size_t caught = 0, where = N;
  for (size_t i = 0; i < N; i++) {
    if (!tc_accept(&red, &exp[i], tc_load_bits(&out[i], 4))) {
      caught++;
      where = i;
    }
  }
  EXPECT(caught == 1 && where == 1234, "buffer check found %zu bad elements (last at %zu), expected exactly 1234",
         caught, where);
}

static void test_bitwise_agreement(void) {
  enum { RANKS = 5, N = 1000 };
  static double outputs[RANKS][N];
  uint64_t hashes[RANKS];
  for (int r = 0; r < RANKS; r++) {
    for (size_t i = 0; i < N; i++) outputs[r][i] = 0.25 * (double)i;
    hashes[r] = tc_hash(outputs[r], sizeof(outputs[r]));
  }
  EXPECT(tc_first_disagreeing_rank(hashes, RANKS, 1) == -1, "identical outputs reported as different");
  /* A one-ulp change: may well be inside the value tolerance, but the bits differ. */
  uint64_t bits;
  memcpy(&bits, &outputs[3][777], 8);
  bits ^= 1;
  memcpy(&outputs[3][777], &bits, 8);
  hashes[3] = tc_hash(outputs[3], sizeof(outputs[3]));
  EXPECT(tc_first_disagreeing_rank(hashes, RANKS, 1) == 3, "a one-bit difference on rank 3 was not reported");
  /* Differences in the last partial word of an odd-sized buffer count too. */
  unsigned char a[13] = {0}, b[13] = {0};
  b[12] = 1;
  EXPECT(tc_hash(a, 13) != tc_hash(b, 13), "hash ignores the tail bytes");
}

int main(void) {
  test_codec_known_values();
  test_codec_round_trip();
  test_reductions();
  test_one_corrupted_element_in_buffer();
  test_bitwise_agreement();
  if (failures) {
    printf("checker self-test: %d failures\n", failures);
    return 1;
  }
  printf("checker self-test: all checks passed\n");
  return 0;
}
