/* A file's byte range into memory (file_load.h): chunks of DCCL_FILE_CHUNK bytes, claimed by DCCL_FILE_THREADS
 * threads in order, so several requests are in flight at once (one thread's reads wait on the disk one at a time).
 * Host destinations are read with pread straight into place, so the page cache's copy is the only one. GPU
 * destinations (and host ones under DCCL_FILE_PATH=bounce) go through the bounce: each thread preads into one of two
 * staging buffers and hands it to a sink (load_sink.h) that copies it on while the thread fills the other. pread,
 * not mmap: a file that shrinks while it is read gives a short read, which is an error naming the file, where a
 * mapping would raise SIGBUS in the middle of a copy. O_DIRECT reads the disk's blocks straight into the staging
 * buffers, past the page cache, where the file system allows it: for GPU destinations each chunk that is mostly
 * not cached (DCCL_FILE_PATH=direct: every chunk). Where cuFile takes the file (storage/cufile.h), each thread
 * reads its chunks straight into GPU memory through it, ordered on the stream by the GPU sink. */
#define _GNU_SOURCE /* O_DIRECT */
#include "storage/file_load.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/cufile.h"
#include "storage/load_sink.h"
#include "storage/page_cache.h"
#include "util/cuda_driver.h"
#include "util/error.h"
#include "util/log.h"
#include "util/params.h"

#define MAX_THREADS 64
#define DIRECT_ALIGN 4096 /* O_DIRECT: file offsets, lengths and buffers on this boundary (any block size divides it) */
/* Which chunks the bounce reads with O_DIRECT: none, those mostly not in the page cache, every one. */
enum direct_mode { DIRECT_NONE, DIRECT_UNCACHED, DIRECT_ALWAYS };

struct dcclLoad {
  int fd, owned;
  int direct_fd; /* the file opened again with O_DIRECT, or -1 */
  int direct;    /* enum direct_mode */
  void *cufile;  /* cuFile's handle of the file when it reads the chunks, or NULL */
  struct dccl_page_cache_view cached; /* DIRECT_UNCACHED: which chunks the page cache holds */
  _Atomic size_t direct_chunks;       /* chunks read with O_DIRECT */
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
  struct dccl_load_sink *sink; /* the bounce's, or NULL: pread straight into dst */
  _Atomic int readers_left;    /* threads still reading: the last one ends the sink's copies */
  _Atomic int running;         /* threads not yet finished (after the sink's end) */
  pthread_t threads[MAX_THREADS];
  struct reader_arg {
    struct dcclLoad *load;
    int index;
  } args[MAX_THREADS];
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

static void fail_short(struct dcclLoad *l, size_t at) {
  fail(l, ncclSystemError,
       "reading %s: it ended at byte %zu, before the %zu bytes asked from byte %zu (the file shrank while it was "
       "read?)",
       l->name, at, l->bytes, l->offset);
}

/* Reads [begin, end) of the range whole into `to` (pread may return less than asked; 0 means the file ended
 * early). Without a sink the bytes count as done as they arrive. 0, or -1 after recording the failure. */
static int read_range(struct dcclLoad *l, char *to, size_t begin, size_t end) {
  for (size_t at = begin; at < end && !atomic_load(&l->failed);) {
    ssize_t n = pread(l->fd, to + (at - begin), end - at, (off_t)(l->offset + at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      fail(l, ncclSystemError, "reading %s at byte %zu: %s", l->name, l->offset + at, strerror(errno));
      return -1;
    }
    if (n == 0) {
      fail_short(l, l->offset + at);
      return -1;
    }
    at += (size_t)n;
    if (!l->sink) atomic_fetch_add(&l->done, (size_t)n);
  }
  return atomic_load(&l->failed) ? -1 : 0;
}

/* [begin, end) of the range with O_DIRECT into the page-aligned `to`: the request widens to the blocks around it,
 * and the range's bytes start `*skip` bytes into `to` (which holds end - begin + 2 DIRECT_ALIGN). A read that ends
 * off a block boundary met the end of the file. 0, or -1 after recording the failure. */
static int read_direct(struct dcclLoad *l, char *to, size_t begin, size_t end, size_t *skip) {
  size_t first = l->offset + begin, last = l->offset + end;
  size_t from = first / DIRECT_ALIGN * DIRECT_ALIGN, upto = (last + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN;
  *skip = first - from;
  size_t at = from;
  while (at < last && !atomic_load(&l->failed)) {
    ssize_t n = pread(l->direct_fd, to + (at - from), upto - at, (off_t)at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      fail(l, ncclSystemError, "reading %s at byte %zu (O_DIRECT): %s", l->name, at, strerror(errno));
      return -1;
    }
    at += (size_t)n;
    if (n == 0 || (at % DIRECT_ALIGN != 0 && at < last)) {
      fail_short(l, at);
      return -1;
    }
  }
  return atomic_load(&l->failed) ? -1 : 0;
}

/* The bounce: chunk c into staging buffer `which` (once its last copy is done), then on to the destination. */
static void bounce_chunk(struct dcclLoad *l, int thread, int which, size_t begin, size_t end) {
  const struct dccl_load_sink_ops *ops = l->sink->ops;
  ncclResult_t res = ops->reuse(l->sink, thread, which);
  if (res != ncclSuccess) {
    fail(l, res, "loading %s: %s", l->name, dccl_last_error());
    return;
  }
  char *staging = ops->staging(l->sink, thread, which);
  size_t skip = 0;
  int direct = l->direct_fd >= 0 &&
               (l->direct == DIRECT_ALWAYS ||
                !dccl_page_cache_mostly_cached(&l->cached, l->offset + begin, l->offset + end));
  if (direct) atomic_fetch_add(&l->direct_chunks, 1);
  if (direct ? read_direct(l, staging, begin, end, &skip) : read_range(l, staging, begin, end)) return;
  res = ops->put(l->sink, thread, which, skip, l->dst + begin, end - begin);
  if (res != ncclSuccess) fail(l, res, "loading %s: %s", l->name, dccl_last_error());
  else atomic_fetch_add(&l->done, end - begin);
}

/* [begin, end) of the range through cuFile, straight into the destination once the caller's stream lets it. */
static void cufile_chunk(struct dcclLoad *l, int thread, size_t begin, size_t end) {
  ncclResult_t res = l->sink->ops->begin(l->sink, thread);
  if (res != ncclSuccess) {
    fail(l, res, "loading %s: %s", l->name, dccl_last_error());
    return;
  }
  for (size_t at = begin; at < end && !atomic_load(&l->failed);) {
    char why[256];
    ssize_t n = dccl_cufile_read(l->cufile, l->dst, end - at, l->offset + at, at, why, sizeof(why));
    if (n < 0) {
      fail(l, ncclSystemError, "reading %s at byte %zu: %s", l->name, l->offset + at, why);
      return;
    }
    if (n == 0) {
      fail_short(l, l->offset + at);
      return;
    }
    at += (size_t)n;
    atomic_fetch_add(&l->done, (size_t)n);
  }
}

static void *reader(void *arg) {
  struct reader_arg *a = arg;
  struct dcclLoad *l = a->load;
  size_t nchunks = (l->bytes + l->chunk - 1) / l->chunk;
  for (int which = 0;; which ^= 1) {
    size_t c = atomic_fetch_add(&l->next_chunk, 1);
    if (c >= nchunks || atomic_load(&l->failed)) break;
    size_t begin = c * l->chunk, end = begin + l->chunk < l->bytes ? begin + l->chunk : l->bytes;
    if (l->cufile) cufile_chunk(l, a->index, begin, end);
    else if (l->sink) bounce_chunk(l, a->index, which, begin, end);
    else read_range(l, l->dst + begin, begin, end);
  }
  /* The last reader ends the sink's copies and lets the caller's stream go on, before the load reads as done. */
  if (atomic_fetch_sub(&l->readers_left, 1) == 1 && l->sink) {
    ncclResult_t res = l->sink->ops->finish(l->sink);
    if (res != ncclSuccess) fail(l, res, "loading %s: %s", l->name, dccl_last_error());
  }
  atomic_fetch_sub(&l->running, 1);
  return NULL;
}

static void load_free(struct dcclLoad *l) {
  if (l->sink) l->sink->ops->free(l->sink);
  dccl_cufile_close(l->cufile); /* before the descriptor it names closes */
  if (l->owned && l->fd >= 0) close(l->fd);
  if (l->direct_fd >= 0) close(l->direct_fd);
  dccl_page_cache_view_close(&l->cached);
  pthread_mutex_destroy(&l->lock);
  free(l);
}

/* Which way the bytes go (DCCL_FILE_PATH), logged with the reason: *bounce or pread straight into place, which of
 * the bounce's chunks are read with O_DIRECT (*direct, enum direct_mode), and whether cuFile is asked first (GPU
 * destinations: under `cufile`, and by default where nvidia-fs is loaded; its compat mode, cuFile's own bounce,
 * only when asked by name). `auto` is what GPU destinations get by default; naming it lets host destinations (CI's
 * machines have no GPU) run the same pipeline. */
static ncclResult_t choose_path(const char *name, int on_device, int *bounce, int *direct, int *cufile) {
  const char *forced = dccl_param_str(DCCL_PARAM_FILE_PATH);
  int named_cufile = !strcasecmp(forced, "cufile"), named_auto = !strcasecmp(forced, "auto");
  *cufile = on_device && (named_cufile || ((!*forced || named_auto) && dccl_cufile_gpudirect_loaded()));
  int is_auto = named_auto || named_cufile;
  if (*forced && strcasecmp(forced, "bounce") && strcasecmp(forced, "direct") && !is_auto)
    return dccl_error(ncclInvalidArgument,
                      "loading %s: DCCL_FILE_PATH=%s: want auto, bounce, direct or cufile (or unset)", name, forced);
  *bounce = on_device || *forced;
  *direct = !strcasecmp(forced, "direct")     ? DIRECT_ALWAYS
            : is_auto || (on_device && !*forced) ? DIRECT_UNCACHED
                                                 : DIRECT_NONE;
  DCCL_INFO(DCCL_ALL, "loading %s: %s (%s)", name,
            *direct == DIRECT_ALWAYS     ? "the bounce through pinned staging buffers, every chunk read with O_DIRECT"
            : *direct == DIRECT_UNCACHED ? "the bounce through pinned staging buffers, chunks mostly not in the page "
                                           "cache read with O_DIRECT"
            : *bounce                    ? "the bounce through pinned staging buffers"
                                         : "pread",
            *forced ? "DCCL_FILE_PATH" : on_device ? "GPU memory" : "host memory: read in place");
  return ncclSuccess;
}

/* The file again, with O_DIRECT (through /proc/self/fd, so a caller's descriptor keeps its flags), or -1 where the
 * file system refuses it (tmpfs before Linux 6.6, some network file systems): then buffered reads, logged. */
static int open_direct(int fd, const char *name) {
  char proc[64];
  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
  int direct_fd = open(proc, O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (direct_fd < 0)
    DCCL_INFO(DCCL_ALL, "loading %s: O_DIRECT refused (%s); buffered reads instead", name, strerror(errno));
  return direct_fd;
}

ncclResult_t dccl_file_load_start(int fd, int owned, const char *name, size_t offset, size_t bytes, void *dst,
                                  void *stream, struct dcclLoad **out) {
  *out = NULL;
  int on_device = dst && dccl_cuda_is_device_ptr(dst), bounce = 0, direct = 0, cufile = 0;
  ncclResult_t chosen = choose_path(name, on_device, &bounce, &direct, &cufile);
  if (chosen != ncclSuccess) {
    if (owned) close(fd);
    return chosen;
  }
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
  if (cufile && bytes > 0) {
    char why[300];
    l->cufile = dccl_cufile_open(fd, why, sizeof(why));
    DCCL_INFO(DCCL_ALL, "loading %s: cuFile: %s; %s", name, why,
              l->cufile ? "reading through it" : "the bounce");
  }
  l->direct = l->cufile ? DIRECT_NONE : direct;
  l->direct_fd = l->direct != DIRECT_NONE && bytes > 0 && S_ISREG(st.st_mode) ? open_direct(fd, name) : -1;
  if (l->direct_fd >= 0 && direct == DIRECT_UNCACHED) dccl_page_cache_view_open(&l->cached, fd, offset, bytes);
  snprintf(l->name, sizeof(l->name), "%s", name);
  l->dst = dst;
  l->offset = offset;
  l->bytes = bytes;
  int64_t chunk = dccl_param_int(DCCL_PARAM_FILE_CHUNK), threads = dccl_param_int(DCCL_PARAM_FILE_THREADS);
  l->chunk = chunk >= 4096 ? (size_t)chunk : 4096;
  if (l->direct_fd >= 0) l->chunk = (l->chunk + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN;
  size_t staging = l->cufile ? 0 : l->chunk + (l->direct_fd >= 0 ? 2 * DIRECT_ALIGN : 0); /* O_DIRECT: blocks */
  size_t nchunks = (bytes + l->chunk - 1) / l->chunk;
  if (threads < 1) threads = 1;
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  l->nthreads = (size_t)threads < nchunks ? (int)threads : (int)nchunks;
  pthread_mutex_init(&l->lock, NULL);
  /* Nothing to move, nothing to order: an empty load needs no sink. */
  ncclResult_t res = !bounce || l->nthreads == 0 ? ncclSuccess
                     : on_device ? dccl_load_sink_device(l->nthreads, staging, dst, stream, &l->sink)
                                 : dccl_load_sink_host(l->nthreads, staging, &l->sink);
  if (res != ncclSuccess) {
    load_free(l);
    return dccl_error(res, "loading %s: %s", name, dccl_last_error());
  }
  atomic_store(&l->running, l->nthreads);
  atomic_store(&l->readers_left, l->nthreads);
  for (int i = 0; i < l->nthreads; i++) {
    l->args[i] = (struct reader_arg){l, i};
    int err = pthread_create(&l->threads[i], NULL, reader, &l->args[i]);
    if (err) {
      /* The threads already started finish the load's chunks; the missing ones only make it slower. */
      atomic_fetch_sub(&l->readers_left, l->nthreads - i);
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

size_t dccl_file_load_direct_chunks(struct dcclLoad *load) { return atomic_load(&load->direct_chunks); }

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
  if (load->cufile) DCCL_INFO(DCCL_ALL, "loaded %s: every chunk through cuFile", load->name);
  if (load->direct_fd >= 0)
    DCCL_INFO(DCCL_ALL, "loaded %s: %zu of %zu chunks with O_DIRECT, the others with pread", load->name,
              atomic_load(&load->direct_chunks), (load->bytes + load->chunk - 1) / load->chunk);
  ncclResult_t res = load->res == ncclSuccess ? ncclSuccess : dccl_error(load->res, "%s", load->error);
  load_free(load);
  return res;
}
