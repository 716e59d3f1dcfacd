/* How much of a file's byte range sits in the page cache, so a load can read the rest with O_DIRECT (the disk's
 * blocks straight into its staging buffers) and the cached part with pread (a copy from memory). mincore on a
 * read-only mapping of the file that nothing ever touches: a file that shrinks meanwhile cannot raise SIGBUS. */
#ifndef DCCL_STORAGE_PAGE_CACHE_H_
#define DCCL_STORAGE_PAGE_CACHE_H_

#include <stddef.h>

struct dccl_page_cache_view {
  void *map;      /* NULL: no view (the range is then taken as not cached) */
  size_t map_len;
  size_t base;    /* the file offset the mapping starts at (page-aligned) */
};

/* Maps [offset, offset + bytes) of the file for mincore; on failure the view says nothing is cached. */
void dccl_page_cache_view_open(struct dccl_page_cache_view *v, int fd, size_t offset, size_t bytes);
void dccl_page_cache_view_close(struct dccl_page_cache_view *v);
/* 1 when at least half of the pages holding file bytes [first, last) are in the page cache. */
int dccl_page_cache_mostly_cached(const struct dccl_page_cache_view *v, size_t first, size_t last);

#endif
