/* Test checker: the reference result of a reduction and the acceptance rule.
 *
 * Integers must match exact modular arithmetic (sum and prod wrap; avg is the wrapped sum divided by nranks,
 * truncated toward zero; premulsum is the wrapped sum of scalar*x_i). Floats are compared with the exact
 * result, computed in double (exact for the inputs tc_data makes), and accepted within a bound that holds for
 * any summation order (ring, tree, any chunking), g(k) = (1+u)^k - 1 ~ k*u with u the type's unit roundoff:
 *   sum        |out - exact| <= g(N-1) * sum_i |x_i|
 *   prod       |out - exact| <= g(N)   * |exact|        (N-1 roundings plus one u of slack)
 *   max, min   out == exact
 *   avg        |out - exact| <= g(N+1) * sum_i |x_i| / N  (1/N rounded, each x_i*(1/N) rounded, N-1 adds)
 *   premulsum  |out - exact| <= g(N)   * sum_i |s*x_i|   (each s*x_i rounded, N-1 adds)
 * A NaN or infinite output always fails. */
#ifndef DCCL_TC_CHECK_H_
#define DCCL_TC_CHECK_H_

#include <stddef.h>
#include <stdint.h>

#include "tc_data.h"
#include "tc_types.h"

enum tc_op { TC_OP_SUM, TC_OP_PROD, TC_OP_MAX, TC_OP_MIN, TC_OP_AVG, TC_OP_PREMULSUM, TC_NUM_OPS };

const char *tc_op_name(enum tc_op op);
int tc_op_from_name(const char *name, enum tc_op *out); /* 0 or -1 */
/* The class of inputs an op is tested with (prod gets small values). */
enum tc_input_class tc_op_input_class(enum tc_op op);

struct tc_reduction {
  const struct tc_type_info *type;
  enum tc_op op;
  int nranks;
  struct tc_value scalar; /* premulsum only */
  double growth;          /* the g(k) of the rule above for this type, op and nranks: set by tc_reduction_init */
};

/* Fills red (scalar: the premulsum scalar, ignored for other ops; may be NULL). */
void tc_reduction_init(struct tc_reduction *red, const struct tc_type_info *type, enum tc_op op, int nranks,
                       const struct tc_value *scalar);

/* The expected result of reducing inputs[0..nranks-1]: for integers its exact bits; for floats the exact value
 * and the allowed distance. */
struct tc_expected {
  uint64_t bits; /* integers */
  double value;  /* floats */
  double tolerance;
};

void tc_reference(const struct tc_reduction *red, const struct tc_value *inputs, struct tc_expected *out);
/* 1 if the element `out_bits` is acceptable for `exp`. */
int tc_accept(const struct tc_reduction *red, const struct tc_expected *exp, uint64_t out_bits);
/* Writes "got X, expected Y (+- T)" for a report. */
void tc_describe_mismatch(const struct tc_reduction *red, const struct tc_expected *exp, uint64_t out_bits, char *buf,
                          size_t len);

/* Cross-rank bitwise agreement: returns the first rank whose hash differs from rank 0's, or -1 if all agree. */
int tc_first_disagreeing_rank(const uint64_t *hashes, int nranks, size_t stride);

#endif
