/* A communicator's device work runs in issue order whatever streams it comes on, as NCCL's does: its kernels share
 * the links, and each takes the CTA share of one kernel per rank (cta_share.h). So an uncaptured launch on another
 * stream than the last one's first waits for that stream, when any of the communicator's CTAs may still run: an
 * event recorded there, waited for here. Nothing is added while the stream stays the same. Captured launches are
 * left out: a graph's kernels run at its replays, which the caller orders. */
#ifndef DCCL_STREAM_ORDER_H_
#define DCCL_STREAM_ORDER_H_

#include <stdint.h>

#include "util/cuda_api.h"

struct dccl_stream_order {
  CUstream last; /* the stream of the last uncaptured launch */
  int have_last;
  CUevent event; /* recorded on `last` when a launch comes on another stream */
};

/* Before a launch on `stream` (`captured`: it is being captured; `running`: the communicator's launched CTAs not
 * seen exiting yet). ncclInvalidUsage when the last stream, with kernels still on it, cannot take an event (it was
 * destroyed, or captures a graph now). */
ncclResult_t dccl_stream_order(struct dccl_stream_order *o, CUstream stream, int captured, uint32_t running);

#endif
