/* dccl_copy_stream: byte-exact copies at every alignment of source and destination and at lengths around its
 * 256-byte and 64-byte boundaries, with guard bytes around the destination that must stay untouched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/copy_stream.h"

#define GUARD 64

static int n_passed, n_failed;

static void check_copy(size_t n, size_t dst_off, size_t src_off) {
  unsigned char *src = malloc(n + 32), *dst = malloc(n + 2 * GUARD + 32);
  for (size_t i = 0; i < n + 32; i++) src[i] = (unsigned char)(i * 131 + n);
  memset(dst, 0xA5, n + 2 * GUARD + 32);
  unsigned char *d = dst + GUARD + dst_off;
  dccl_copy_stream(d, src + src_off, n);
  int ok = memcmp(d, src + src_off, n) == 0;
  for (size_t i = 0; i < GUARD + dst_off; i++) ok &= dst[i] == 0xA5;
  for (size_t i = GUARD + dst_off + n; i < n + 2 * GUARD + 32; i++) ok &= dst[i] == 0xA5;
  if (ok) {
    n_passed++;
  } else if (++n_failed <= 20) {
    printf("FAIL: copy of %zu bytes, destination offset %zu, source offset %zu\n", n, dst_off, src_off);
  }
  free(src), free(dst);
}

int main(void) {
  static const size_t lengths[] = {0, 1, 15, 16, 63, 64, 255, 256, 257, 300, 1000, 4096, 65536 + 7, 262144, 1 << 22};
  for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++)
    for (size_t da = 0; da < 16; da++)
      for (size_t sa = 0; sa < 16; sa += 5) check_copy(lengths[l], da, sa);
  printf("test_copy_stream: %d passed, %d failed\n", n_passed, n_failed);
  return n_failed ? 1 : 0;
}
