/* Page cache residency of a file range (storage/page_cache.h). */
#include "storage/page_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#define WINDOW 1024 /* pages per mincore call */

void dccl_page_cache_view_open(struct dccl_page_cache_view *v, int fd, size_t offset, size_t bytes) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  v->map = NULL;
  v->base = offset / page * page;
  v->map_len = offset + bytes - v->base;
  if (bytes == 0) return;
  void *m = mmap(NULL, v->map_len, PROT_READ, MAP_SHARED, fd, (off_t)v->base);
  if (m != MAP_FAILED) v->map = m;
}

void dccl_page_cache_view_close(struct dccl_page_cache_view *v) {
  if (v->map) munmap(v->map, v->map_len);
  v->map = NULL;
}

int dccl_page_cache_mostly_cached(const struct dccl_page_cache_view *v, size_t first, size_t last) {
  if (!v->map || first >= last || first < v->base || last > v->base + v->map_len) return 0;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t from = (first - v->base) / page, upto = (last - v->base + page - 1) / page, cached = 0;
  unsigned char vec[WINDOW];
  for (size_t p = from; p < upto; p += WINDOW) {
    size_t n = upto - p < WINDOW ? upto - p : WINDOW;
    if (mincore((char *)v->map + p * page, n * page, vec) != 0) return 0;
    for (size_t i = 0; i < n; i++) cached += vec[i] & 1;
  }
  return 2 * cached >= upto - from;
}
