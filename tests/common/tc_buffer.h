/* Test checker: buffers with guard zones, so a collective that writes past either end of a user buffer is
 * caught, and a sentinel fill, so an element the collective should have written but did not is caught. */
#ifndef DCCL_TC_BUFFER_H_
#define DCCL_TC_BUFFER_H_

#include <stddef.h>

#define TC_GUARD_BYTES 256
#define TC_GUARD_BYTE 0xA5
#define TC_SENTINEL_BYTE 0xCD

struct tc_buffer {
  unsigned char *alloc; /* what malloc returned */
  unsigned char *data;  /* the user-visible bytes, 64-byte aligned, between two guard zones */
  size_t bytes;
};

/* 0 on success, -1 when out of memory. bytes may be 0 (data is still a valid, non-NULL pointer). */
int tc_buffer_alloc(struct tc_buffer *b, size_t bytes);
void tc_buffer_free(struct tc_buffer *b);
/* Fills the data with TC_SENTINEL_BYTE. */
void tc_buffer_poison(struct tc_buffer *b);
/* 1 if both guard zones are intact. */
int tc_buffer_guards_ok(const struct tc_buffer *b);
/* Offset of the first byte in [off, off+len) that is not TC_SENTINEL_BYTE, or (size_t)-1 if all are. */
size_t tc_buffer_first_written(const struct tc_buffer *b, size_t off, size_t len);

#endif
