/* coll_suite --device: each case's buffers mirrored in GPU memory. A buffer and its guard zones are copied to the
 * GPU before the call and back after it, so the host's checks (values, sentinels, guards) judge what the kernels
 * wrote, guard zones included. Built without the CUDA runtime, every call fails and says so. */
#ifndef DCCL_SUITE_DEVICE_H_
#define DCCL_SUITE_DEVICE_H_

#include "tc_buffer.h"

/* Makes GPU rank % (GPUs) current, before the communicator is created. 0, or -1 with a message printed. */
int suite_device_select(int rank);
/* A GPU copy of b's guard zones and data; its data starts at the returned pointer. NULL with a message printed. */
unsigned char *suite_device_mirror(const struct tc_buffer *b);
/* Waits for the GPU's work, then copies the mirror (guards included) back over b. 0, or -1 with a message. */
int suite_device_copy_back(struct tc_buffer *b, const unsigned char *mirror);
void suite_device_free(unsigned char *mirror);

#endif
