/* The AVX2/F16C code of reduce_x86.c against the element functions of reduce_math.h, bit for bit. On a CPU
 * without AVX2 and F16C nothing here can run: the program exits 77, which ctest reports as skipped (the element
 * loops that run there instead are tested by test_reduce). */
#include <stdint.h>
#include <stdio.h>

#include "collectives/reduce_x86.h"
#include "pure/reduce_math.h"

static int n_passed, n_failed;

/* One named check. */
static void check(int ok, const char *what) {
  if (ok) {
    n_passed++;
    return;
  }
  n_failed++;
  printf("FAIL: %s\n", what);
}

/* The F16C array conversions (used by fp16 reductions where the CPU has them) give the element functions' bits:
 * every fp16 value widened, and floats narrowed over a stride of all 2^32 patterns plus each fp16 value's
 * neighbours and halfway points (where rounding decides). Quiet-NaN payloads must match too. */
static void test_f16c_conversions(void) {
  enum { N = 4096 };
  static uint16_t h[N], h_hw[N];
  static float f[N], f_hw[N];
  long bad = 0, cases = 0;
  for (uint32_t base = 0; base < 65536; base += N) {
    for (uint32_t i = 0; i < N; i++) h[i] = (uint16_t)(base + i);
    dccl_fp16_widen_x86(f_hw, h, N);
    for (uint32_t i = 0; i < N; i++, cases++) bad += dccl_f32_bits(f_hw[i]) != dccl_f32_bits(dccl_fp16_to_f32(h[i]));
  }
  uint32_t filled = 0;
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 997) {
    f[filled++] = dccl_f32_from_bits((uint32_t)bits);
    /* every fp16 value, one float ulp either side and the halfway point to its upper neighbour */
    uint32_t hv = (uint32_t)(bits / 997) & 0xffffu, w = dccl_f32_bits(dccl_fp16_to_f32((uint16_t)hv));
    uint32_t up = dccl_f32_bits(dccl_fp16_to_f32((uint16_t)(hv + 1)));
    f[filled++] = dccl_f32_from_bits(w + 1), f[filled++] = dccl_f32_from_bits(w - 1);
    f[filled++] = dccl_f32_from_bits(w / 2 + up / 2 + (w & up & 1));
    if (filled + 4 > N || bits + 997 >= (1ull << 32)) {
      dccl_fp16_narrow_x86(h_hw, f, filled);
      for (uint32_t i = 0; i < filled; i++, cases++) bad += h_hw[i] != dccl_f32_to_fp16(f[i]);
      filled = 0;
    }
  }
  printf("F16C conversions: %ld cases, %ld differ from the element functions\n", cases, bad);
  check(bad == 0, "F16C conversions equal dccl_fp16_to_f32 / dccl_f32_to_fp16");
}

/* The two-operand fp16 and bf16 sums of reduce_x86.c (the ring's step) give the element functions' bits, NaN
 * payloads included, for every 16-bit pattern against a sweep of second operands, at every position of a vector.
 * The one freedom: when both operands are NaN, the result is a NaN whose payload may come from either, since C
 * lets the compiler swap the operands of an addition (and x86 returns the first one's payload). */
static int same_sum(uint16_t got, uint16_t want, uint16_t a, uint16_t b, uint16_t inf) {
  int nan_a = (a & 0x7fffu) > inf, nan_b = (b & 0x7fffu) > inf;
  return got == want || (nan_a && nan_b && (got & 0x7fffu) > inf);
}

static void test_x86_sums(void) {
  enum { N = 65536 + 13 }; /* not a multiple of the vector width: the scalar tail runs too */
  static uint16_t a[N], b[N], d[N];
  long bad[2] = {0, 0}, cases = 0;
  /* Passes 0..255: b a scrambled sweep. Passes 256..: b a few bits above or below a's exponent with a short
   * mantissa, which is where sums land exactly halfway and round-half-even decides. */
  for (uint32_t pass = 0; pass < 256 + 2 * 16 * 4; pass++) {
    uint32_t k = (pass - 256) / 4 % 16 + 1, mant = (pass % 4 == 3) ? 0x7fu : pass % 4, flip = pass % 2 ? 0x8000u : 0;
    for (uint32_t i = 0; i < N; i++) {
      a[i] = (uint16_t)i;
      b[i] = (uint16_t)(i * 40503u + pass * 257u);
      if (pass >= 256) b[i] = (uint16_t)(((i & 0x8000u) ^ flip) | ((((i >> 7) & 0xffu) - k) & 0xffu) << 7 | mant);
    }
    if (pass >= 256 + 16 * 4) /* the fp16 layout: 5 exponent bits, 10 mantissa bits */
      for (uint32_t i = 0; i < N; i++)
        b[i] = (uint16_t)(((i & 0x8000u) ^ flip) | ((((i >> 10) & 0x1fu) - k) & 0x1fu) << 10 | mant);
    dccl_fp16_sum2_x86(d, a, b, N);
    for (uint32_t i = 0; i < N; i++) bad[0] += !same_sum(d[i], dccl_fp16_sum(a[i], b[i]), a[i], b[i], 0x7c00u);
    dccl_bf16_sum2_x86(d, a, b, N);
    for (uint32_t i = 0; i < N; i++) bad[1] += !same_sum(d[i], dccl_bf16_sum(a[i], b[i]), a[i], b[i], 0x7f80u);
    cases += N;
  }
  printf("AVX2/F16C two-operand sums: %ld pairs per type, fp16 %ld and bf16 %ld differ from the element functions\n",
         cases, bad[0], bad[1]);
  check(bad[0] == 0, "fp16 vector sum equals dccl_fp16_sum");
  check(bad[1] == 0, "bf16 vector sum equals dccl_bf16_sum");
}

int main(void) {
  if (!dccl_have_avx2_f16c()) {
    printf("test_reduce_x86: this CPU has no AVX2/F16C, so the vector code cannot run: skipped (exit 77)\n");
    return 77;
  }
  test_f16c_conversions();
  test_x86_sums();
  printf("test_reduce_x86: %d passed, %d failed\n", n_passed, n_failed);
  return n_failed ? 1 : 0;
}
