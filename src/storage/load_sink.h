/* The bounce of a file load (file_load.c): each reader thread preads a chunk into one of its two staging buffers,
 * hands it to the sink, which copies it on to the destination, and refills the other meanwhile; a buffer is
 * refilled only once its copy is done. Two sinks: host memory (memcpy; what DCCL_FILE_PATH=bounce tests on
 * machines without a GPU) and GPU memory (pinned staging buffers, copies on a stream of each reader's, ordered
 * against the caller's stream: load_sink_cuda.c). Reads through cuFile use only the GPU sink's ordering (begin,
 * finish): no staging buffers. */
#ifndef DCCL_STORAGE_LOAD_SINK_H_
#define DCCL_STORAGE_LOAD_SINK_H_

#include <stddef.h>

#include "dccl.h"
#include "util/error.h"

struct dccl_load_sink;
struct dccl_load_sink_ops {
  /* Returns once reader `thread` may write the destination itself (cuFile's reads): the caller's stream ran what
   * came before the load. */
  ncclResult_t (*begin)(struct dccl_load_sink *s, int thread);
  /* Staging buffer `which` (0 or 1) of reader `thread`: `chunk` bytes (the sink's), page-aligned. */
  void *(*staging)(struct dccl_load_sink *s, int thread, int which);
  /* Copies `n` bytes of that buffer, from byte `from` of it, to dst: done (host) or issued (GPU) on return. */
  ncclResult_t (*put)(struct dccl_load_sink *s, int thread, int which, size_t from, void *dst, size_t n);
  /* Returns once that buffer's last copy is done, so it may be refilled. */
  ncclResult_t (*reuse)(struct dccl_load_sink *s, int thread, int which);
  /* Every reader has stopped: waits for the copies, then lets the caller's stream go on (also after a failure). */
  ncclResult_t (*finish)(struct dccl_load_sink *s);
  void (*free)(struct dccl_load_sink *s);
};
struct dccl_load_sink {
  const struct dccl_load_sink_ops *ops;
};

/* Host destinations. */
ncclResult_t dccl_load_sink_host(int nthreads, size_t chunk, struct dccl_load_sink **out);

#ifdef DCCL_HAVE_DEVICE_CODE
/* GPU destinations (dst: on the device copies go to): copies start once `stream` has run the work queued on it
 * before this call, and the work queued on it after waits for the load's end. `chunk` 0: no staging buffers. */
ncclResult_t dccl_load_sink_device(int nthreads, size_t chunk, const void *dst, void *stream,
                                   struct dccl_load_sink **out);
#else
static inline ncclResult_t dccl_load_sink_device(int nthreads, size_t chunk, const void *dst, void *stream,
                                                 struct dccl_load_sink **out) {
  (void)nthreads, (void)chunk, (void)dst, (void)stream;
  *out = NULL;
  return dccl_error(ncclInvalidUsage, "loading files into GPU memory: this DCCL was built without the CUDA toolkit");
}
#endif

#endif
