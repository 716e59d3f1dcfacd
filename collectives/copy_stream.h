/* Streaming (cache-bypassing) copies for outputs larger than the caches. */
#ifndef DCCL_COPY_STREAM_H_
#define DCCL_COPY_STREAM_H_

#include <stddef.h>
#include <stdint.h>

/* memcpy(dst, src, n), with non-temporal stores where the CPU has them; ordered before the caller's next store.
 * Returns dst, as memcpy does, so either can be called through one pointer. */
void *dccl_copy_stream(void *dst, const void *src, size_t n);

#endif
