/* A cache of memory registrations for user buffers, so a buffer used again is sent or received zero-copy
 * without registering it again.
 *
 * Use: dccl_ib_regcache_get(cache, addr, len, &reg) returns a registration covering [addr, addr+len) (found, or
 * made for the page-rounded range), holding a reference; dccl_ib_regcache_put(cache, reg) drops it. An entry
 * with references is never deregistered. Unused entries stay cached, bounded by a count and a byte total; past
 * either, the least recently used unused entries are deregistered. One mutex guards the cache; registering and
 * validating run outside it. Lookup scans the entries (a list in recency order): fine for the hundreds of
 * entries a bound allows, not meant for hundreds of thousands.
 *
 * How a freed and reused range is never served a stale registration
 * -----------------------------------------------------------------
 * A registration pins the physical pages that backed the range when it was made. If the program unmaps the
 * range (or calls madvise(MADV_DONTNEED), or a copy-on-write happens) and new pages appear at the same virtual
 * addresses, the old registration still points at the old pages: RDMA through it would silently read or write
 * memory the program no longer sees. Watching munmap/mremap/madvise calls (hooks) misses direct system calls
 * and MADV_DONTNEED, so this cache asks the kernel what is mapped *now*:
 *   - at registration, after the registrar has pinned the pages, it records each page's identity: the physical
 *     frame number and present bit from /proc/self/pagemap (8 bytes a 4 KiB page, one pread for the range);
 *   - on every hit it reads them again and compares. Any difference (a page not present, another frame) retires
 *     the entry (deregistered once unused) and the lookup registers afresh.
 * Why equality is enough: while the registration lives, the frames it pinned cannot be freed, so no new mapping
 * can be given one of them. A page showing the same frame is therefore the very page the registration pinned
 * (e.g. the same shared-memory object mapped again), and RDMA through it is correct. Only the frame number and
 * the present bit are compared (soft-dirty and exclusive bits change without the page changing).
 * Where frame numbers are hidden (a process without CAP_SYS_ADMIN reads 0 for them), nothing can be validated,
 * so nothing is cached: each get registers for that use alone (reg->cached == 0) and put deregisters it. This
 * is said once at INFO; a caller that finds per-use registration too slow for small buffers stages them.
 * The identity function is pluggable (struct dccl_ib_registrar.identify), so device memory can be validated by
 * another identity (e.g. the driver's buffer id) instead of the pagemap.
 * Limits: the check runs at get time; a buffer unmapped while an operation using it is in flight is the
 * program's error (as with any zero-copy library). A hit costs a pagemap read proportional to the range (2 MiB
 * read for 1 GiB). Ranges are not merged: a range overlapping but not covered by an entry gets its own
 * registration of its pages.
 *
 * The registration itself is a pair of callbacks (struct dccl_ib_registrar): ibv_reg_mr/ibv_dereg_mr for host
 * memory (dccl_ib_verbs_registrar), dma-buf for device memory (ib_gdr.h), fakes in the unit tests. */
#ifndef DCCL_IB_REGCACHE_H_
#define DCCL_IB_REGCACHE_H_

#include <stddef.h>
#include <stdint.h>

/* One registration as the transport uses it. */
struct dccl_ib_mr {
  void *handle;  /* the registrar's object (struct ibv_mr * for verbs) */
  uint32_t lkey;
  uint32_t rkey;
  uintptr_t start; /* the registered (page-rounded) range */
  size_t len;
};

struct dccl_ib_registrar {
  /* Registers [start, start+len) (page-aligned); fills handle, lkey, rkey. 0 on success, else an errno value. */
  int (*reg)(const struct dccl_ib_registrar *self, uintptr_t start, size_t len, struct dccl_ib_mr *mr);
  void (*dereg)(const struct dccl_ib_registrar *self, struct dccl_ib_mr *mr);
  void *ctx;  /* the registrar's own (struct ibv_pd * for verbs) */
  int access; /* IBV_ACCESS_* flags for verbs */
  /* The largest range one registration may cover (the device's max_mr_size); 0: no limit. */
  uint64_t max_mr_size;
  /* Writes one identity word per page of [start, start+len) (page-aligned) into ids[npages]. Returns 1 when the
   * words identify the pages, 0 when they cannot (frame numbers hidden: do not cache), -1 on an error. NULL: the
   * pagemap (dccl_ib_pagemap_identify). */
  int (*identify)(const struct dccl_ib_registrar *self, uintptr_t start, size_t len, uint64_t *ids,
                  size_t npages);
};

struct dccl_ib_regcache_limits {
  size_t max_entries; /* unused entries beyond this are evicted, least recently used first */
  uint64_t max_bytes; /* the same for the registered bytes */
};

enum dccl_ib_reg_result {
  DCCL_IB_REG_HIT = 0,      /* a cached registration, still valid */
  DCCL_IB_REG_MISS = 1,     /* registered now, and cached */
  DCCL_IB_REG_UNCACHED = 2, /* registered for this use only (pages cannot be validated); put deregisters it */
  DCCL_IB_REG_TOO_LARGE = 3, /* the page-rounded range exceeds max_mr_size: stage it through the FIFO */
  DCCL_IB_REG_FAILED = 4    /* the registrar failed (errno in reg->error); stage it */
};

/* What a get hands out; pass it back to put. */
struct dccl_ib_reg {
  struct dccl_ib_mr mr;
  int cached; /* 0 for DCCL_IB_REG_UNCACHED */
  int error;  /* errno of a DCCL_IB_REG_FAILED */
  void *entry; /* the cache's own */
};

struct dccl_ib_regcache_stats {
  uint64_t hits, misses, stale, evictions, uncached;
  size_t entries;      /* live entries, in use or not */
  uint64_t bytes;      /* their registered bytes */
  size_t registrations; /* registrations currently held (reg calls minus dereg calls) */
};

struct dccl_ib_regcache;

/* NULL limits: 1024 entries, 1 TiB. Returns NULL when out of memory. */
struct dccl_ib_regcache *dccl_ib_regcache_create(const struct dccl_ib_registrar *registrar,
                                                 const struct dccl_ib_regcache_limits *limits);
/* Deregisters every entry. Every get must have been put first: a cached entry still referenced is reported at
 * WARN and deregistered anyway, a retired one (stale or per use) is the holder's to put, which it cannot now. */
void dccl_ib_regcache_destroy(struct dccl_ib_regcache *cache);
/* A registration covering [addr, addr+len), len > 0; reg->mr is valid for HIT, MISS and UNCACHED, each of which
 * must be matched by one put. */
enum dccl_ib_reg_result dccl_ib_regcache_get(struct dccl_ib_regcache *cache, const void *addr, size_t len,
                                             struct dccl_ib_reg *reg);
void dccl_ib_regcache_put(struct dccl_ib_regcache *cache, struct dccl_ib_reg *reg);
void dccl_ib_regcache_stats(struct dccl_ib_regcache *cache, struct dccl_ib_regcache_stats *stats);

/* The default identity: present bit and frame number of each page, from /proc/self/pagemap. */
int dccl_ib_pagemap_identify(const struct dccl_ib_registrar *self, uintptr_t start, size_t len, uint64_t *ids,
                             size_t npages);

/* The real registrar for host memory: ibv_reg_mr on `pd` with `access` (IBV_ACCESS_* flags), max_mr_size from
 * the device. Returns 0, or an errno value when the device cannot be queried. */
struct ibv_pd;
int dccl_ib_verbs_registrar(struct ibv_pd *pd, int access, struct dccl_ib_registrar *out);

#endif
