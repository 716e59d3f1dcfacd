/* A device allocation of one process mapped into another (util/cuda_peer_mem.h). */
#include "util/cuda_peer_mem.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cuda_api.h"

_Static_assert(sizeof(CUipcMemHandle) <= sizeof(((struct dccl_peer_mem_export *)0)->ipc), "IPC handle size");

/* The cuMem allocation at `at`, or 0 when `at` is not cuMem memory (the handle is released: only its value is
 * compared). */
static CUmemGenericAllocationHandle cumem_at(CUdeviceptr at) {
  CUmemGenericAllocationHandle h = 0;
  if (dccl_cu.mem_retain_allocation_handle(&h, (void *)(uintptr_t)at) != CUDA_SUCCESS) return 0;
  dccl_cu.mem_release(h);
  return h;
}

/* Where [p, +bytes) lies, quietly: its allocation's device, base, size and buffer id (`id` where known, else 0) in
 * `e`, or why not (*r: the driver's answer where it refused). */
enum { LOCATED, NOT_DEVICE, NO_RANGE, PAST_END, NO_ID };
static int locate(CUdeviceptr p, size_t bytes, unsigned long long id, struct dccl_peer_mem_export *e, CUresult *r) {
  memset(e, 0, sizeof(*e));
  CUdeviceptr base = 0;
  size_t size = 0;
  int ordinal = -1;
  unsigned int type = 0;
  if (dccl_cu.pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUDA_SUCCESS ||
      type != CU_MEMORYTYPE_DEVICE ||
      dccl_cu.pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) != CUDA_SUCCESS)
    return NOT_DEVICE;
  if ((*r = dccl_cu.mem_get_address_range(&base, &size, p)) != CUDA_SUCCESS) return NO_RANGE;
  e->device = ordinal;
  e->base = base;
  e->bytes = size;
  if (p + bytes > base + size) return PAST_END;
  if (!id && (*r = dccl_cu.pointer_get_attribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, base)) != CUDA_SUCCESS)
    return NO_ID;
  e->id = id;
  return LOCATED;
}

/* The last descriptions dccl_peer_mem_describe made (it is asked at every call that may meet), found again by the
 * allocation's buffer id, which the process never reuses: a warm call asks the driver one question, not seven.
 * Kept for this process only (a forked child has its own allocations). */
#define EXPORTS_CACHED 32 /* the first-use rows (32) each name an allocation per role */
static struct dccl_peer_mem_export exports_cache[EXPORTS_CACHED];
static unsigned exports_next;
static pid_t exports_pid;
static pthread_mutex_t exports_lock = PTHREAD_MUTEX_INITIALIZER;

/* The parts of the last few reserved ranges seen (SPAN kind), so a span asked again costs one driver question per
 * part (its buffer id: a part replaced in its place has another) rather than seven. */
#define SPANS_KEPT 4
#define SPAN_PARTS_KEPT 256
static struct kept_span {
  uint64_t start, size;
  int32_t device;
  uint32_t n;
  struct dccl_peer_mem_part part[SPAN_PARTS_KEPT];
} spans_kept[SPANS_KEPT];
static unsigned spans_next;

/* With exports_lock held: the caches are this process's (a forked child starts them afresh). */
static void caches_own(void) {
  if (exports_pid == getpid()) return;
  memset(exports_cache, 0, sizeof(exports_cache));
  memset(spans_kept, 0, sizeof(spans_kept));
  exports_pid = getpid();
}

/* [p, +bytes) in a kept span: 1 with `e` and `parts` when every part it lies in is still the allocation kept (p's
 * own buffer id `id` is known). */
static int span_cached(CUdeviceptr p, size_t bytes, unsigned long long id, struct dccl_peer_mem_export *e,
                       struct dccl_peer_mem_parts *parts) {
  int found = 0;
  pthread_mutex_lock(&exports_lock);
  caches_own();
  for (int k = 0; k < SPANS_KEPT && !found && parts; k++) {
    const struct kept_span *ks = &spans_kept[k];
    if (!ks->size || p < ks->start || p >= ks->start + ks->size) continue;
    parts->n = 0;
    CUdeviceptr at = p;
    while (at < p + bytes && parts->n < DCCL_PEER_MEM_MAX_PARTS) { /* the kept part holding `at`, then the next */
      CUdeviceptr off = at - ks->start;
      uint32_t j = 0;
      while (j < ks->n && !(off >= ks->part[j].at && off < ks->part[j].at + ks->part[j].bytes)) j++;
      if (j == ks->n) break;
      parts->part[parts->n++] = ks->part[j];
      at = ks->start + ks->part[j].at + ks->part[j].bytes;
    }
    if ((found = at >= p + bytes))
      *e = (struct dccl_peer_mem_export){.kind = DCCL_PEER_MEM_SPAN, .device = ks->device, .base = ks->start,
                                         .bytes = ks->size, .id = ks->size};
  }
  pthread_mutex_unlock(&exports_lock);
  for (uint32_t i = 0; found && i < parts->n; i++) {
    unsigned long long now = id;
    if (i > 0 && dccl_cu.pointer_get_attribute(&now, CU_POINTER_ATTRIBUTE_BUFFER_ID, e->base + parts->part[i].at) !=
                     CUDA_SUCCESS)
      now = 0;
    found = now == parts->part[i].id;
  }
  return found;
}

/* Keeps a span's parts with those of its range seen before (a part replaces those it overlaps). */
static void span_keep(const struct dccl_peer_mem_export *e, const struct dccl_peer_mem_parts *parts) {
  pthread_mutex_lock(&exports_lock);
  caches_own();
  struct kept_span *ks = NULL;
  for (int k = 0; k < SPANS_KEPT && !ks; k++)
    if (spans_kept[k].start == e->base && spans_kept[k].size == e->bytes) ks = &spans_kept[k];
  if (!ks) {
    ks = &spans_kept[spans_next++ % SPANS_KEPT];
    *ks = (struct kept_span){.start = e->base, .size = e->bytes, .device = e->device};
  }
  for (uint32_t i = 0; i < parts->n; i++) {
    const struct dccl_peer_mem_part *p = &parts->part[i];
    for (uint32_t j = 0; j < ks->n;)
      if (ks->part[j].at < p->at + p->bytes && p->at < ks->part[j].at + ks->part[j].bytes)
        ks->part[j] = ks->part[--ks->n];
      else
        j++;
    if (ks->n == SPAN_PARTS_KEPT) ks->n = 0; /* full: start again from this span's parts */
    ks->part[ks->n++] = *p;
  }
  pthread_mutex_unlock(&exports_lock);
}

/* Found: `e` is the export of p's allocation. Else *id is p's buffer id (0 where the driver has none). */
static int export_cached(CUdeviceptr p, size_t bytes, struct dccl_peer_mem_export *e, unsigned long long *id_out) {
  unsigned long long id = 0;
  *id_out = 0;
  if (dccl_cu.pointer_get_attribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p) != CUDA_SUCCESS) return 0;
  *id_out = id;
  int hit = 0;
  pthread_mutex_lock(&exports_lock);
  caches_own();
  for (int i = 0; i < EXPORTS_CACHED && !hit; i++) {
    const struct dccl_peer_mem_export *c = &exports_cache[i];
    if ((hit = c->kind && c->id == id && p >= c->base && p + bytes <= c->base + c->bytes)) *e = *c;
  }
  pthread_mutex_unlock(&exports_lock);
  return hit;
}

static void export_keep(const struct dccl_peer_mem_export *e) {
  pthread_mutex_lock(&exports_lock);
  caches_own();
  exports_cache[exports_next++ % EXPORTS_CACHED] = *e;
  pthread_mutex_unlock(&exports_lock);
}

/* Quietly: 1 when the cuMem allocation at `base` may be exported as a POSIX file descriptor (its allowed handle
 * types: a pointer attribute, not a trial export, which costs 0.6-0.9 ms; docs/gpu.md). */
static int cumem_exportable(CUdeviceptr base) {
  unsigned long long types = 0; /* wide enough whatever width the driver writes */
  return dccl_cu.pointer_get_attribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, base) == CUDA_SUCCESS &&
         (types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
}

/* The range reserved (cuMemAddressReserve) around cuMem memory at `p`: 0 where the driver does not say. */
static int reserved_range(CUdeviceptr p, uint64_t *start, uint64_t *bytes) {
  unsigned long long s = 0, n = 0; /* wide enough whatever width the driver writes */
  if (dccl_cu.pointer_get_attribute(&s, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p) != CUDA_SUCCESS ||
      dccl_cu.pointer_get_attribute(&n, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p) != CUDA_SUCCESS || !n)
    return 0;
  *start = s, *bytes = n;
  return 1;
}

/* [p, +bytes) in the range reserved at [start, +size) for several cuMem allocations: 1 with the parts it lies in,
 * each a whole exportable allocation inside the range, without gaps. */
static int span_parts(CUdeviceptr p, size_t bytes, uint64_t start, uint64_t size, struct dccl_peer_mem_parts *parts) {
  parts->n = 0;
  for (CUdeviceptr at = p; at < p + bytes;) {
    CUdeviceptr base = 0;
    size_t n = 0;
    unsigned long long id = 0;
    if (parts->n == DCCL_PEER_MEM_MAX_PARTS || dccl_cu.mem_get_address_range(&base, &n, at) != CUDA_SUCCESS ||
        base > at || base < start || base + n > start + size ||
        dccl_cu.pointer_get_attribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, base) != CUDA_SUCCESS)
      return 0;
    CUmemGenericAllocationHandle h = cumem_at(base);
    if (!h || cumem_at(base + n - 1) != h || !cumem_exportable(base)) return 0;
    parts->part[parts->n++] = (struct dccl_peer_mem_part){base - start, n, id};
    at = base + n;
  }
  return parts->n > 0;
}

int dccl_peer_mem_describe(const void *ptr, size_t bytes, struct dccl_peer_mem_export *e,
                           struct dccl_peer_mem_parts *parts) {
  CUresult r = CUDA_SUCCESS;
  CUipcMemHandle h;
  CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
  if (dccl_cuda_api_load() != ncclSuccess) return 0;
  unsigned long long id;
  if (export_cached(p, bytes, e, &id) || (id && span_cached(p, bytes, id, e, parts))) return 1;
  int where = locate(p, bytes, id, e, &r);
  if (where != LOCATED && where != PAST_END) goto refused;
  CUmemGenericAllocationHandle first = cumem_at(e->base);
  uint64_t start = 0, size = 0;
  if (first && reserved_range(p, &start, &size) && size > e->bytes) {
    /* A range reserved for several allocations (expandable segments): the span, whichever part the buffer is in,
     * so every buffer of the range names the same mirror. */
    if (!parts || !span_parts(p, bytes, start, size, parts)) goto refused;
    *e = (struct dccl_peer_mem_export){.kind = DCCL_PEER_MEM_SPAN, .device = e->device, .base = start,
                                       .bytes = size, .id = size};
    span_keep(e, parts);
    return 1;
  }
  if (where == PAST_END) goto refused;
  if (first) {
    /* One file descriptor names one allocation: should the driver give a range of several as one, refuse it. */
    if (cumem_at(e->base + e->bytes - 1) != first || !cumem_exportable(e->base)) goto refused;
    e->kind = DCCL_PEER_MEM_FD;
  } else {
    if (dccl_cu.ipc_get_mem_handle(&h, e->base) != CUDA_SUCCESS) goto refused;
    memcpy(e->ipc, &h, sizeof(h));
    e->kind = DCCL_PEER_MEM_LEGACY;
  }
  export_keep(e);
  return 1;
refused:
  memset(e, 0, sizeof(*e));
  return 0;
}

/* The cuMem allocation at `base` as a new POSIX file descriptor (*fd; -1 on failure). */
static CUresult export_fd(CUdeviceptr base, int *fd) {
  CUmemGenericAllocationHandle h;
  *fd = -1;
  CUresult r = dccl_cu.mem_retain_allocation_handle(&h, (void *)(uintptr_t)base);
  if (r != CUDA_SUCCESS) return r;
  r = dccl_cu.mem_export_to_shareable_handle(fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  dccl_cu.mem_release(h);
  if (r != CUDA_SUCCESS) *fd = -1;
  return r;
}

ncclResult_t dccl_peer_mem_export(const void *ptr, size_t bytes, struct dccl_peer_mem_export *e, int *fd) {
  *fd = -1;
  memset(e, 0, sizeof(*e));
  DCCLCHECK(dccl_cuda_api_load());
  CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
  CUresult r = CUDA_SUCCESS;
  switch (locate(p, bytes, 0, e, &r)) {
    case NOT_DEVICE:
      return dccl_error(ncclInvalidUsage, "%p is not device memory: only device memory can be mapped for peers", ptr);
    case NO_RANGE:
      DCCL_CUCHECK(r, "cuMemGetAddressRange");
      break;
    case PAST_END:
      return dccl_error(ncclInvalidUsage, "[%p, +%zu) runs past its allocation (which ends at %p)", ptr, bytes,
                        (void *)(uintptr_t)(e->base + e->bytes));
    case NO_ID:
      DCCL_CUCHECK(r, "the allocation's buffer id");
      break;
    default:
      break;
  }
  CUdeviceptr base = e->base;
  size_t size = e->bytes;
  CUmemGenericAllocationHandle first = cumem_at(base);
  if (first) {
    /* One file descriptor names one allocation: should the driver give a reserved range's bounds, not the
     * allocation's, a range of several (expandable segments) is refused here. */
    if (cumem_at(base + size - 1) != first)
      return dccl_error(ncclInvalidUsage,
                        "%p lies in a range of several cuMem allocations, which one peer mapping cannot cover", ptr);
    int exported = -1;
    if ((r = export_fd(base, &exported)) != CUDA_SUCCESS)
      return dccl_error(ncclInvalidUsage,
                        "%p: its cuMem allocation cannot be exported as a file descriptor (%s), so processes cannot "
                        "share it (allocate with ncclMemAlloc, or a POSIX handle type)",
                        ptr, dccl_cuda_error_text(r));
    e->kind = DCCL_PEER_MEM_FD;
    *fd = exported;
    return ncclSuccess;
  }
  CUipcMemHandle h;
  r = dccl_cu.ipc_get_mem_handle(&h, base);
  if (r != CUDA_SUCCESS)
    return dccl_error(ncclInvalidUsage,
                      "%p: its allocation cannot be shared with other processes (%s): stream-ordered pools and managed "
                      "memory cannot; cudaMalloc and ncclMemAlloc memory can",
                      ptr, dccl_cuda_error_text(r));
  memcpy(e->ipc, &h, sizeof(h));
  e->kind = DCCL_PEER_MEM_LEGACY;
  return ncclSuccess;
}

/* Legacy handles opened in this process, each once per device: the driver refuses to open one allocation twice
 * (CUDA_ERROR_ALREADY_MAPPED), and a window and a buffer mapped on first use may name the same one. */
struct legacy_open {
  unsigned char ipc[64];
  int ordinal;
  uint64_t id; /* the allocation's buffer id: bytes alike for a new allocation at a freed one's place never match */
  CUdeviceptr base;
  int refs;
  struct legacy_open *next;
};
static pthread_mutex_t legacy_lock = PTHREAD_MUTEX_INITIALIZER;
static struct legacy_open *legacy_opens;

static ncclResult_t open_legacy(const struct dccl_peer_mem_export *e, int ordinal, CUdeviceptr *at) {
  pthread_mutex_lock(&legacy_lock);
  struct legacy_open *o = legacy_opens;
  while (o && (o->ordinal != ordinal || o->id != e->id || memcmp(o->ipc, e->ipc, sizeof(o->ipc)))) o = o->next;
  CUresult r = CUDA_SUCCESS;
  if (o) {
    o->refs++;
  } else if (!(o = calloc(1, sizeof(*o)))) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    CUipcMemHandle h;
    memcpy(&h, e->ipc, sizeof(h));
    r = dccl_cu.ipc_open_mem_handle(&o->base, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (r == CUDA_SUCCESS) {
      memcpy(o->ipc, e->ipc, sizeof(o->ipc));
      o->ordinal = ordinal;
      o->id = e->id;
      o->refs = 1;
      o->next = legacy_opens;
      legacy_opens = o;
    } else {
      free(o);
      o = NULL;
    }
  }
  if (o) *at = o->base;
  pthread_mutex_unlock(&legacy_lock);
  DCCL_CUCHECK(r, "cuIpcOpenMemHandle of a peer's allocation");
  return ncclSuccess;
}

static void close_legacy(CUdeviceptr base) {
  pthread_mutex_lock(&legacy_lock);
  for (struct legacy_open **link = &legacy_opens; *link; link = &(*link)->next) {
    struct legacy_open *o = *link;
    if (o->base != base) continue;
    if (--o->refs == 0) {
      dccl_cu.ipc_close_mem_handle(base);
      *link = o->next;
      free(o);
    }
    break;
  }
  pthread_mutex_unlock(&legacy_lock);
}

/* Imports the descriptor (closed here) and maps its allocation, `bytes` long, at `va` for device `ordinal`. */
static CUresult map_fd_at(CUdeviceptr va, size_t bytes, int fd, int ordinal) {
  CUmemGenericAllocationHandle h;
  CUresult r = dccl_cu.mem_import_from_shareable_handle(&h, (void *)(uintptr_t)fd,
                                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  close(fd);
  if (r != CUDA_SUCCESS) return r;
  r = dccl_cu.mem_map(va, bytes, 0, h, 0);
  if (r == CUDA_SUCCESS) {
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, ordinal}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    r = dccl_cu.mem_set_access(va, bytes, &access, 1);
    if (r != CUDA_SUCCESS) dccl_cu.mem_unmap(va, bytes);
  }
  dccl_cu.mem_release(h); /* the mapping keeps the memory */
  return r;
}

static ncclResult_t map_fd(const struct dccl_peer_mem_export *e, int fd, int ordinal, struct dccl_peer_mem_map *m) {
  CUdeviceptr va = 0;
  CUresult r = dccl_cu.mem_address_reserve(&va, e->bytes, 0, 0, 0);
  if (r != CUDA_SUCCESS) close(fd);
  else if ((r = map_fd_at(va, e->bytes, fd, ordinal)) != CUDA_SUCCESS) dccl_cu.mem_address_free(va, e->bytes);
  DCCL_CUCHECK(r, "mapping a peer's cuMem allocation");
  m->base = va;
  return ncclSuccess;
}

ncclResult_t dccl_peer_mem_export_part(uint64_t addr, uint64_t id, int *fd) {
  *fd = -1;
  DCCLCHECK(dccl_cuda_api_load());
  unsigned long long now = 0;
  if (dccl_cu.pointer_get_attribute(&now, CU_POINTER_ATTRIBUTE_BUFFER_ID, addr) != CUDA_SUCCESS || now != id)
    return dccl_error(ncclInvalidUsage, "%#llx: the allocation the call named is no longer there",
                      (unsigned long long)addr);
  DCCL_CUCHECK(export_fd(addr, fd), "exporting a part of a reserved range as a file descriptor");
  return ncclSuccess;
}

ncclResult_t dccl_peer_mem_mirror_reserve(uint64_t start, uint64_t bytes, uint64_t *local) {
  *local = 0;
  DCCLCHECK(dccl_cuda_api_load());
  CUdeviceptr va = 0;
  uint64_t align = start & (~start + 1); /* the lowest set bit: the owner's alignment */
  if (!align || align > (1ull << 30)) align = 1ull << 30;
  DCCL_CUCHECK(dccl_cu.mem_address_reserve(&va, bytes, align, 0, 0), "reserving the mirror of a peer's range");
  *local = va;
  return ncclSuccess;
}

ncclResult_t dccl_peer_mem_mirror_map(uint64_t local, const struct dccl_peer_mem_part *p, int fd, int ordinal) {
  ncclResult_t res = dccl_cuda_api_load();
  if (res != ncclSuccess) {
    if (fd >= 0) close(fd);
    return res;
  }
  if (fd < 0) return dccl_error(ncclInternalError, "a peer's part came without its file descriptor");
  DCCL_CUCHECK(map_fd_at(local + p->at, p->bytes, fd, ordinal), "mapping a part of a peer's range");
  return ncclSuccess;
}

void dccl_peer_mem_mirror_unmap(uint64_t local, const struct dccl_peer_mem_part *p) {
  dccl_cu.mem_unmap(local + p->at, p->bytes);
}

void dccl_peer_mem_mirror_free(uint64_t local, uint64_t bytes) {
  if (local) dccl_cu.mem_address_free(local, bytes);
}

ncclResult_t dccl_peer_mem_import(const struct dccl_peer_mem_export *e, int fd, int ordinal,
                                  struct dccl_peer_mem_map *m) {
  memset(m, 0, sizeof(*m));
  if (e->kind != DCCL_PEER_MEM_FD && fd >= 0) close(fd);
  ncclResult_t res = dccl_cuda_api_load();
  if (res != ncclSuccess) {
    if (e->kind == DCCL_PEER_MEM_FD && fd >= 0) close(fd);
    return res;
  }
  m->bytes = e->bytes;
  if (e->kind == DCCL_PEER_MEM_FD) {
    if (fd < 0) return dccl_error(ncclInternalError, "a peer's cuMem allocation came without its file descriptor");
    DCCLCHECK(map_fd(e, fd, ordinal, m));
  } else if (e->kind == DCCL_PEER_MEM_LEGACY) {
    CUdeviceptr at = 0;
    DCCLCHECK(open_legacy(e, ordinal, &at));
    m->base = at;
  } else {
    return dccl_error(ncclInternalError, "a peer's allocation of unknown kind %d", (int)e->kind);
  }
  m->kind = e->kind;
  return ncclSuccess;
}

void dccl_peer_mem_close(struct dccl_peer_mem_map *m) {
  if (!m->base) return;
  if (m->kind == DCCL_PEER_MEM_LEGACY) {
    close_legacy(m->base);
  } else if (m->kind == DCCL_PEER_MEM_FD) {
    dccl_cu.mem_unmap(m->base, m->bytes);
    dccl_cu.mem_address_free(m->base, m->bytes);
  }
  m->base = 0;
}
