/* Whether a communicator's device collectives take the copy engines (collectives/device/ce_collectives.h), decided
 * at creation after the GPU sharing probe: DCCL_CE=1 asks for it, DCCL_CE=0 refuses it, and by default it is taken
 * where the probe found that the processes' kernels take turns on the GPU (no MPS; on the H200 it then beat the
 * kernels 3-11x, docs/performance.md). Possible for 2 to 8 ranks all on one GPU, each in a process of its own. All
 * ranks agree (one asking is enough) and take the smallest piece any asks for (DCCL_CE_CHUNK, lowered so the region
 * fits in what DCCL_DEV_MEM_LIMIT leaves after the device links), then each allocates its region, and every rank
 * maps the others'. */
#ifndef DCCL_CORE_COPY_ENGINE_SETUP_H_
#define DCCL_CORE_COPY_ENGINE_SETUP_H_

#include "core/comm.h"

ncclResult_t dccl_copy_engine_setup(struct dccl_comm *comm, int take_turns);

#endif
