/* fp16 <-> float for whole arrays with the F16C instructions (8 elements per instruction), chosen at run time.
 * The instructions round to nearest even, keep subnormals, turn overflow into inf and a NaN into the quiet NaN
 * with its top payload bits: exactly reduce_math.h's dccl_fp16_to_f32 / dccl_f32_to_fp16, so results do not
 * depend on which path ran (test_reduce compares every fp16 operand shape against the element functions). */
#include "collectives/convert_f16c.h"

#include "collectives/reduce_math.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define F16C_TARGET __attribute__((target("avx,f16c")))

int dccl_have_f16c(void) {
  static int have = -1; /* racing first calls store the same answer */
  if (have < 0) {
    __builtin_cpu_init();
    have = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  }
  return have;
}

F16C_TARGET void dccl_fp16_widen_f16c(float *out, const uint16_t *in, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i))));
  for (; i < n; i++) out[i] = dccl_fp16_to_f32(in[i]);
}

F16C_TARGET void dccl_fp16_narrow_f16c(uint16_t *out, const float *in, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) out[i] = dccl_f32_to_fp16(in[i]);
}
#else
int dccl_have_f16c(void) {
  return 0;
}
void dccl_fp16_widen_f16c(float *out, const uint16_t *in, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = dccl_fp16_to_f32(in[i]);
}
void dccl_fp16_narrow_f16c(uint16_t *out, const float *in, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = dccl_f32_to_fp16(in[i]);
}
#endif
