/* The host sink of the bounce (storage/load_sink.h): staging buffers in ordinary memory, memcpy. */
#include "storage/load_sink.h"

#include <stdlib.h>
#include <string.h>

struct host_sink {
  struct dccl_load_sink base;
  size_t chunk;
  char *buffers; /* nthreads x 2 x chunk */
};

static void *host_staging(struct dccl_load_sink *s, int thread, int which) {
  struct host_sink *h = (struct host_sink *)s;
  return h->buffers + ((size_t)thread * 2 + (size_t)which) * h->chunk;
}

static ncclResult_t host_put(struct dccl_load_sink *s, int thread, int which, size_t from, void *dst, size_t n) {
  memcpy(dst, (char *)host_staging(s, thread, which) + from, n);
  return ncclSuccess;
}

static ncclResult_t host_nothing(struct dccl_load_sink *s, int thread, int which) {
  (void)s, (void)thread, (void)which;
  return ncclSuccess;
}

static ncclResult_t host_begin(struct dccl_load_sink *s, int thread) {
  (void)s, (void)thread;
  return ncclSuccess;
}

static ncclResult_t host_finish(struct dccl_load_sink *s) {
  (void)s;
  return ncclSuccess;
}

static void host_free(struct dccl_load_sink *s) {
  struct host_sink *h = (struct host_sink *)s;
  free(h->buffers);
  free(h);
}

static const struct dccl_load_sink_ops host_ops = {host_begin, host_staging, host_put, host_nothing, host_finish, host_free};

ncclResult_t dccl_load_sink_host(int nthreads, size_t chunk, struct dccl_load_sink **out) {
  *out = NULL;
  struct host_sink *h = calloc(1, sizeof(*h));
  size_t bytes = (size_t)nthreads * 2 * ((chunk + 4095) / 4096 * 4096);
  if (h) h->buffers = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (!h || !h->buffers) {
    free(h);
    return dccl_error(ncclSystemError, "out of memory for %d staging buffers of %zu bytes", 2 * nthreads, chunk);
  }
  h->base.ops = &host_ops;
  h->chunk = (chunk + 4095) / 4096 * 4096; /* every buffer page-aligned */
  *out = &h->base;
  return ncclSuccess;
}
