/* The element types the tools know: names, sizes, MPI counterparts, and exact conversion to and from double
 * (the checker computes every expected value in double, then rounds it to the type once). */
#include <math.h>
#include <string.h>

#include "common.h"

/* `exact_limit`: the largest integer below which every integer is representable (2^(mantissa bits + 1) for
 * floats); integer types are kept far from overflow by the value range anyway. */
const struct perf_type perf_types[] = {
    {"int8", ncclInt8, 1, 0, 1, 0, 127.0, MPI_INT8_T},
    {"uint8", ncclUint8, 1, 0, 0, 0, 255.0, MPI_UINT8_T},
    {"int32", ncclInt32, 4, 0, 1, 0, 1048576.0, MPI_INT32_T},
    {"uint32", ncclUint32, 4, 0, 0, 0, 1048576.0, MPI_UINT32_T},
    {"int64", ncclInt64, 8, 0, 1, 0, 1048576.0, MPI_INT64_T},
    {"uint64", ncclUint64, 8, 0, 0, 0, 1048576.0, MPI_UINT64_T},
    {"half", ncclFloat16, 2, 1, 1, 10, 2048.0, MPI_DATATYPE_NULL},
    {"float", ncclFloat32, 4, 1, 1, 23, 16777216.0, MPI_FLOAT},
    {"double", ncclFloat64, 8, 1, 1, 52, 9007199254740992.0, MPI_DOUBLE},
    {"bfloat16", ncclBfloat16, 2, 1, 1, 7, 256.0, MPI_DATATYPE_NULL},
    {"f8e4m3", ncclFloat8e4m3, 1, 1, 1, 3, 16.0, MPI_DATATYPE_NULL},
    {"f8e5m2", ncclFloat8e5m2, 1, 1, 1, 2, 8.0, MPI_DATATYPE_NULL},
};
const int perf_type_count = (int)(sizeof(perf_types) / sizeof(perf_types[0]));

const struct perf_type *perf_type_by_name(const char *name) {
  for (int i = 0; i < perf_type_count; i++)
    if (strcmp(perf_types[i].name, name) == 0) return &perf_types[i];
  return NULL;
}

static const char *const op_names[PERF_OP_COUNT] = {"sum", "prod", "max", "min", "avg", "mulsum"};

const char *perf_op_name(enum perf_op op) {
  return op >= 0 && op < PERF_OP_COUNT ? op_names[op] : "none";
}

int perf_op_by_name(const char *name, enum perf_op *out) {
  for (int i = 0; i < PERF_OP_COUNT; i++)
    if (strcmp(op_names[i], name) == 0) {
      *out = (enum perf_op)i;
      return 0;
    }
  return -1;
}

/* Small binary floats (half, bfloat16, fp8) with `ebits` exponent and `mbits` fraction bits. fp8 e4m3 has no
 * infinities: its only special value is the all-ones pattern (NaN). */
static int exponent_bits(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16:
      return 5;
    case ncclBfloat16:
      return 8;
    case ncclFloat8e4m3:
      return 4;
    case ncclFloat8e5m2:
      return 5;
    default:
      return 0;
  }
}

/* Round to nearest even; x must be finite and within the type's range (the tools only store small values). */
static uint32_t small_float_encode(double x, int ebits, int mbits) {
  const int bias = (1 << (ebits - 1)) - 1;
  uint32_t sign = signbit(x) ? 1u : 0u;
  double mag = fabs(x);
  uint32_t bits = 0;
  if (mag != 0.0) {
    int e2;
    (void)frexp(mag, &e2);
    int exp = e2 - 1;                   /* mag = 1.f * 2^exp */
    if (exp < 1 - bias) exp = 1 - bias; /* subnormal: the smallest exponent, no hidden bit */
    uint64_t m = (uint64_t)nearbyint(ldexp(mag, mbits - exp));
    if (m >> (mbits + 1)) { /* rounding carried into the next binade */
      m >>= 1;
      exp++;
    }
    if (m >> mbits)
      bits = ((uint32_t)(exp + bias) << mbits) | (uint32_t)(m & ((1u << mbits) - 1));
    else
      bits = (uint32_t)m; /* subnormal, or a subnormal that rounded up into exponent 1 via the carry above */
  }
  return (sign << (ebits + mbits)) | bits;
}

static double small_float_decode(uint32_t bits, int ebits, int mbits, int has_infinity) {
  const int bias = (1 << (ebits - 1)) - 1;
  const uint32_t exp_mask = (1u << ebits) - 1, man_mask = (1u << mbits) - 1;
  uint32_t exp = (bits >> mbits) & exp_mask, man = bits & man_mask;
  double v;
  if (exp == 0)
    v = ldexp((double)man, 1 - bias - mbits);
  else if (has_infinity && exp == exp_mask)
    v = man ? NAN : INFINITY;
  else if (!has_infinity && exp == exp_mask && man == man_mask)
    v = NAN;
  else
    v = ldexp((double)(man | (1u << mbits)), (int)exp - bias - mbits);
  return (bits >> (ebits + mbits)) & 1u ? -v : v;
}

void perf_type_store(const struct perf_type *type, void *dst, double x) {
  switch (type->nccl) {
    case ncclInt8:
      *(int8_t *)dst = (int8_t)(int64_t)x;
      break;
    case ncclUint8:
      *(uint8_t *)dst = (uint8_t)(int64_t)x;
      break;
    case ncclInt32:
      *(int32_t *)dst = (int32_t)(int64_t)x;
      break;
    case ncclUint32:
      *(uint32_t *)dst = (uint32_t)(int64_t)x;
      break;
    case ncclInt64:
      *(int64_t *)dst = (int64_t)x;
      break;
    case ncclUint64:
      *(uint64_t *)dst = (uint64_t)(int64_t)x;
      break;
    case ncclFloat32:
      *(float *)dst = (float)x;
      break;
    case ncclFloat64:
      *(double *)dst = x;
      break;
    case ncclFloat16:
    case ncclBfloat16: {
      uint16_t b = (uint16_t)small_float_encode(x, exponent_bits(type->nccl), type->mantissa_bits);
      memcpy(dst, &b, sizeof b);
      break;
    }
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      *(uint8_t *)dst = (uint8_t)small_float_encode(x, exponent_bits(type->nccl), type->mantissa_bits);
      break;
    default:
      break;
  }
}

double perf_type_load(const struct perf_type *type, const void *src) {
  switch (type->nccl) {
    case ncclInt8:
      return *(const int8_t *)src;
    case ncclUint8:
      return *(const uint8_t *)src;
    case ncclInt32:
      return *(const int32_t *)src;
    case ncclUint32:
      return *(const uint32_t *)src;
    case ncclInt64:
      return (double)*(const int64_t *)src;
    case ncclUint64:
      return (double)*(const uint64_t *)src;
    case ncclFloat32:
      return *(const float *)src;
    case ncclFloat64:
      return *(const double *)src;
    case ncclFloat16:
    case ncclBfloat16: {
      uint16_t b;
      memcpy(&b, src, sizeof b);
      return small_float_decode(b, exponent_bits(type->nccl), type->mantissa_bits, 1);
    }
    case ncclFloat8e4m3:
      return small_float_decode(*(const uint8_t *)src, 4, 3, 0);
    case ncclFloat8e5m2:
      return small_float_decode(*(const uint8_t *)src, 5, 2, 1);
    default:
      return NAN;
  }
}
