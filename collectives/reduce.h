/* Reductions on host buffers: the executor's only arithmetic. Element math for every NCCL type lives in
 * pure/reduce_math.h, shared with device code. */
#ifndef DCCL_REDUCE_H_
#define DCCL_REDUCE_H_

#include <stddef.h>

#include "dccl.h"
#include "pure/reduce_math.h"

_Static_assert(DCCL_ELEM_I8 == (int)ncclInt8 && DCCL_ELEM_U8 == (int)ncclUint8 && DCCL_ELEM_I32 == (int)ncclInt32 &&
                   DCCL_ELEM_U32 == (int)ncclUint32 && DCCL_ELEM_I64 == (int)ncclInt64 &&
                   DCCL_ELEM_U64 == (int)ncclUint64 && DCCL_ELEM_FP16 == (int)ncclFloat16 &&
                   DCCL_ELEM_F32 == (int)ncclFloat32 && DCCL_ELEM_F64 == (int)ncclFloat64 &&
                   DCCL_ELEM_BF16 == (int)ncclBfloat16 && DCCL_ELEM_E4M3 == (int)ncclFloat8e4m3 &&
                   DCCL_ELEM_E5M2 == (int)ncclFloat8e5m2,
               "pure/reduce_math.h numbers the element types as ncclDataType_t");

enum dccl_red_kind { DCCL_RED_SUM = 0, DCCL_RED_PROD = 1, DCCL_RED_MAX = 2, DCCL_RED_MIN = 3 };

/* A resolved reduction: the user's op (ncclSum..ncclAvg or a premulsum handle) becomes a kind plus an optional
 * premultiply applied to each rank's own input, and an optional division applied once to the final result
 * (integer average). Float average is a premultiply by 1/nranks. */
struct dccl_redop {
  ncclDataType_t type;
  enum dccl_red_kind kind;
  int has_pre;
  unsigned char pre[8]; /* the premultiplier, stored in `type` */
  const void *pre_dev;  /* or, when not NULL: GPU memory holding it, read by the kernel as it runs (device buffers) */
  int post_div;         /* 0: none; else divide the final value by this */
  int called;           /* what the call named: a built-in ncclRedOp_t, or DCCL_CALLED_PREMULSUM */
};
#define DCCL_CALLED_PREMULSUM 15 /* past every built-in ncclRedOp_t */

/* Bytes per element of `type`, 0 for an unknown type. */
size_t dccl_type_size(ncclDataType_t type);
const char *dccl_type_name(ncclDataType_t type);

/* dst[i] = pre(input[i]) (op) srcs[0][i] (op) ... (op) srcs[nsrcs-1][i], then post() if apply_post.
 * input may be NULL (then the srcs alone); nsrcs may be 0 (then pre(input) alone). dst may alias input or any
 * src exactly (same address), not partially. n == 0 does nothing. 16- and 8-bit floats are combined in float over
 * all operands and rounded once when stored. max/min ignore a NaN operand (like fmaxf). */
void dccl_reduce_host(const struct dccl_redop *op, void *dst, const void *input, const void *const *srcs, int nsrcs,
                      size_t n, int apply_post);

/* Fills a dccl_redop for the built-in `op` of type `type`: for ncclAvg on floats, premultiply 1/nranks; on
 * integers, divide by nranks at the end. (PreMulSum ops are built by the caller: a sum with has_pre/pre set.) */
void dccl_redop_builtin(struct dccl_redop *out, ncclRedOp_t op, ncclDataType_t type, int nranks);

#endif
