/* Loading a file's byte range into memory (dcclFileLoad, docs/storage.md): the range is cut into chunks that
 * DCCL_FILE_THREADS threads read with pread, in parallel, straight into a host destination or through staging
 * buffers into a GPU one. A load runs in the background from the call on; its handle says how far it got and
 * waits for it. */
#ifndef DCCL_FILE_LOAD_H_
#define DCCL_FILE_LOAD_H_

#include <stddef.h>

#include "dccl.h"

/* Starts loading [offset, offset + bytes) of the open file `fd` (not closed here; `owned`: closed when the load is
 * freed) into memory at `dst`: host memory, or GPU memory ordered on `stream` (after the work queued on it before,
 * before the work queued after). `name` names the file in errors. The checks that need no read (the file's size
 * against the range) fail here, at once; read errors come from the handle. */
ncclResult_t dccl_file_load_start(int fd, int owned, const char *name, size_t offset, size_t bytes, void *dst,
                                  void *stream, struct dcclLoad **out);
/* Chunks read with O_DIRECT so far (the others were read with pread): for tests and the INFO log. */
size_t dccl_file_load_direct_chunks(struct dcclLoad *load);

#endif
