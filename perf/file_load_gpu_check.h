/* What the GPU file-load perf tools (file_load_gpu_perf, page_cache_dma_perf) share: whether the bytes a load left
 * in GPU memory are the file's. */
#ifndef DCCL_PERF_FILE_LOAD_GPU_CHECK_H_
#define DCCL_PERF_FILE_LOAD_GPU_CHECK_H_

#include <cuda_runtime.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The first `bytes` of `path` against `dev`'s. */
static int gpu_matches_file(const char *path, size_t bytes, const char *dev) {
  char *host = malloc(bytes), *file = malloc(bytes);
  int fd = open(path, O_RDONLY), ok = host && file && fd >= 0;
  for (size_t done = 0; ok && done < bytes;) {
    ssize_t n = pread(fd, file + done, bytes - done, (off_t)done);
    ok = n > 0;
    done += n > 0 ? (size_t)n : 0;
  }
  ok = ok && cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost) == cudaSuccess && !memcmp(host, file, bytes);
  if (fd >= 0) close(fd);
  free(host);
  free(file);
  return ok;
}

#endif
