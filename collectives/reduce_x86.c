/* x86 vector code for the narrow floats, chosen at run time (the library is built for baseline x86-64):
 * - fp16 <-> float for whole arrays with the F16C instructions, 8 elements per instruction;
 * - the ring's hot shape, a sum of two fp16 or bf16 operands, in one pass over registers.
 * Same bits as reduce_math.h's element functions: F16C rounds to nearest even, keeps subnormals, turns overflow
 * into inf and a NaN into the quiet NaN with its top payload bits, as dccl_f32_to_fp16 does; bf16 is the top
 * half of a float, rounded with the same integer steps as dccl_f32_to_bf16; sums are one float addition (when
 * both operands are NaN, either one's payload may come out, as with the element functions: C lets the compiler
 * swap an addition's operands). test_reduce compares all of it against the element functions and an independent
 * reference. */
#include "collectives/reduce_x86.h"

#include "pure/reduce_math.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define X86_TARGET __attribute__((target("avx2,f16c")))

int dccl_have_avx2_f16c(void) {
  __builtin_cpu_init(); /* returns at once after the first call; needed if called before libgcc's constructor */
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}

X86_TARGET void dccl_fp16_widen_x86(float *out, const uint16_t *in, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i))));
  for (; i < n; i++) out[i] = dccl_fp16_to_f32(in[i]);
}

X86_TARGET void dccl_fp16_narrow_x86(uint16_t *out, const float *in, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) out[i] = dccl_f32_to_fp16(in[i]);
}

X86_TARGET void dccl_fp16_sum2_x86(uint16_t *d, const uint16_t *a, const uint16_t *b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));
    __m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i)));
    _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_add_ps(x, y), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; i++) d[i] = dccl_f32_to_fp16(dccl_f32_sum(dccl_fp16_to_f32(a[i]), dccl_fp16_to_f32(b[i])));
}

/* float bits -> bf16 in the low half of each 32-bit lane: round to nearest even; a NaN stays a quiet NaN. */
X86_TARGET static __m256i bf16_round(__m256i x) {
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
  __m256i nan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  __m256i is_nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32((int)DCCL_F32_INF_BITS));
  return _mm256_blendv_epi8(rounded, nan, is_nan);
}

X86_TARGET void dccl_bf16_sum2_x86(uint16_t *d, const uint16_t *a, const uint16_t *b, size_t n) {
  const __m256i zero = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i x = _mm256_loadu_si256((const __m256i *)(a + i)), y = _mm256_loadu_si256((const __m256i *)(b + i));
    /* Interleaving with zeros puts each bf16 in the top half of a 32-bit lane: that is its float. The
     * interleave works within 128-bit lanes, and so does the final pack, which undoes it: order is kept. */
    __m256 lo = _mm256_add_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, x)),
                              _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, y)));
    __m256 hi = _mm256_add_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, x)),
                              _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, y)));
    __m256i r = _mm256_packus_epi32(bf16_round(_mm256_castps_si256(lo)), bf16_round(_mm256_castps_si256(hi)));
    _mm256_storeu_si256((__m256i *)(d + i), r);
  }
  for (; i < n; i++) d[i] = dccl_f32_to_bf16(dccl_f32_sum(dccl_bf16_to_f32(a[i]), dccl_bf16_to_f32(b[i])));
}
#else
int dccl_have_avx2_f16c(void) {
  return 0;
}
void dccl_fp16_widen_x86(float *out, const uint16_t *in, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = dccl_fp16_to_f32(in[i]);
}
void dccl_fp16_narrow_x86(uint16_t *out, const float *in, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = dccl_f32_to_fp16(in[i]);
}
void dccl_fp16_sum2_x86(uint16_t *d, const uint16_t *a, const uint16_t *b, size_t n) {
  for (size_t i = 0; i < n; i++) d[i] = dccl_f32_to_fp16(dccl_f32_sum(dccl_fp16_to_f32(a[i]), dccl_fp16_to_f32(b[i])));
}
void dccl_bf16_sum2_x86(uint16_t *d, const uint16_t *a, const uint16_t *b, size_t n) {
  for (size_t i = 0; i < n; i++) d[i] = dccl_f32_to_bf16(dccl_f32_sum(dccl_bf16_to_f32(a[i]), dccl_bf16_to_f32(b[i])));
}
#endif
