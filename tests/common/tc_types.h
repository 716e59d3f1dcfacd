/* Test checker: what each NCCL data type is, and exact conversions between its bits and a double.
 *
 * The 16- and 8-bit float formats (fp16, bf16, fp8 e4m3, fp8 e5m2) are decoded and encoded here with our own
 * generic minifloat code (round to nearest, ties to even), so the checker shares no arithmetic with the library
 * it checks. */
#ifndef DCCL_TC_TYPES_H_
#define DCCL_TC_TYPES_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dccl.h"

enum tc_kind { TC_KIND_INT, TC_KIND_UINT, TC_KIND_FLOAT };

struct tc_type_info {
  ncclDataType_t type;
  const char *name; /* the name used on command lines: int8 ... f8e5m2 */
  size_t size;      /* bytes per element */
  enum tc_kind kind;
  int exp_bits, mant_bits, bias; /* floats: the IEEE-style layout (fp32 and fp64 included) */
  int finite_only;               /* e4m3: no infinities, S.1111.111 is the only NaN */
  double unit_roundoff;          /* floats: 2^-(mant_bits+1); integers: 0 */
};

/* NULL for a type outside ncclInt8..ncclFloat8e5m2. */
const struct tc_type_info *tc_type(ncclDataType_t type);
/* Looks a type up by its tc name (or a few NCCL aliases: char, int, half, float16, float32, float64, bf16);
 * returns 0 on success, -1 if unknown. */
int tc_type_from_name(const char *name, ncclDataType_t *out);

/* Raw element bits, zero-extended to 64 bits (little-endian host). Inline with constant-size copies: the
 * checker calls these for every element of every buffer. */
static inline uint64_t tc_load_bits(const void *elem, size_t size) {
  switch (size) {
    case 1:
      return *(const uint8_t *)elem;
    case 2: {
      uint16_t v;
      memcpy(&v, elem, 2);
      return v;
    }
    case 4: {
      uint32_t v;
      memcpy(&v, elem, 4);
      return v;
    }
    default: {
      uint64_t v;
      memcpy(&v, elem, 8);
      return v;
    }
  }
}
static inline void tc_store_bits(void *elem, size_t size, uint64_t bits) {
  switch (size) {
    case 1:
      *(uint8_t *)elem = (uint8_t)bits;
      break;
    case 2: {
      uint16_t v = (uint16_t)bits;
      memcpy(elem, &v, 2);
      break;
    }
    case 4: {
      uint32_t v = (uint32_t)bits;
      memcpy(elem, &v, 4);
      break;
    }
    default:
      memcpy(elem, &bits, 8);
      break;
  }
}

/* Float types only (0 for others): the value the bits mean, exactly (NaN and infinities included). */
double tc_float_from_bits(const struct tc_type_info *ti, uint64_t bits);
/* Float types only (0 for others): the bits of the value nearest to v (ties to even). Out of range: infinity
 * for IEEE formats, NaN for e4m3 (which has no infinity). */
uint64_t tc_float_to_bits(const struct tc_type_info *ti, double v);

/* Integer types only: the bits sign-extended (signed types) or zero-extended, as int64/uint64. */
static inline uint64_t tc_type_mask(const struct tc_type_info *ti) {
  return ti->size == 8 ? ~0ull : ((1ull << (8 * ti->size)) - 1);
}
int64_t tc_int_signed(const struct tc_type_info *ti, uint64_t bits);

#endif
