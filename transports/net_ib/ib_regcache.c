/* The registration cache (ib_regcache.h says how entries are validated and why). */
#include "transports/net_ib/ib_regcache.h"

#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

struct entry {
  struct entry *prev, *next; /* the recency list, most recent first; only entries still cached are on it */
  struct dccl_ib_mr mr;
  uint64_t *ids; /* one identity word per page, recorded after registering */
  size_t npages;
  int refs;
  int retired; /* off the list: deregistered when the last reference goes */
};

struct dccl_ib_regcache {
  pthread_mutex_t lock;
  struct dccl_ib_registrar registrar;
  struct dccl_ib_regcache_limits limits;
  uintptr_t page;
  struct entry *head, *tail;
  struct dccl_ib_regcache_stats stats;
  atomic_int said_uncached; /* the INFO line about per-use registration, once per cache */
};

/* --- the pagemap identity --- */

#define PAGEMAP_PRESENT (UINT64_C(1) << 63)
#define PAGEMAP_PFN_MASK ((UINT64_C(1) << 55) - 1)

static pthread_mutex_t pagemap_lock = PTHREAD_MUTEX_INITIALIZER;
static int pagemap_fd = -1;
static pid_t pagemap_pid; /* the process that opened pagemap_fd: a forked child must open its own */

static int pagemap_open(void) {
  pthread_mutex_lock(&pagemap_lock);
  pid_t pid = getpid();
  if (pagemap_fd < 0 || pagemap_pid != pid) {
    if (pagemap_fd >= 0) close(pagemap_fd);
    pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    pagemap_pid = pid;
  }
  int fd = pagemap_fd;
  pthread_mutex_unlock(&pagemap_lock);
  return fd;
}

int dccl_ib_pagemap_identify(const struct dccl_ib_registrar *self, uintptr_t start, size_t len, uint64_t *ids,
                             size_t npages) {
  int fd = pagemap_open();
  if (fd < 0) return -1;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  size_t bytes = npages * sizeof(uint64_t);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = pread(fd, (char *)ids + done, bytes - done, (off_t)((start / page) * sizeof(uint64_t) + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  int hidden = 0;
  for (size_t i = 0; i < npages; i++) {
    ids[i] &= PAGEMAP_PRESENT | PAGEMAP_PFN_MASK;
    if (ids[i] == PAGEMAP_PRESENT) hidden = 1; /* present with frame 0: this process may not see frames */
  }
  return hidden ? 0 : 1;
}

/* --- the cache --- */

struct dccl_ib_regcache *dccl_ib_regcache_create(const struct dccl_ib_registrar *registrar,
                                                 const struct dccl_ib_regcache_limits *limits) {
  struct dccl_ib_regcache *cache = calloc(1, sizeof *cache);
  if (cache == NULL) return NULL;
  pthread_mutex_init(&cache->lock, NULL);
  cache->registrar = *registrar;
  if (cache->registrar.identify == NULL) cache->registrar.identify = dccl_ib_pagemap_identify;
  cache->limits.max_entries = limits != NULL ? limits->max_entries : 1024;
  cache->limits.max_bytes = limits != NULL ? limits->max_bytes : UINT64_C(1) << 40;
  cache->page = (uintptr_t)sysconf(_SC_PAGESIZE);
  return cache;
}

static void list_unlink(struct dccl_ib_regcache *cache, struct entry *e) {
  if (e->prev != NULL) e->prev->next = e->next; else cache->head = e->next;
  if (e->next != NULL) e->next->prev = e->prev; else cache->tail = e->prev;
  e->prev = e->next = NULL;
}

static void list_push_front(struct dccl_ib_regcache *cache, struct entry *e) {
  e->prev = NULL;
  e->next = cache->head;
  if (cache->head != NULL) cache->head->prev = e; else cache->tail = e;
  cache->head = e;
}

/* Takes a cached entry off the list (under the lock); the caller deregisters it once it has no reference. */
static void retire(struct dccl_ib_regcache *cache, struct entry *e) {
  list_unlink(cache, e);
  e->retired = 1;
  cache->stats.entries--;
  cache->stats.bytes -= e->mr.len;
}

/* Outside the lock: a registration can take milliseconds. */
static void entry_free(struct dccl_ib_regcache *cache, struct entry *e) {
  cache->registrar.dereg(&cache->registrar, &e->mr);
  pthread_mutex_lock(&cache->lock);
  cache->stats.registrations--;
  pthread_mutex_unlock(&cache->lock);
  free(e->ids);
  free(e);
}

/* Under the lock: retires unused entries, least recently used first, until both bounds hold; returns them as a
 * list (through `next`) for the caller to free once unlocked. Entries in use may keep the cache over a bound
 * until they are put. */
static struct entry *evict_over_bounds(struct dccl_ib_regcache *cache) {
  struct entry *victims = NULL;
  struct entry *e = cache->tail;
  while (e != NULL &&
         (cache->stats.entries > cache->limits.max_entries || cache->stats.bytes > cache->limits.max_bytes)) {
    struct entry *older_than_prev = e->prev;
    if (e->refs == 0) {
      retire(cache, e);
      cache->stats.evictions++;
      e->next = victims;
      victims = e;
    }
    e = older_than_prev;
  }
  return victims;
}

static void free_list(struct dccl_ib_regcache *cache, struct entry *victims) {
  while (victims != NULL) {
    struct entry *next = victims->next;
    entry_free(cache, victims);
    victims = next;
  }
}

/* Do the pages of e still carry the identities recorded at registration? Read in pieces, without allocating. */
static int entry_valid(struct dccl_ib_regcache *cache, const struct entry *e) {
  uint64_t now[512];
  for (size_t first = 0; first < e->npages; first += 512) {
    size_t n = e->npages - first < 512 ? e->npages - first : 512;
    uintptr_t start = e->mr.start + first * cache->page;
    if (cache->registrar.identify(&cache->registrar, start, n * cache->page, now, n) != 1) return 0;
    if (memcmp(now, e->ids + first, n * sizeof(uint64_t)) != 0) return 0;
  }
  return 1;
}

/* Under the lock (another thread may retire e). */
static void fill(struct dccl_ib_reg *reg, struct entry *e) {
  reg->mr = e->mr;
  reg->cached = !e->retired;
  reg->error = 0;
  reg->entry = e;
}

/* A cached entry covering [a, a+len), referenced and moved to the front; NULL if none. */
static struct entry *find_covering(struct dccl_ib_regcache *cache, uintptr_t a, size_t len) {
  for (struct entry *e = cache->head; e != NULL; e = e->next) {
    if (e->mr.start <= a && a + len <= e->mr.start + e->mr.len) {
      e->refs++;
      list_unlink(cache, e);
      list_push_front(cache, e);
      return e;
    }
  }
  return NULL;
}

/* Registers the page range on a miss and records its pages' identities. */
static enum dccl_ib_reg_result register_range(struct dccl_ib_regcache *cache, uintptr_t start, size_t len,
                                              struct dccl_ib_reg *reg) {
  struct entry *e = calloc(1, sizeof *e);
  size_t npages = len / cache->page;
  uint64_t *ids = malloc(npages * sizeof(uint64_t));
  int err = ENOMEM;
  if (e != NULL && ids != NULL) {
    e->mr.start = start;
    e->mr.len = len;
    err = cache->registrar.reg(&cache->registrar, start, len, &e->mr);
  }
  if (err != 0) {
    free(e);
    free(ids);
    reg->error = err;
    return DCCL_IB_REG_FAILED;
  }
  e->mr.start = start; /* whatever the registrar wrote there */
  e->mr.len = len;
  e->ids = ids;
  e->npages = npages;
  e->refs = 1;
  /* The registrar has pinned (faulted in) the pages: their identities now are the ones it holds. */
  int known = cache->registrar.identify(&cache->registrar, start, len, ids, npages);
  pthread_mutex_lock(&cache->lock);
  cache->stats.registrations++;
  struct entry *victims = NULL;
  enum dccl_ib_reg_result result;
  if (known == 1) {
    list_push_front(cache, e);
    cache->stats.entries++;
    cache->stats.bytes += len;
    cache->stats.misses++;
    victims = evict_over_bounds(cache);
    result = DCCL_IB_REG_MISS;
  } else {
    e->retired = 1; /* never on the list: put deregisters it */
    cache->stats.uncached++;
    result = DCCL_IB_REG_UNCACHED;
  }
  fill(reg, e);
  pthread_mutex_unlock(&cache->lock);
  free_list(cache, victims);
  if (result == DCCL_IB_REG_UNCACHED && atomic_exchange(&cache->said_uncached, 1) == 0)
    DCCL_INFO(DCCL_NET, "registration cache: %s, so registrations cannot be validated against a freed and "
                        "reused range: buffers are registered per use, not cached",
              known == 0 ? "page frame numbers are hidden from this process (no CAP_SYS_ADMIN)"
                         : "/proc/self/pagemap cannot be read");
  return result;
}

enum dccl_ib_reg_result dccl_ib_regcache_get(struct dccl_ib_regcache *cache, const void *addr, size_t len,
                                             struct dccl_ib_reg *reg) {
  memset(reg, 0, sizeof *reg);
  uintptr_t a = (uintptr_t)addr;
  if (len == 0 || a + len < a || a + len + cache->page < a + len) {
    reg->error = EINVAL;
    return DCCL_IB_REG_FAILED;
  }
  uintptr_t start = a & ~(cache->page - 1);
  uintptr_t end = (a + len + cache->page - 1) & ~(cache->page - 1);
  if (cache->registrar.max_mr_size != 0 && end - start > cache->registrar.max_mr_size)
    return DCCL_IB_REG_TOO_LARGE;
  for (;;) {
    pthread_mutex_lock(&cache->lock);
    struct entry *e = find_covering(cache, a, len);
    pthread_mutex_unlock(&cache->lock);
    if (e == NULL) break;
    if (entry_valid(cache, e)) { /* outside the lock: the reference keeps e alive */
      pthread_mutex_lock(&cache->lock);
      cache->stats.hits++;
      fill(reg, e);
      pthread_mutex_unlock(&cache->lock);
      return DCCL_IB_REG_HIT;
    }
    /* The pages changed under the registration: retire it, and look again (another entry may cover it). */
    pthread_mutex_lock(&cache->lock);
    if (!e->retired) {
      retire(cache, e);
      cache->stats.stale++;
    }
    pthread_mutex_unlock(&cache->lock);
    DCCL_TRACE(DCCL_NET, "registration of [%#lx, +%zu) is stale (its pages were replaced): registering again",
               (unsigned long)e->mr.start, e->mr.len);
    struct dccl_ib_reg dropped = {.entry = e};
    dccl_ib_regcache_put(cache, &dropped);
  }
  return register_range(cache, start, end - start, reg);
}

void dccl_ib_regcache_put(struct dccl_ib_regcache *cache, struct dccl_ib_reg *reg) {
  struct entry *e = reg->entry;
  if (e == NULL) return;
  reg->entry = NULL;
  pthread_mutex_lock(&cache->lock);
  e->refs--;
  struct entry *victims = NULL;
  if (e->retired && e->refs == 0) {
    e->next = NULL;
    victims = e;
  } else if (!e->retired) {
    victims = evict_over_bounds(cache);
  }
  pthread_mutex_unlock(&cache->lock);
  free_list(cache, victims);
}

void dccl_ib_regcache_stats(struct dccl_ib_regcache *cache, struct dccl_ib_regcache_stats *stats) {
  pthread_mutex_lock(&cache->lock);
  *stats = cache->stats;
  pthread_mutex_unlock(&cache->lock);
}

void dccl_ib_regcache_destroy(struct dccl_ib_regcache *cache) {
  if (cache == NULL) return;
  pthread_mutex_lock(&cache->lock);
  struct entry *all = NULL;
  while (cache->head != NULL) {
    struct entry *e = cache->head;
    if (e->refs != 0)
      DCCL_WARN(DCCL_NET, "registration cache destroyed while [%#lx, +%zu) is in use (%d references)",
                (unsigned long)e->mr.start, e->mr.len, e->refs);
    retire(cache, e);
    e->next = all;
    all = e;
  }
  pthread_mutex_unlock(&cache->lock);
  free_list(cache, all);
  pthread_mutex_destroy(&cache->lock);
  free(cache);
}

/* --- the verbs registrar --- */

static int verbs_reg(const struct dccl_ib_registrar *self, uintptr_t start, size_t len, struct dccl_ib_mr *mr) {
  struct ibv_mr *m = ibv_reg_mr((struct ibv_pd *)self->ctx, (void *)start, len, self->access);
  if (m == NULL) return errno != 0 ? errno : EIO;
  mr->handle = m;
  mr->lkey = m->lkey;
  mr->rkey = m->rkey;
  return 0;
}

static void verbs_dereg(const struct dccl_ib_registrar *self, struct dccl_ib_mr *mr) {
  int err = ibv_dereg_mr((struct ibv_mr *)mr->handle);
  if (err != 0)
    DCCL_WARN(DCCL_NET, "ibv_dereg_mr of [%#lx, +%zu) failed: %s", (unsigned long)mr->start, mr->len, strerror(err));
}

int dccl_ib_verbs_registrar(struct ibv_pd *pd, int access, struct dccl_ib_registrar *out) {
  struct ibv_device_attr attr;
  int err = ibv_query_device(pd->context, &attr);
  if (err != 0) return err;
  memset(out, 0, sizeof *out);
  out->reg = verbs_reg;
  out->dereg = verbs_dereg;
  out->ctx = pd;
  out->access = access;
  out->max_mr_size = attr.max_mr_size;
  return 0;
}
