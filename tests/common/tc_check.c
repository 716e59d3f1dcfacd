#include "tc_check.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <strings.h>

static const char *const tc_op_names[TC_NUM_OPS] = {"sum", "prod", "max", "min", "avg", "premulsum"};

const char *tc_op_name(enum tc_op op) {
  return (unsigned)op < TC_NUM_OPS ? tc_op_names[op] : "?";
}

int tc_op_from_name(const char *name, enum tc_op *out) {
  for (int i = 0; i < TC_NUM_OPS; i++) {
    if (strcasecmp(name, tc_op_names[i]) == 0) {
      *out = (enum tc_op)i;
      return 0;
    }
  }
  return -1;
}

enum tc_input_class tc_op_input_class(enum tc_op op) {
  return op == TC_OP_PROD ? TC_INPUT_PROD : TC_INPUT_SUM;
}

/* (1+u)^k - 1: the worst relative growth of k roundings, exact enough in double for the u we use. */
static double tc_growth(double u, int k) {
  return k <= 0 ? 0.0 : expm1((double)k * log1p(u));
}

void tc_reduction_init(struct tc_reduction *red, const struct tc_type_info *type, enum tc_op op, int nranks,
                       const struct tc_value *scalar) {
  red->type = type;
  red->op = op;
  red->nranks = nranks;
  red->scalar.bits = scalar ? scalar->bits : 0;
  red->scalar.f = scalar ? scalar->f : 0.0;
  int roundings = 0;
  switch (op) {
    case TC_OP_SUM:
      roundings = nranks - 1;
      break;
    case TC_OP_PROD:
    case TC_OP_PREMULSUM:
      roundings = nranks;
      break;
    case TC_OP_AVG:
      roundings = nranks + 1;
      break;
    default:
      roundings = 0;
      break;
  }
  red->growth = tc_growth(type->unit_roundoff, roundings);
}

static void tc_reference_int(const struct tc_reduction *red, const struct tc_value *in, struct tc_expected *out) {
  const struct tc_type_info *ti = red->type;
  const uint64_t mask = tc_type_mask(ti);
  const int is_signed = ti->kind == TC_KIND_INT;
  uint64_t acc = in[0].bits;
  switch (red->op) {
    case TC_OP_SUM:
    case TC_OP_AVG:
      for (int r = 1; r < red->nranks; r++) acc += in[r].bits;
      break;
    case TC_OP_PREMULSUM:
      acc = 0;
      for (int r = 0; r < red->nranks; r++) acc += in[r].bits * red->scalar.bits;
      break;
    case TC_OP_PROD:
      for (int r = 1; r < red->nranks; r++) acc *= in[r].bits;
      break;
    case TC_OP_MAX:
    case TC_OP_MIN:
      for (int r = 1; r < red->nranks; r++) {
        int greater = is_signed ? tc_int_signed(ti, in[r].bits) > tc_int_signed(ti, acc) : in[r].bits > acc;
        if (greater == (red->op == TC_OP_MAX)) acc = in[r].bits;
      }
      break;
    default:
      break;
  }
  acc &= mask;
  if (red->op == TC_OP_AVG) {
    if (is_signed)
      acc = (uint64_t)(tc_int_signed(ti, acc) / red->nranks) & mask;
    else
      acc = acc / (uint64_t)red->nranks;
  }
  out->bits = acc;
  out->value = 0.0;
  out->tolerance = 0.0;
}

static void tc_reference_float(const struct tc_reduction *red, const struct tc_value *in, struct tc_expected *out) {
  const double g = red->growth;
  const int n = red->nranks;
  double exact = in[0].f, magnitude = 0.0;
  switch (red->op) {
    case TC_OP_SUM:
    case TC_OP_AVG:
      exact = 0.0;
      for (int r = 0; r < n; r++) {
        exact += in[r].f;
        magnitude += fabs(in[r].f);
      }
      if (red->op == TC_OP_SUM) {
        out->tolerance = g * magnitude;
      } else {
        exact /= n;
        magnitude /= n;
        /* plus the double reference's own rounding of exact/n */
        out->tolerance = g * magnitude + 0x1p-50 * magnitude;
      }
      break;
    case TC_OP_PREMULSUM:
      exact = 0.0;
      for (int r = 0; r < n; r++) {
        exact += red->scalar.f * in[r].f;
        magnitude += fabs(red->scalar.f * in[r].f);
      }
      out->tolerance = g * magnitude;
      break;
    case TC_OP_PROD:
      for (int r = 1; r < n; r++) exact *= in[r].f;
      out->tolerance = g * fabs(exact);
      break;
    case TC_OP_MAX:
      for (int r = 1; r < n; r++) exact = in[r].f > exact ? in[r].f : exact;
      out->tolerance = 0.0;
      break;
    case TC_OP_MIN:
      for (int r = 1; r < n; r++) exact = in[r].f < exact ? in[r].f : exact;
      out->tolerance = 0.0;
      break;
    default:
      out->tolerance = 0.0;
      break;
  }
  out->value = exact;
  out->bits = 0;
}

void tc_reference(const struct tc_reduction *red, const struct tc_value *inputs, struct tc_expected *out) {
  if (red->type->kind == TC_KIND_FLOAT)
    tc_reference_float(red, inputs, out);
  else
    tc_reference_int(red, inputs, out);
}

int tc_accept(const struct tc_reduction *red, const struct tc_expected *exp, uint64_t out_bits) {
  const struct tc_type_info *ti = red->type;
  out_bits &= tc_type_mask(ti);
  if (ti->kind != TC_KIND_FLOAT) return out_bits == exp->bits;
  double got = tc_float_from_bits(ti, out_bits);
  if (!isfinite(got)) return 0;
  return fabs(got - exp->value) <= exp->tolerance;
}

void tc_describe_mismatch(const struct tc_reduction *red, const struct tc_expected *exp, uint64_t out_bits, char *buf,
                          size_t len) {
  const struct tc_type_info *ti = red->type;
  out_bits &= tc_type_mask(ti);
  if (ti->kind == TC_KIND_FLOAT) {
    snprintf(buf, len, "got %.17g (bits 0x%" PRIx64 "), expected %.17g +- %.3g", tc_float_from_bits(ti, out_bits),
             out_bits, exp->value, exp->tolerance);
  } else if (ti->kind == TC_KIND_INT) {
    snprintf(buf, len, "got %" PRId64 ", expected %" PRId64, tc_int_signed(ti, out_bits), tc_int_signed(ti, exp->bits));
  } else {
    snprintf(buf, len, "got %" PRIu64 ", expected %" PRIu64, out_bits, exp->bits);
  }
}

int tc_first_disagreeing_rank(const uint64_t *hashes, int nranks, size_t stride) {
  for (int r = 1; r < nranks; r++) {
    if (hashes[(size_t)r * stride] != hashes[0]) return r;
  }
  return -1;
}
