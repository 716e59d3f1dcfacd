#include "tc_buffer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int tc_buffer_alloc(struct tc_buffer *b, size_t bytes) {
  b->alloc = malloc(bytes + 2 * TC_GUARD_BYTES + 64);
  if (!b->alloc) return -1;
  uintptr_t start = ((uintptr_t)b->alloc + TC_GUARD_BYTES + 63) & ~(uintptr_t)63;
  b->data = (unsigned char *)start;
  b->bytes = bytes;
  memset(b->data - TC_GUARD_BYTES, TC_GUARD_BYTE, TC_GUARD_BYTES);
  memset(b->data + bytes, TC_GUARD_BYTE, TC_GUARD_BYTES);
  return 0;
}

void tc_buffer_free(struct tc_buffer *b) {
  free(b->alloc);
  b->alloc = b->data = NULL;
  b->bytes = 0;
}

void tc_buffer_poison(struct tc_buffer *b) {
  memset(b->data, TC_SENTINEL_BYTE, b->bytes);
}

static int tc_all_bytes(const unsigned char *p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++) {
    if (p[i] != v) return 0;
  }
  return 1;
}

int tc_buffer_guards_ok(const struct tc_buffer *b) {
  return tc_all_bytes(b->data - TC_GUARD_BYTES, TC_GUARD_BYTES, TC_GUARD_BYTE) &&
         tc_all_bytes(b->data + b->bytes, TC_GUARD_BYTES, TC_GUARD_BYTE);
}

size_t tc_buffer_first_written(const struct tc_buffer *b, size_t off, size_t len) {
  for (size_t i = off; i < off + len; i++) {
    if (b->data[i] != TC_SENTINEL_BYTE) return i;
  }
  return (size_t)-1;
}
