/* GPU mirrors of coll_suite's buffers (suite_device.h), through the CUDA runtime. */
#include "suite_device.h"

#include <stdio.h>

#ifdef DCCL_TEST_HAVE_CUDART
#include <cuda_runtime.h>

static int cuda_ok(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 1;
  fprintf(stderr, "coll_suite --device: %s: %s\n", what, cudaGetErrorString(e));
  return 0;
}

int suite_device_select(int rank) {
  int n = 0;
  if (!cuda_ok(cudaGetDeviceCount(&n), "cudaGetDeviceCount")) return -1;
  if (n < 1) {
    fprintf(stderr, "coll_suite --device: no GPU\n");
    return -1;
  }
  return cuda_ok(cudaSetDevice(rank % n), "cudaSetDevice") ? 0 : -1;
}

unsigned char *suite_device_mirror(const struct tc_buffer *b) {
  void *d = NULL;
  size_t span = b->bytes + 2 * TC_GUARD_BYTES;
  if (!cuda_ok(cudaMalloc(&d, span), "cudaMalloc")) return NULL;
  if (!cuda_ok(cudaMemcpy(d, b->data - TC_GUARD_BYTES, span, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU")) {
    cudaFree(d);
    return NULL;
  }
  return (unsigned char *)d + TC_GUARD_BYTES;
}

int suite_device_copy_back(struct tc_buffer *b, const unsigned char *mirror) {
  /* The calls ran on the legacy stream: a device-wide synchronisation waits for them. */
  if (!cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize")) return -1;
  size_t span = b->bytes + 2 * TC_GUARD_BYTES;
  return cuda_ok(cudaMemcpy(b->data - TC_GUARD_BYTES, mirror - TC_GUARD_BYTES, span, cudaMemcpyDeviceToHost),
                 "cudaMemcpy from the GPU")
             ? 0
             : -1;
}

void suite_device_free(unsigned char *mirror) {
  if (mirror) cudaFree(mirror - TC_GUARD_BYTES);
}
#else
int suite_device_select(int rank) {
  (void)rank;
  fprintf(stderr, "coll_suite --device: built without the CUDA runtime\n");
  return -1;
}
unsigned char *suite_device_mirror(const struct tc_buffer *b) {
  (void)b;
  return NULL;
}
int suite_device_copy_back(struct tc_buffer *b, const unsigned char *mirror) {
  (void)b, (void)mirror;
  return -1;
}
void suite_device_free(unsigned char *mirror) {
  (void)mirror;
}
#endif
