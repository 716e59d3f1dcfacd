/* Ranks of different processes on one GPU run their kernels at once only under MPS; without it the GPU takes
 * turns between the processes' contexts, and every hand-off between them waits for a time slice. Creation
 * measures it where it matters (a GPU holding ranks of two processes): five 4-byte device all-reduces, timed, and a
 * slow one is logged at WARN with the figure, and *take_turns says so (then all-reduces take the copy engines:
 * core/copy_engine_setup.h). Every rank of the communicator runs it, or none. */
#ifndef DCCL_GPU_SHARING_PROBE_H_
#define DCCL_GPU_SHARING_PROBE_H_

#include "core/comm.h"

ncclResult_t dccl_gpu_sharing_probe(struct dccl_comm *comm, int *take_turns);

#endif
