/* CUDA_OK(call): a CUDA runtime call that must succeed, or the test program says where and exits 1. For C test
 * programs and .cu files alike. */
#ifndef DCCL_TEST_CUDA_OK_H_
#define DCCL_TEST_CUDA_OK_H_

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_OK(call)                                                                        \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      printf("FAIL: %s: %s (%s:%d)\n", #call, cudaGetErrorString(err_), __FILE__, __LINE__); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

#endif
