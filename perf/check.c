/* Inputs and expected outputs for -c. Every input is a small integer (or, for prod, one of 1, 2, -1), chosen
 * so that every partial result any algorithm could form is exactly representable in the type: the expected
 * value is then one number, whatever the reduction order, and checks compare exactly. Only the float average
 * is inexact when n is not a power of two (x * (1/n) rounds), so it is then compared within a tolerance. */
#include <math.h>
#include <string.h>

#include "common.h"
#include "parallel.h"

/* Sums never exceed this in magnitude: small enough that the buffers' poison pattern (0x5A bytes) is never a
 * valid result, and that fp8 sums stay exact. */
#define PERF_SUM_BUDGET 64.0

double perf_value_range(const struct perf_type *type, enum perf_op op, int nranks) {
  double budget = fmin(type->exact_limit, PERF_SUM_BUDGET);
  switch (op) {
    case PERF_OP_SUM:
    case PERF_OP_AVG:
      return floor(budget / nranks);
    case PERF_OP_MULSUM:
      return floor(budget / (2.0 * nranks)); /* premultipliers are 1 and 2 */
    case PERF_OP_PROD:
      return 2.0; /* inputs 1, 2 and -1, see below */
    default:
      return budget; /* min, max, data movement */
  }
}

/* A cheap mix of (index, rank, seed), so that different ranks' inputs differ in most elements whatever the
 * value range: a result taken from the wrong rank or the wrong offset shows up. */
static uint64_t mix(size_t index, int rank, unsigned seed) {
  uint64_t x = (uint64_t)index * 0x9E3779B97F4A7C15ull ^ (uint64_t)(rank + 1) * 0xC2B2AE3D27D4EB4Full ^
               (uint64_t)(seed + 1) * 0x165667B19E3779F9ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return x;
}

/* Each rank's premultiplier for mulsum. */
static double mulsum_scalar(int rank) {
  return 1.0 + rank % 2;
}

double perf_input_value(const struct perf_values *v, int rank, size_t index) {
  uint64_t h = mix(index, rank, v->seed);
  uint64_t span = (uint64_t)v->range + 1;
  switch (v->op) {
    case PERF_OP_PROD:
      /* At most ceil(nranks/4) factors of 2 per element, so |product| stays tiny even in int8. */
      if ((index + rank + v->seed) % 4 == 0) return 2.0;
      return v->type->is_signed && h % 3 == 0 ? -1.0 : 1.0;
    case PERF_OP_MAX:
    case PERF_OP_MIN:
      if (v->type->is_signed) return (double)(h % (2 * span - 1)) - v->range;
      return (double)(h % span);
    case PERF_OP_SUM:
    case PERF_OP_MULSUM:
      /* Too many ranks for the type to hold a dense sum exactly: one rank per element contributes a 1. */
      if (v->range < 1.0) return (index + rank + v->seed) % (size_t)v->nranks == 0 ? 1.0 : 0.0;
      /* Signed types get values around zero, so the sign arithmetic is exercised too. */
      if (v->type->is_signed) return (double)(h % span) - floor(v->range / 2);
      return (double)(h % span);
    case PERF_OP_AVG:
      /* Non-negative: the integer average truncates, and then floor and truncation agree. */
      if (v->range < 1.0) return (index + rank + v->seed) % (size_t)v->nranks == 0 ? 1.0 : 0.0;
      return (double)(h % span);
    default:
      return (double)(h % span);
  }
}

double perf_gathered_value(const struct perf_values *v, size_t block, size_t index) {
  return perf_input_value(v, (int)(index / block), index % block);
}

static double round_to_type(const struct perf_type *type, double x) {
  unsigned char cell[8];
  perf_type_store(type, cell, x);
  return perf_type_load(type, cell);
}

double perf_reduced_value(const struct perf_values *v, size_t index) {
  double acc = perf_input_value(v, 0, index);
  if (v->op == PERF_OP_MULSUM) acc *= mulsum_scalar(0);
  for (int r = 1; r < v->nranks; r++) {
    double x = perf_input_value(v, r, index);
    switch (v->op) {
      case PERF_OP_PROD:
        acc *= x;
        break;
      case PERF_OP_MAX:
        acc = fmax(acc, x);
        break;
      case PERF_OP_MIN:
        acc = fmin(acc, x);
        break;
      case PERF_OP_MULSUM:
        acc += x * mulsum_scalar(r);
        break;
      default:
        acc += x;
        break;
    }
  }
  if (v->op == PERF_OP_AVG) acc = v->type->is_float ? acc / v->nranks : floor(acc / v->nranks);
  return round_to_type(v->type, acc);
}

double perf_mulsum_scalar(int rank) {
  return mulsum_scalar(rank);
}

/* A rank's input elements [first, first + n) at `buf`: written, or compared (the loops run on several threads). */
struct input_range {
  const struct perf_values *v;
  int rank;
  size_t first;
  unsigned char *buf;
};

static size_t fill_range(void *ctx, size_t lo, size_t hi) {
  const struct input_range *r = ctx;
  for (size_t i = lo; i < hi; i++)
    perf_type_store(r->v->type, r->buf + i * r->v->type->size, perf_input_value(r->v, r->rank, r->first + i));
  return 0;
}

void perf_fill_input(const struct perf_values *v, int rank, size_t first, void *dst, size_t n) {
  struct input_range r = {v, rank, first, dst};
  perf_parallel_sum(n, fill_range, &r);
}

static size_t changed_range(void *ctx, size_t lo, size_t hi) {
  const struct input_range *r = ctx;
  size_t changed = 0;
  for (size_t i = lo; i < hi; i++)
    if (perf_type_load(r->v->type, r->buf + i * r->v->type->size) != perf_input_value(r->v, r->rank, r->first + i))
      changed++;
  return changed;
}

size_t perf_count_input_changed(const struct perf_values *v, int rank, size_t first, const void *buf, size_t n) {
  struct input_range r = {v, rank, first, (unsigned char *)buf};
  return perf_parallel_sum(n, changed_range, &r);
}

struct result_range {
  const struct perf_collective *coll;
  const struct perf_values *v;
  const struct perf_call *call;
  const unsigned char *recv;
  double tolerance;
};

static size_t wrong_range(void *ctx, size_t lo, size_t hi) {
  const struct result_range *r = ctx;
  size_t wrong = 0;
  for (size_t i = lo; i < hi; i++) {
    double got = perf_type_load(r->v->type, r->recv + i * r->v->type->size);
    double want = r->coll->expected(r->v, r->call, i);
    if (got == want) continue;
    if (r->tolerance > 0.0 && fabs(got - want) <= r->tolerance * fmax(fabs(want), 1.0)) continue;
    wrong++;
  }
  return wrong;
}

size_t perf_count_wrong(const struct perf_collective *coll, const struct perf_values *v, const struct perf_call *call,
                        const void *recv) {
  /* Float average over a rank count that is not a power of two: 1/n is inexact, and each of up to n roundings
   * (premultiply, partial sums) is worth one unit in the last place. With n a power of two, every step is exact. */
  int inexact_average = v->type->is_float && v->op == PERF_OP_AVG && (v->nranks & (v->nranks - 1)) != 0;
  double tolerance = inexact_average ? v->nranks * ldexp(1.0, -v->type->mantissa_bits) : 0.0;
  struct result_range r = {coll, v, call, recv, tolerance};
  return perf_parallel_sum(call->counts.recv_count, wrong_range, &r);
}

void perf_guard_set(unsigned char *base, size_t bytes) {
  memset(base - PERF_GUARD_BYTES, PERF_GUARD_BYTE, PERF_GUARD_BYTES);
  memset(base, PERF_POISON_BYTE, bytes);
  memset(base + bytes, PERF_GUARD_BYTE, PERF_GUARD_BYTES);
}

size_t perf_guard_count_changed(const unsigned char *base, size_t bytes) {
  size_t changed = 0;
  for (size_t i = 0; i < PERF_GUARD_BYTES; i++) {
    changed += base[-1 - (ptrdiff_t)i] != PERF_GUARD_BYTE;
    changed += base[bytes + i] != PERF_GUARD_BYTE;
  }
  return changed;
}
