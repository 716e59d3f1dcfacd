/* What this host-buffer build does on a machine with a GPU, through the driver it dlopens (src/util/cuda_driver.c):
 * - a call mixing a device buffer with a host buffer is refused with ncclInvalidUsage and a reason, and the
 *   communicator still works afterwards;
 * - a host-buffer collective issued on a stream waits for the GPU work queued on that stream before reading
 *   its input (the input is copied from the device by that work);
 * - with stream NULL it waits for the legacy default stream, where a kernel writes the input late;
 * - the same call while the stream is captured into a graph is refused;
 * - ncclMemAlloc gives usable GPU memory, ncclMemFree frees it and refuses other pointers;
 * - device memory can be exported as a dma-buf, which GPUDirect RDMA registration needs (transports/net_ib);
 * - a communicator's peer info names the rank's GPU (ordinal, UUID, PCI bus id), as CUDA IPC will need: InitAll's
 *   device, or the caller's current device at ncclCommInitRank, also when a group defers the creation.
 * Exit codes: 0 all passed, 1 a failure, 77 no usable GPU (cannot run, not a pass). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/comm.h"
#include "cuda_ok.h"
#include "dccl.h"
#include "late_writer.h"
#include "util/cuda_driver.h"

static int n_failed;

static void check(int ok, const char *what, const char *detail) {
  printf("%s: %s%s%s\n", ok ? "ok" : "FAIL", what, detail ? ": " : "", detail ? detail : "");
  if (!ok) n_failed++;
}

static void mixed_buffers_refused(ncclComm_t comm) {
  float *dev = NULL, host_out[1024];
  CUDA_OK(cudaMalloc((void **)&dev, 1024 * sizeof(float)));
  ncclResult_t r = ncclAllReduce(dev, host_out, 1024, ncclFloat32, ncclSum, comm, NULL);
  const char *why = ncclGetLastError(comm);
  check(r == ncclInvalidUsage && strstr(why, "one kind") != NULL, "a device buffer beside a host buffer is refused",
        why);
  float host[4] = {1, 2, 3, 4}, out[4] = {0};
  r = ncclAllReduce(host, out, 4, ncclFloat32, ncclSum, comm, NULL);
  check(r == ncclSuccess && out[3] == 4, "the communicator works after the refusal", NULL);
  CUDA_OK(cudaFree(dev));
}

/* The input reaches host memory only when the stream's queued copies finish: a large copy first keeps the stream
 * busy for milliseconds, so a collective that did not wait would read the old contents. */
static void waits_for_stream(ncclComm_t comm) {
  enum { N = 1 << 20 };
  size_t big = (size_t)512 << 20;
  float *in = NULL, *out = malloc(N * sizeof(float)), *dev = NULL, *want = malloc(N * sizeof(float));
  void *big_dev = NULL, *big_host = NULL;
  CUDA_OK(cudaMallocHost((void **)&in, N * sizeof(float)));
  CUDA_OK(cudaMallocHost(&big_host, big));
  CUDA_OK(cudaMalloc(&big_dev, big));
  CUDA_OK(cudaMalloc((void **)&dev, N * sizeof(float)));
  for (int i = 0; i < N; i++) want[i] = (float)(i % 1000) + 0.5f, in[i] = -1;
  CUDA_OK(cudaMemcpy(dev, want, N * sizeof(float), cudaMemcpyHostToDevice));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaMemcpyAsync(big_host, big_dev, big, cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaMemcpyAsync(in, dev, N * sizeof(float), cudaMemcpyDeviceToHost, s));
  ncclResult_t r = ncclAllReduce(in, out, N, ncclFloat32, ncclSum, comm, s);
  check(r == ncclSuccess && memcmp(out, want, N * sizeof(float)) == 0,
        "a host collective on a stream reads its input after the stream's copies",
        r == ncclSuccess ? NULL : ncclGetLastError(comm));

  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  r = ncclAllReduce(in, out, N, ncclFloat32, ncclSum, comm, s);
  const char *why = ncclGetLastError(comm);
  cudaGraph_t graph;
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  check(r == ncclInvalidUsage && strstr(why, "graph") != NULL, "a host collective under graph capture is refused", why);
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaFree(big_dev));
  CUDA_OK(cudaFreeHost(big_host));
  CUDA_OK(cudaFreeHost(in));
  free(out), free(want);
}

/* Stream NULL is the legacy default stream: a kernel there writes the input 50 ms late, so a call that did not
 * synchronise it would read the old contents. */
static void waits_for_null_stream(ncclComm_t comm) {
  enum { N = 1 << 20 };
  float *in = NULL, *out = malloc(N * sizeof(float));
  CUDA_OK(cudaMallocHost((void **)&in, N * sizeof(float)));
  for (int i = 0; i < N; i++) in[i] = -1, out[i] = 0;
  CUDA_OK(late_writer_launch(in, N, 0.5f, 50, NULL));
  ncclResult_t r = ncclAllReduce(in, out, N, ncclFloat32, ncclSum, comm, NULL);
  long wrong = 0;
  for (int i = 0; i < N; i++) wrong += out[i] != 0.5f + (float)(i % 1000);
  char detail[96];
  snprintf(detail, sizeof detail, "%ld of %d elements read before the kernel wrote them", wrong, N);
  check(r == ncclSuccess && wrong == 0, "a host collective on stream NULL waits for the legacy default stream",
        r == ncclSuccess ? detail : ncclGetLastError(comm));
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaFreeHost(in));
  free(out);
}

/* ncclMemAlloc gives device memory the GPU can write and read; ncclMemFree takes it back and refuses what it did
 * not allocate (a cudaMalloc pointer, an address inside an allocation). */
static void mem_alloc(ncclComm_t comm) {
  void *p = NULL, *other = NULL;
  size_t n = (1 << 20) + 3;
  ncclResult_t r = ncclMemAlloc(&p, n);
  check(r == ncclSuccess && p != NULL, "ncclMemAlloc of 1 MiB + 3 bytes", ncclGetLastError(comm));
  if (r != ncclSuccess) return;
  unsigned char *back = malloc(n);
  CUDA_OK(cudaMemset(p, 0x5a, n));
  CUDA_OK(cudaMemcpy(back, p, n, cudaMemcpyDeviceToHost));
  size_t wrong = 0;
  for (size_t i = 0; i < n; i++) wrong += back[i] != 0x5a;
  check(wrong == 0, "ncclMemAlloc's memory holds what the GPU wrote", NULL);
  free(back);
  CUDA_OK(cudaMalloc(&other, 4096));
  r = ncclMemFree(other);
  check(r == ncclInvalidArgument, "ncclMemFree refuses cudaMalloc memory", ncclGetLastError(comm));
  r = ncclMemFree((char *)p + 4096);
  check(r == ncclInvalidArgument, "ncclMemFree refuses an address inside an allocation", ncclGetLastError(comm));
  r = ncclMemFree(p);
  check(r == ncclSuccess, "ncclMemFree", ncclGetLastError(comm));
  CUDA_OK(cudaFree(other));
}

static void dmabuf_export(void) {
  check(dccl_cuda_dmabuf_supported(0), "device 0 can export memory as a dma-buf", NULL);
  size_t len = (size_t)4 << 20;
  void *dev = NULL;
  CUDA_OK(cudaMalloc(&dev, len + (64 << 10)));
  char *aligned = (char *)(((uintptr_t)dev + 65535) & ~(uintptr_t)65535);
  int fd = -1;
  ncclResult_t r = dccl_cuda_dmabuf_fd(aligned, len, &fd);
  check(r == ncclSuccess && fd >= 0, "4 MiB of cudaMalloc memory exported as a dma-buf fd",
        r == ncclSuccess ? NULL : ncclGetLastError(NULL));
  if (fd >= 0) close(fd);
  CUDA_OK(cudaFree(dev));
}

static void peer_info_names_the_gpu(ncclComm_t comm) {
  struct cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  char bus[32];
  snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
  const struct dccl_peer_info *me = &comm->peers[comm->rank];
  char detail[128];
  snprintf(detail, sizeof detail, "has_device %d, device %d, bus id '%s' (runtime says '%s')", me->has_device,
           me->cuda_device, me->pci_bus_id, bus);
  check(me->has_device && me->cuda_device == 0 && !memcmp(me->device_uuid, prop.uuid.bytes, 16) &&
            !strcasecmp(me->pci_bus_id, bus),
        "the peer info names the current GPU", detail);
  int dev = -2;
  check(ncclCommCuDevice(comm, &dev) == ncclSuccess && dev == 0, "ncclCommCuDevice names InitAll's device", NULL);
}

/* A creation deferred by a group runs at ncclGroupEnd on another thread: the device is the caller's at the call. */
static void group_init_captures_device(void) {
  ncclUniqueId id;
  ncclComm_t c = NULL;
  int dev = -2;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r == ncclSuccess) r = ncclGroupStart();
  if (r == ncclSuccess) r = ncclCommInitRank(&c, 1, id, 0);
  if (r == ncclSuccess) r = ncclGroupEnd();
  if (r == ncclSuccess) r = ncclCommCuDevice(c, &dev);
  check(r == ncclSuccess && dev == 0 && c->peers[0].has_device,
        "a communicator created inside a group is for the caller's current device",
        r == ncclSuccess ? NULL : ncclGetLastError(NULL));
  if (c) ncclCommDestroy(c);
}

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("no usable GPU: not run\n");
    return 77;
  }
  CUDA_OK(cudaSetDevice(0));
  check(dccl_cuda_available(), "DCCL loaded the CUDA driver", NULL);
  ncclComm_t comm;
  int dev0 = 0;
  if (ncclCommInitAll(&comm, 1, &dev0) != ncclSuccess) {
    printf("FAIL: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  peer_info_names_the_gpu(comm);
  group_init_captures_device();
  mixed_buffers_refused(comm);
  waits_for_stream(comm);
  waits_for_null_stream(comm);
  mem_alloc(comm);
  dmabuf_export();
  ncclCommDestroy(comm);
  printf("cuda_host_paths: %s\n", n_failed ? "FAILED" : "all passed");
  return n_failed ? 1 : 0;
}
