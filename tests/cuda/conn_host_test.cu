// FIFOs between a kernel and a host thread, in pinned host memory laid out by pure/conn_desc.h (a counter lives
// where its poller reads it cheapest among the memory its writer can store to: with no GDRCopy the host cannot
// store to device memory, so head, tail and slots all lie in pinned host memory). The host end is the library's
// own dccl_conn code (conn_host_side.c); the kernel end is conn_device.cuh.
//   1. 10^6 slots each way, each protocol, over CONN_STREAM_FIFOS FIFOs (one CTA each), every byte checked at the
//      receiver; the rate of payload bytes.
//   2. Ping-pong of one 8-byte slot, kernel -> host -> kernel, each protocol: the round trip.
// Exit codes: 0 all passed, 1 a failure, 77 no usable GPU (cannot run, not a pass).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "conn_device.cuh"
#include "cuda_ok.h"
#include "conn_host_side.h"

#define CONN_STREAM_FIFOS 4
#define CONN_STREAM_SLOTS 1000000ull  // in all, split over the FIFOs
#define CONN_PING_ROUNDS 20000ull
#define CONN_PING_WARM 1000ull

static int n_failed;

static const char *proto_name(int proto) { return proto == DCCL_PROTO_LL ? "LL" : "bulk"; }

// FIFOs in pinned host memory, each one region (the kernel sees the same addresses: unified addressing).
struct host_fifos {
  conn_host_link host[CONN_STREAM_FIFOS];
  dev_link *dev;  // device copy of the kernel's view
};

static void fifos_make(host_fifos *f, int nfifo, uint32_t slot_bytes) {
  dev_link dl[CONN_STREAM_FIFOS];
  for (int i = 0; i < nfifo; i++) {
    conn_host_link *h = &f->host[i];
    uint64_t bytes = dccl_conn_desc_layout(&h->desc, CONN_NSLOTS, slot_bytes, DCCL_LL_MAX_BYTES, DCCL_REGION_RECV);
    void *mem = nullptr;
    CUDA_OK(cudaHostAlloc(&mem, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    h->regions[DCCL_REGION_RECV] = h->regions[DCCL_REGION_SEND] = mem;
    void *dmem = nullptr;
    CUDA_OK(cudaHostGetDevicePointer(&dmem, mem, 0));
    dl[i].desc = h->desc;
    dl[i].regions[DCCL_REGION_RECV] = dl[i].regions[DCCL_REGION_SEND] = (char *)dmem;
  }
  CUDA_OK(cudaMalloc(&f->dev, sizeof(dl)));
  CUDA_OK(cudaMemcpy(f->dev, dl, sizeof(dl), cudaMemcpyHostToDevice));
}

static void fifos_free(host_fifos *f, int nfifo) {
  for (int i = 0; i < nfifo; i++) cudaFreeHost(f->host[i].regions[DCCL_REGION_RECV]);
  cudaFree(f->dev);
}

static dev_result *result_new() {
  dev_result *r = nullptr, init = {0, 0, ~0ull, 0};
  CUDA_OK(cudaMalloc(&r, sizeof(*r)));
  CUDA_OK(cudaMemcpy(r, &init, sizeof(init), cudaMemcpyHostToDevice));
  return r;
}

static dev_result result_take(dev_result *r) {
  dev_result h;
  CUDA_OK(cudaMemcpy(&h, r, sizeof(h), cudaMemcpyDeviceToHost));
  cudaFree(r);
  return h;
}

static double wall_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// 10^6 slots kernel -> host (to_host) or host -> kernel, under proto.
static void stream(int to_host, int proto) {
  uint32_t bytes = proto == DCCL_PROTO_LL ? CONN_LL_BYTES : CONN_BULK_BYTES;
  uint64_t per_fifo = CONN_STREAM_SLOTS / CONN_STREAM_FIFOS;
  host_fifos f;
  fifos_make(&f, CONN_STREAM_FIFOS, CONN_BULK_BYTES);
  for (int i = 0; i < CONN_STREAM_FIFOS; i++) conn_host_fifo_init(&f.host[i]);
  dev_result *res = result_new();
  double t0 = wall_s();
  k_stream<<<CONN_STREAM_FIFOS, CONN_THREADS>>>(f.dev, to_host, per_fifo, bytes, proto, res);
  CUDA_OK(cudaGetLastError());
  long host_bad = to_host ? conn_host_recv(f.host, CONN_STREAM_FIFOS, per_fifo, bytes, proto, 30)
                          : conn_host_send(f.host, CONN_STREAM_FIFOS, per_fifo, bytes, proto, 30);
  CUDA_OK(cudaDeviceSynchronize());
  double dt = wall_s() - t0;
  dev_result r = result_take(res);
  uint64_t slots = per_fifo * CONN_STREAM_FIFOS;
  int ok = host_bad == 0 && r.errors == 0 && !r.aborted;
  printf("%s: %s %s: %llu slots of %u B over %d FIFOs (CTAs of %d threads), every byte checked: %.2f s, %.2f GB/s "
         "of payload, %.2f us per slot per FIFO (host wrong %ld, device wrong %llu%s)\n",
         ok ? "ok" : "FAIL", to_host ? "kernel -> host" : "host -> kernel", proto_name(proto),
         (unsigned long long)slots, bytes, CONN_STREAM_FIFOS, CONN_THREADS, dt, (double)slots * bytes / dt / 1e9,
         dt / (double)per_fifo * 1e6, host_bad, r.errors, r.aborted ? ", a kernel spin gave up" : "");
  n_failed += !ok;
  fifos_free(&f, CONN_STREAM_FIFOS);
}

// Kernel sends 8 B, the host echoes it: the round trip as the kernel sees it.
static void pingpong(int proto) {
  host_fifos out, in;  // out: kernel -> host; in: host -> kernel
  fifos_make(&out, 1, CONN_BULK_BYTES);
  fifos_make(&in, 1, CONN_BULK_BYTES);
  conn_host_fifo_init(&out.host[0]);
  conn_host_fifo_init(&in.host[0]);
  dev_result *res = result_new();
  k_pingpong<<<1, CONN_THREADS>>>(out.dev, in.dev, 1, CONN_PING_ROUNDS, CONN_PING_WARM, 8, proto, res);
  CUDA_OK(cudaGetLastError());
  long host_bad = conn_host_echo(&out.host[0], &in.host[0], CONN_PING_ROUNDS, 8, proto, 30);
  CUDA_OK(cudaDeviceSynchronize());
  dev_result r = result_take(res);
  int ok = host_bad == 0 && r.errors == 0 && !r.aborted;
  double us = (double)(r.t1_ns - r.t0_ns) / 1e3 / (double)(CONN_PING_ROUNDS - CONN_PING_WARM);
  printf("%s: ping-pong kernel -> host -> kernel, %s, 8 B: %.2f us per round trip (%llu timed of %llu; host wrong "
         "%ld, device wrong %llu%s)\n",
         ok ? "ok" : "FAIL", proto_name(proto), us, CONN_PING_ROUNDS - CONN_PING_WARM, CONN_PING_ROUNDS, host_bad,
         r.errors, r.aborted ? ", a kernel spin gave up" : "");
  n_failed += !ok;
  fifos_free(&out, 1);
  fifos_free(&in, 1);
}

int main() {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("no usable GPU\n");
    return 77;
  }
  for (int proto = DCCL_PROTO_BULK; proto <= DCCL_PROTO_LL; proto++) pingpong(proto);
  for (int to_host = 1; to_host >= 0; to_host--)
    for (int proto = DCCL_PROTO_BULK; proto <= DCCL_PROTO_LL; proto++) stream(to_host, proto);
  printf("conn_host_test: %s\n", n_failed ? "FAILED" : "all passed");
  return n_failed ? 1 : 0;
}
