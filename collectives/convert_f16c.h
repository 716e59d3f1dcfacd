/* fp16 <-> float array conversions with the CPU's F16C instructions. */
#ifndef DCCL_CONVERT_F16C_H_
#define DCCL_CONVERT_F16C_H_

#include <stddef.h>
#include <stdint.h>

/* Whether this CPU has F16C (and AVX); the conversions below may be called only if so. */
int dccl_have_f16c(void);
void dccl_fp16_widen_f16c(float *out, const uint16_t *in, size_t n);
void dccl_fp16_narrow_f16c(uint16_t *out, const float *in, size_t n);

#endif
