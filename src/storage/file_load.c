/* A file's byte range into host memory (file_load.h): chunks of DCCL_FILE_CHUNK bytes, claimed by DCCL_FILE_THREADS
 * threads in order and read with pread straight into the destination, so the page cache's copy is the only one
 * and several requests are in flight at once (one thread's reads wait on the disk one at a time). pread, not mmap:
 * a file that shrinks while it is read gives a short read, which is an error naming the file, where a mapping
 * would raise SIGBUS in the middle of a copy. */
#include "storage/file_load.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/params.h"

#define MAX_THREADS 64

struct dcclLoad {
  int fd, owned;
  char name[256];
  char *dst;
  size_t offset, bytes, chunk;
  _Atomic size_t next_chunk; /* the next chunk a thread claims */
  _Atomic size_t done;       /* bytes read */
  _Atomic int failed;        /* a thread hit an error: the others stop claiming */
  pthread_mutex_t lock;      /* guards error and res */
  ncclResult_t res;
  char error[512];
  int nthreads;
  _Atomic int running; /* threads not yet finished */
  pthread_t threads[MAX_THREADS];
};

static void fail(struct dcclLoad *l, ncclResult_t res, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(struct dcclLoad *l, ncclResult_t res, const char *fmt, ...) {
  pthread_mutex_lock(&l->lock);
  if (l->res == ncclSuccess) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->error, sizeof(l->error), fmt, ap);
    va_end(ap);
    l->res = res;
  }
  pthread_mutex_unlock(&l->lock);
  atomic_store(&l->failed, 1);
}

/* Reads chunk c whole (pread may return less than asked; 0 means the file ended early). */
static void read_chunk(struct dcclLoad *l, size_t c) {
  size_t begin = c * l->chunk, end = begin + l->chunk < l->bytes ? begin + l->chunk : l->bytes;
  while (begin < end && !atomic_load(&l->failed)) {
    ssize_t n = pread(l->fd, l->dst + begin, end - begin, (off_t)(l->offset + begin));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      fail(l, ncclSystemError, "reading %s at byte %zu: %s", l->name, l->offset + begin, strerror(errno));
      return;
    }
    if (n == 0) {
      fail(l, ncclSystemError,
           "reading %s: it ended at byte %zu, before the %zu bytes asked from byte %zu (the file shrank while it was "
           "read?)",
           l->name, l->offset + begin, l->bytes, l->offset);
      return;
    }
    begin += (size_t)n;
    atomic_fetch_add(&l->done, (size_t)n);
  }
}

static void *reader(void *arg) {
  struct dcclLoad *l = arg;
  size_t nchunks = (l->bytes + l->chunk - 1) / l->chunk;
  for (;;) {
    size_t c = atomic_fetch_add(&l->next_chunk, 1);
    if (c >= nchunks || atomic_load(&l->failed)) break;
    read_chunk(l, c);
  }
  atomic_fetch_sub(&l->running, 1);
  return NULL;
}

static void load_free(struct dcclLoad *l) {
  if (l->owned && l->fd >= 0) close(l->fd);
  pthread_mutex_destroy(&l->lock);
  free(l);
}

ncclResult_t dccl_file_load_start(int fd, int owned, const char *name, size_t offset, size_t bytes, void *dst,
                                  struct dcclLoad **out) {
  *out = NULL;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    if (owned) close(fd);
    return dccl_error(ncclInvalidArgument, "%s: %s", name, strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    if (owned) close(fd);
    return dccl_error(ncclInvalidArgument, "%s is a directory, not a file", name);
  }
  /* A regular file's size bounds the range now; a pipe or device has none to check (a short read says it later). */
  if (S_ISREG(st.st_mode) && (offset > (size_t)st.st_size || bytes > (size_t)st.st_size - offset)) {
    if (owned) close(fd);
    if (offset > (size_t)st.st_size)
      return dccl_error(ncclInvalidArgument, "%s: offset %zu is past the end of the file (%lld bytes)", name, offset,
                        (long long)st.st_size);
    return dccl_error(ncclInvalidArgument,
                      "%s is %lld bytes: %zu bytes from byte %zu end %zu bytes past it (a short file?)", name,
                      (long long)st.st_size, bytes, offset, offset + bytes - (size_t)st.st_size);
  }
  if (bytes > 0 && !dst) {
    if (owned) close(fd);
    return dccl_error(ncclInvalidArgument, "loading %s: the destination is NULL", name);
  }
  struct dcclLoad *l = calloc(1, sizeof(*l));
  if (!l) {
    if (owned) close(fd);
    return dccl_error(ncclSystemError, "out of memory loading %s", name);
  }
  l->fd = fd;
  l->owned = owned;
  snprintf(l->name, sizeof(l->name), "%s", name);
  l->dst = dst;
  l->offset = offset;
  l->bytes = bytes;
  int64_t chunk = dccl_param_int(DCCL_PARAM_FILE_CHUNK), threads = dccl_param_int(DCCL_PARAM_FILE_THREADS);
  l->chunk = chunk >= 4096 ? (size_t)chunk : 4096;
  size_t nchunks = (bytes + l->chunk - 1) / l->chunk;
  if (threads < 1) threads = 1;
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  l->nthreads = (size_t)threads < nchunks ? (int)threads : (int)nchunks;
  pthread_mutex_init(&l->lock, NULL);
  atomic_store(&l->running, l->nthreads);
  for (int i = 0; i < l->nthreads; i++) {
    int err = pthread_create(&l->threads[i], NULL, reader, l);
    if (err) {
      /* The threads already started finish the load's chunks; the missing ones only make it slower. */
      atomic_fetch_sub(&l->running, l->nthreads - i);
      l->nthreads = i;
      if (i == 0) {
        load_free(l);
        return dccl_error(ncclSystemError, "loading %s: cannot start a reader thread: %s", name, strerror(err));
      }
      break;
    }
  }
  *out = l;
  return ncclSuccess;
}

ncclResult_t dcclLoadQuery(dcclLoad_t load, size_t *done, size_t *total) {
  if (!load) return dccl_error(ncclInvalidArgument, "dcclLoadQuery: load is NULL");
  /* Whether threads run, before how far they got: once none runs, the count read after it is the final one. */
  int running = atomic_load(&load->running);
  if (done) *done = atomic_load(&load->done);
  if (total) *total = load->bytes;
  if (running > 0) return ncclInProgress;
  pthread_mutex_lock(&load->lock);
  ncclResult_t res = load->res;
  pthread_mutex_unlock(&load->lock);
  return res == ncclSuccess ? ncclSuccess : dccl_error(res, "%s", load->error);
}

ncclResult_t dcclLoadWait(dcclLoad_t load) {
  if (!load) return dccl_error(ncclInvalidArgument, "dcclLoadWait: load is NULL");
  for (int i = 0; i < load->nthreads; i++) pthread_join(load->threads[i], NULL);
  ncclResult_t res = load->res == ncclSuccess ? ncclSuccess : dccl_error(load->res, "%s", load->error);
  load_free(load);
  return res;
}
