/* The GPU sink of the bounce (storage/load_sink.h). Each reader has two pinned staging buffers, a stream of its own
 * and an event per buffer: a chunk's copy is issued on the reader's stream as soon as it is read, and the buffer
 * is refilled once its event says the copy is done, so reads and copies overlap. The caller's stream is ordered
 * against the load without a host function: at the call three stream operations are queued on it, a write of
 * `go` (the work queued before the call is done: the destination may be overwritten), a wait for `done` (which
 * the host sets once every copy is over, after a failure too) and a write of `released`. Those words live in
 * pinned memory the GPU reads; a slot serves another load only once its stream has written `released`, and
 * pinned memory is never given back (cuMemFreeHost may wait for the device, on which another rank's kernel may
 * spin): staging buffers return to a process-wide list for the next load. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "storage/load_sink.h"
#include "util/cuda_api.h"
#include "util/cuda_driver.h"

/* ---- the stream's words ---- */
#define SLOTS_PER_PAGE 256
struct flag_slot {
  uint32_t go, done, released, in_use; /* in_use: the host's; a slot is free when !in_use, or in_use == 2 and
                                          released (its load freed, its stream past the wait) */
};
struct flag_page {
  struct flag_slot *slots; /* pinned, mapped for the device */
  CUdeviceptr dev;         /* the same, as the device addresses it */
  struct flag_page *next;
};
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct flag_page *pages;

static int slot_free(struct flag_slot *f) {
  uint32_t use = f->in_use;
  return use == 0 || (use == 2 && __atomic_load_n(&f->released, __ATOMIC_ACQUIRE));
}

/* A free slot, and its device address. */
static ncclResult_t slot_get(struct flag_slot **out, CUdeviceptr *dev) {
  pthread_mutex_lock(&pool_lock);
  *out = NULL;
  for (struct flag_page *p = pages; p && !*out; p = p->next)
    for (int i = 0; i < SLOTS_PER_PAGE && !*out; i++)
      if (slot_free(&p->slots[i])) *out = &p->slots[i], *dev = p->dev + (CUdeviceptr)i * sizeof(struct flag_slot);
  if (!*out) {
    struct flag_page *p = calloc(1, sizeof(*p));
    void *mem = NULL;
    CUresult r = p ? dccl_cu.mem_host_alloc(&mem, SLOTS_PER_PAGE * sizeof(struct flag_slot),
                                            CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)
                   : CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) r = dccl_cu.mem_host_get_device_pointer(&p->dev, mem, 0);
    if (r != CUDA_SUCCESS) {
      free(p); /* the pinned page, if any, stays: giving it back may wait for the device */
      pthread_mutex_unlock(&pool_lock);
      return dccl_cu_result(r, "cuMemHostAlloc of a file load's stream words");
    }
    memset(mem, 0, SLOTS_PER_PAGE * sizeof(struct flag_slot));
    p->slots = mem;
    p->next = pages;
    pages = p;
    *out = &p->slots[0];
    *dev = p->dev;
  }
  struct flag_slot *f = *out;
  f->go = f->done = f->released = 0;
  f->in_use = 1;
  pthread_mutex_unlock(&pool_lock);
  return ncclSuccess;
}

static void slot_put(struct flag_slot *f) {
  pthread_mutex_lock(&pool_lock);
  f->in_use = 2;
  pthread_mutex_unlock(&pool_lock);
}

/* ---- staging buffers, kept for the next load ---- */
struct pinned {
  void *ptr;
  size_t bytes;
  struct pinned *next;
};
static struct pinned *spare;

static ncclResult_t pinned_get(size_t bytes, struct pinned **out) {
  pthread_mutex_lock(&pool_lock);
  struct pinned **link = &spare;
  while (*link && (*link)->bytes < bytes) link = &(*link)->next;
  *out = *link;
  if (*out) *link = (*out)->next;
  pthread_mutex_unlock(&pool_lock);
  if (*out) return ncclSuccess;
  struct pinned *p = calloc(1, sizeof(*p));
  if (!p) return dccl_error(ncclSystemError, "out of memory");
  CUresult r = dccl_cu.mem_host_alloc(&p->ptr, bytes, CU_MEMHOSTALLOC_PORTABLE);
  if (r != CUDA_SUCCESS) {
    free(p);
    return dccl_cu_result(r, "cuMemHostAlloc of a file load's staging buffer");
  }
  p->bytes = bytes;
  *out = p;
  return ncclSuccess;
}

static void pinned_put(struct pinned *p) {
  if (!p) return;
  pthread_mutex_lock(&pool_lock);
  p->next = spare;
  spare = p;
  pthread_mutex_unlock(&pool_lock);
}

/* ---- the sink ---- */
struct reader {
  CUstream stream;
  CUevent event[2];
  int pending[2]; /* a copy from that buffer was issued and not yet waited for */
  int started;    /* the caller's stream let this reader's copies begin */
  struct pinned *staging[2];
};

struct device_sink {
  struct dccl_load_sink base;
  CUcontext ctx;
  int ordinal, nthreads;
  struct flag_slot *flags;
  CUdeviceptr flags_dev;
  struct reader readers[];
};

static ncclResult_t enter(const struct device_sink *d) {
  DCCL_CUCHECK(dccl_cu.ctx_set_current(d->ctx), "cuCtxSetCurrent");
  return ncclSuccess;
}

static void *dev_staging(struct dccl_load_sink *s, int thread, int which) {
  return ((struct device_sink *)s)->readers[thread].staging[which]->ptr;
}

static ncclResult_t dev_begin(struct dccl_load_sink *s, int thread) {
  struct device_sink *d = (struct device_sink *)s;
  struct reader *r = &d->readers[thread];
  DCCLCHECK(enter(d));
  while (!r->started && !(r->started = __atomic_load_n(&d->flags->go, __ATOMIC_ACQUIRE)))
    nanosleep(&(struct timespec){0, 20000}, NULL); /* the caller's stream still runs what came before the call */
  return ncclSuccess;
}

static ncclResult_t dev_put(struct dccl_load_sink *s, int thread, int which, size_t from, void *dst, size_t n) {
  struct device_sink *d = (struct device_sink *)s;
  struct reader *r = &d->readers[thread];
  DCCLCHECK(dev_begin(s, thread));
  DCCL_CUCHECK(dccl_cu.memcpy_htod_async((CUdeviceptr)(uintptr_t)dst, (char *)r->staging[which]->ptr + from, n,
                                         r->stream),
               "cuMemcpyHtoDAsync of a file chunk");
  DCCL_CUCHECK(dccl_cu.event_record(r->event[which], r->stream), "cuEventRecord");
  r->pending[which] = 1;
  return ncclSuccess;
}

static ncclResult_t dev_reuse(struct dccl_load_sink *s, int thread, int which) {
  struct device_sink *d = (struct device_sink *)s;
  struct reader *r = &d->readers[thread];
  if (!r->pending[which]) return ncclSuccess;
  DCCLCHECK(enter(d));
  r->pending[which] = 0;
  DCCL_CUCHECK(dccl_cu.event_synchronize(r->event[which]), "cuEventSynchronize of a file chunk's copy");
  return ncclSuccess;
}

static ncclResult_t dev_finish(struct dccl_load_sink *s) {
  struct device_sink *d = (struct device_sink *)s;
  ncclResult_t res = enter(d);
  for (int t = 0; t < d->nthreads && res == ncclSuccess; t++)
    res = dccl_cu_result(dccl_cu.stream_synchronize(d->readers[t].stream), "cuStreamSynchronize of a file load");
  __atomic_store_n(&d->flags->done, 1u, __ATOMIC_RELEASE); /* the caller's stream goes on, whatever happened */
  return res;
}

static void dev_free(struct dccl_load_sink *s) {
  struct device_sink *d = (struct device_sink *)s;
  CUcontext caller = NULL; /* freed on the caller's thread (dcclLoadWait): its context is given back */
  dccl_cu.ctx_get_current(&caller);
  if (enter(d) == ncclSuccess) {
    for (int t = 0; t < d->nthreads; t++) {
      struct reader *r = &d->readers[t];
      for (int i = 0; i < 2; i++) {
        if (r->event[i]) dccl_cu.event_destroy(r->event[i]);
        pinned_put(r->staging[i]);
      }
      if (r->stream) dccl_cu.stream_destroy(r->stream);
    }
  }
  if (d->flags) {
    __atomic_store_n(&d->flags->done, 1u, __ATOMIC_RELEASE); /* never leave the caller's stream waiting */
    slot_put(d->flags);
  }
  if (caller) dccl_cu.ctx_set_current(caller);
  dccl_cuda_primary_ctx_release(d->ordinal);
  free(d);
}

static const struct dccl_load_sink_ops device_ops = {dev_begin, dev_staging, dev_put, dev_reuse, dev_finish, dev_free};

/* The readers' streams, events and buffers. */
static ncclResult_t make_readers(struct device_sink *d, size_t chunk) {
  for (int t = 0; t < d->nthreads; t++) {
    struct reader *r = &d->readers[t];
    DCCL_CUCHECK(dccl_cu.stream_create(&r->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate for a file load");
    for (int i = 0; i < 2; i++) {
      DCCL_CUCHECK(dccl_cu.event_create(&r->event[i], CU_EVENT_DISABLE_TIMING), "cuEventCreate for a file load");
      if (chunk > 0) DCCLCHECK(pinned_get(chunk, &r->staging[i]));
    }
  }
  return ncclSuccess;
}

/* go, wait for done, released: on the caller's stream, in that order. */
static ncclResult_t order_on_stream(struct device_sink *d, CUstream stream) {
  CUdeviceptr words = d->flags_dev;
  CUdeviceptr go = words + offsetof(struct flag_slot, go), done = words + offsetof(struct flag_slot, done),
              released = words + offsetof(struct flag_slot, released);
  DCCL_CUCHECK(dccl_cu.stream_write_value32(stream, go, 1, CU_STREAM_WRITE_VALUE_DEFAULT),
               "cuStreamWriteValue32 on the caller's stream");
  DCCL_CUCHECK(dccl_cu.stream_wait_value32(stream, done, 1, CU_STREAM_WAIT_VALUE_GEQ),
               "cuStreamWaitValue32 on the caller's stream");
  DCCL_CUCHECK(dccl_cu.stream_write_value32(stream, released, 1, CU_STREAM_WRITE_VALUE_DEFAULT),
               "cuStreamWriteValue32 on the caller's stream");
  return ncclSuccess;
}

ncclResult_t dccl_load_sink_device(int nthreads, size_t chunk, const void *dst, void *stream,
                                   struct dccl_load_sink **out) {
  *out = NULL;
  DCCLCHECK(dccl_cuda_api_load());
  int ordinal = -1;
  DCCL_CUCHECK(dccl_cu.pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                             (CUdeviceptr)(uintptr_t)dst),
               "the destination's device");
  CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  if (dccl_cu.stream_is_capturing((CUstream)stream, &capturing) == CUDA_SUCCESS &&
      capturing != CU_STREAM_CAPTURE_STATUS_NONE)
    return dccl_error(ncclInvalidUsage, "a file load cannot be captured into a CUDA graph (it reads the file once)");
  struct device_sink *d = calloc(1, sizeof(*d) + (size_t)nthreads * sizeof(struct reader));
  if (!d) return dccl_error(ncclSystemError, "out of memory");
  d->base.ops = &device_ops;
  d->nthreads = nthreads;
  d->ordinal = ordinal;
  void *ctx = NULL;
  ncclResult_t res = dccl_cuda_primary_ctx_retain(ordinal, &ctx);
  if (res != ncclSuccess) {
    free(d);
    return res;
  }
  d->ctx = (CUcontext)ctx;
  CUcontext caller = NULL;
  dccl_cu.ctx_get_current(&caller);
  res = enter(d);
  if (res == ncclSuccess) res = make_readers(d, chunk);
  if (res == ncclSuccess) res = slot_get(&d->flags, &d->flags_dev);
  if (res == ncclSuccess) res = order_on_stream(d, (CUstream)stream);
  if (caller) dccl_cu.ctx_set_current(caller);
  if (res != ncclSuccess) {
    dev_free(&d->base);
    return res;
  }
  *out = &d->base;
  return ncclSuccess;
}
