/* Device buffers for the perf tools: where a GPU is present the collectives run on device memory (as the jobs the
 * tools stand for do), mirrored by the host buffers: inputs are written and results checked on the host copy,
 * which is moved across around every checked call (guards included). --host keeps everything in host memory. */
#include <mpi.h>
#include <stdio.h>

#include "common.h"

#ifdef PERF_HAVE_CUDA
#include <cuda_runtime.h>

static int cuda_ok(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 1;
  fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  MPI_Abort(MPI_COMM_WORLD, 2);
  return 0;
}

static void *device_alloc(size_t bytes, int memalloc, int device) {
  void *p = NULL;
  if (memalloc == PERF_ALLOC_SEGMENTS) {
    p = perf_segments_alloc(bytes, device);
  } else if (memalloc == PERF_ALLOC_CUDAMALLOC || memalloc == PERF_ALLOC_EXACT) {
    /* Whole 2 MiB pages by default, as PyTorch's caching allocator asks cudaMalloc for them: another process's
     * legacy IPC mapping of an allocation of any other size is read and written more slowly (docs/gpu.md). */
    size_t page = 2u << 20;
    cuda_ok(cudaMalloc(&p, memalloc == PERF_ALLOC_EXACT ? bytes : (bytes + page - 1) / page * page), "cudaMalloc");
  } else if (ncclMemAlloc(&p, bytes) != ncclSuccess) {
    fprintf(stderr, "ncclMemAlloc of %zu bytes: %s\n", bytes, ncclGetLastError(NULL));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return p;
}

int perf_mem_init(struct perf_mem *m, int want_device, int memalloc, size_t max_bytes) {
  m->on_device = 0;
  int ndev = 0;
  if (!want_device || cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) return 0;
  /* One GPU per rank of a host, round robin: several ranks share one when there are fewer GPUs. */
  MPI_Comm local;
  int local_rank = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_free(&local);
  m->device = local_rank % ndev;
  cuda_ok(cudaSetDevice(m->device), "cudaSetDevice");
  m->bytes = max_bytes + 2 * PERF_GUARD_BYTES;
  m->memalloc = memalloc;
  m->dev_send = device_alloc(m->bytes, memalloc, m->device);
  m->dev_recv = device_alloc(m->bytes, memalloc, m->device);
  m->on_device = 1;
  return 1;
}

void perf_mem_free(struct perf_mem *m) {
  if (!m->on_device) return;
  if (m->memalloc == PERF_ALLOC_SEGMENTS) {
    perf_segments_free(m->dev_send);
    perf_segments_free(m->dev_recv);
    return;
  }
  if (m->memalloc == PERF_ALLOC_MEMALLOC) {
    ncclMemFree(m->dev_send);
    ncclMemFree(m->dev_recv);
    return;
  }
  cudaFree(m->dev_send);
  cudaFree(m->dev_recv);
}

void perf_mem_upload(const struct perf_mem *m, const unsigned char *send_base, const unsigned char *recv_base) {
  if (!m->on_device) return;
  cuda_ok(cudaMemcpy(m->dev_send, send_base, m->bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
  cuda_ok(cudaMemcpy(m->dev_recv, recv_base, m->bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
}

void perf_mem_download(const struct perf_mem *m, unsigned char *send_base, unsigned char *recv_base) {
  if (!m->on_device) return;
  perf_mem_sync(m);
  cuda_ok(cudaMemcpy(send_base, m->dev_send, m->bytes, cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU");
  cuda_ok(cudaMemcpy(recv_base, m->dev_recv, m->bytes, cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU");
}

void perf_mem_sync(const struct perf_mem *m) {
  if (m->on_device) cuda_ok(cudaStreamSynchronize(NULL), "cudaStreamSynchronize");
}
#else
int perf_mem_init(struct perf_mem *m, int want_device, int memalloc, size_t max_bytes) {
  (void)want_device, (void)memalloc, (void)max_bytes;
  m->on_device = 0;
  return 0;
}
void perf_mem_free(struct perf_mem *m) { (void)m; }
void perf_mem_upload(const struct perf_mem *m, const unsigned char *s, const unsigned char *r) { (void)m, (void)s, (void)r; }
void perf_mem_download(const struct perf_mem *m, unsigned char *s, unsigned char *r) { (void)m, (void)s, (void)r; }
void perf_mem_sync(const struct perf_mem *m) { (void)m; }
#endif

void *perf_mem_ptr(const struct perf_mem *m, const unsigned char *host, const unsigned char *send_base,
                   const unsigned char *recv_base) {
  if (!m->on_device) return (void *)host;
  if (host >= send_base && host < send_base + m->bytes) return m->dev_send + (host - send_base);
  return m->dev_recv + (host - recv_base);
}
