/* A forked rank process's communicator on GPU 0 (the fault harness's children: tests/faults/fault_harness.h). */
#ifndef DCCL_TESTS_CUDA_GPU_RANK_H_
#define DCCL_TESTS_CUDA_GPU_RANK_H_

#include <cuda_runtime.h>
#include <stdio.h>

#include "dccl.h"

/* 0 with *comm made, or 3 (the children's exit code for a failed setup) after saying why. */
static inline int gpu_rank_comm(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  if (cudaSetDevice(0) != cudaSuccess) return 3;
  if (ncclCommInitRank(comm, nranks, id, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", rank, ncclGetLastError(NULL));
    return 3;
  }
  return 0;
}

#endif
