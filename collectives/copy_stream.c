/* Copies into the user's output with non-temporal stores when the operation's output is too large to stay in the
 * caches: a normal store first reads the destination line from memory (read for ownership), so streaming stores
 * cut a copy's memory traffic from three passes to two. Sources (FIFO slots) are cache-resident either way. */
#include "collectives/copy_stream.h"

#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>

void *dccl_copy_stream(void *dst, const void *src, size_t n) {
  char *d = dst;
  const char *s = src;
  size_t head = (size_t)(-(uintptr_t)d & 15);
  if (n < 256 || head >= n) return memcpy(d, s, n);
  memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 64; d += 64, s += 64, n -= 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
  }
  memcpy(d, s, n);
  _mm_sfence(); /* streaming stores are weakly ordered: make them visible before the caller publishes anything */
  return dst;
}
#else
void *dccl_copy_stream(void *dst, const void *src, size_t n) {
  return memcpy(dst, src, n);
}
#endif
