/* The one clock every deadline and measurement uses: monotonic nanoseconds, comparable across processes. */
#ifndef DCCL_CLOCK_H_
#define DCCL_CLOCK_H_

#include <stdint.h>

int64_t dccl_now_ns(void);

#endif
