/* A stand-in for NVIDIA's libcufile.so.0, built as that name in a folder of its own for gpu.file_load_cufile_reads:
 * the GPU machine's cuFile refuses its files (5027), so DCCL's reads through cuFile (src/storage/cufile.c and
 * file_load.c) could not run there end to end. Only the entry points DCCL calls, with the ABI DCCL declares:
 * cuFileRead preads into host memory and copies the bytes to the GPU on a stream of its own (a copy on the legacy
 * stream would wait for the caller's stream, which waits for the load). It stops a read at a 1 MiB boundary, as a
 * real driver may return less than asked, and prints its count of reads at exit, which the test looks for. */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "storage/cufile_abi.h"

static _Atomic long reads, bytes;

static void report(void) {
  if (atomic_load(&reads)) fprintf(stderr, "fake cuFile: %ld reads, %ld bytes\n", atomic_load(&reads), atomic_load(&bytes));
}

struct cufile_error cuFileDriverOpen(void) {
  atexit(report);
  return (struct cufile_error){0, 0};
}

struct cufile_error cuFileHandleRegister(void **handle, struct cufile_descr *descr) {
  int *fd = malloc(sizeof(int));
  if (!fd || descr->type != CUFILE_HANDLE_TYPE_OPAQUE_FD) {
    free(fd);
    return (struct cufile_error){5001, 0};
  }
  *fd = descr->handle.fd;
  *handle = fd;
  return (struct cufile_error){0, 0};
}

void cuFileHandleDeregister(void *handle) { free(handle); }

ssize_t cuFileRead(void *handle, void *base, size_t size, off_t file_offset, off_t base_offset) {
  static __thread cudaStream_t stream;
  static __thread char *host;
  const size_t most = 1 << 20;
  if (!stream && cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return -5011;
  if (!host && !(host = malloc(most))) return -5011;
  size_t want = most - (size_t)file_offset % most; /* up to the next 1 MiB boundary */
  if (want > size) want = size;
  ssize_t n = pread(*(int *)handle, host, want, file_offset);
  if (n <= 0) return n;
  if (cudaMemcpyAsync((char *)base + base_offset, host, (size_t)n, cudaMemcpyHostToDevice, stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess) {
    errno = EIO;
    return -1;
  }
  atomic_fetch_add(&reads, 1);
  atomic_fetch_add(&bytes, n);
  return n;
}
