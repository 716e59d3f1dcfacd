/* Test checker: deterministic inputs. Element `idx` of rank `rank`'s buffer in the case with seed `seed` is a pure
 * function of those three numbers, so every rank can recompute every other rank's input without communicating.
 *
 * Value ranges are chosen so nothing overflows any type and the double reference is exact (see tc_data.c). */
#ifndef DCCL_TC_DATA_H_
#define DCCL_TC_DATA_H_

#include <stddef.h>
#include <stdint.h>

#include "tc_types.h"

/* What the inputs are for: they shape the value range. */
enum tc_input_class {
  TC_INPUT_SUM,  /* sum, avg, premulsum, max, min: ints full range (sums wrap), floats |x| in [0.25, 2) */
  TC_INPUT_PROD, /* prod: ints in +-{1,2,3}, floats |x| in [0.75, 1.5) with at most 4 mantissa bits */
  TC_INPUT_BITS  /* data movement (broadcast, gather, send/recv): any bit pattern, NaNs included */
};

/* One element: its raw bits (low `size` bytes) and, for float types, its exact value. */
struct tc_value {
  uint64_t bits;
  double f;
};

/* splitmix64's finaliser: a bijection that scrambles every bit. */
static inline uint64_t tc_mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
/* A seed for a case made of several numbers (order matters). */
uint64_t tc_seed_combine(uint64_t seed, uint64_t v);

void tc_gen(const struct tc_type_info *ti, enum tc_input_class cls, uint64_t seed, int rank, uint64_t idx,
            struct tc_value *out);
/* Element idx of every rank 0..nranks-1 at once (out[r]): one call per element for reference computations. */
void tc_gen_ranks(const struct tc_type_info *ti, enum tc_input_class cls, uint64_t seed, int nranks, uint64_t idx,
                  struct tc_value *out);
/* Writes elements idx0 .. idx0+count-1 of rank's input into buf. */
void tc_fill(void *buf, const struct tc_type_info *ti, enum tc_input_class cls, uint64_t seed, int rank, uint64_t idx0,
             size_t count);
/* Index of the first element of buf that differs from rank's input at idx0.., or count if none. */
size_t tc_first_input_mismatch(const void *buf, const struct tc_type_info *ti, enum tc_input_class cls, uint64_t seed,
                               int rank, uint64_t idx0, size_t count);

/* The scalar of a premulsum case: floats 1.25 / -0.75 / 0.5 (exact in every format), ints 3 or -3 (signed). */
void tc_premul_scalar(const struct tc_type_info *ti, uint64_t seed, struct tc_value *out);

/* A 64-bit hash of bytes, for comparing outputs across ranks cheaply. */
uint64_t tc_hash(const void *data, size_t bytes);

#endif
