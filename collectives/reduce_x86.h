/* x86 vector code for fp16 and bf16 reductions (AVX2 + F16C), picked at run time. */
#ifndef DCCL_REDUCE_X86_H_
#define DCCL_REDUCE_X86_H_

#include <stddef.h>
#include <stdint.h>

/* Whether this CPU has AVX2 and F16C; the functions below may be called only if so. */
int dccl_have_avx2_f16c(void);
void dccl_fp16_widen_x86(float *out, const uint16_t *in, size_t n);
void dccl_fp16_narrow_x86(uint16_t *out, const float *in, size_t n);
/* d[i] = a[i] + b[i], computed in float and rounded once; d may alias a or b exactly. */
void dccl_fp16_sum2_x86(uint16_t *d, const uint16_t *a, const uint16_t *b, size_t n);
void dccl_bf16_sum2_x86(uint16_t *d, const uint16_t *a, const uint16_t *b, size_t n);

#endif
