/* A communicator's streams kept in issue order (collectives/device/stream_order.h). */
#include "collectives/device/stream_order.h"

#include "util/error.h"

/* `stream` waits for what is queued on `last` now. */
static ncclResult_t wait_for(struct dccl_stream_order *o, CUstream last, CUstream stream) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = dccl_cu.stream_is_capturing(last, &st);
  if (r != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE)
    return dccl_error(ncclInvalidUsage,
                      "this communicator's kernels on stream %p still run, and that stream %s: this call on stream "
                      "%p cannot be ordered after them (synchronise the first stream, or order the two yourself)",
                      (void *)last, r != CUDA_SUCCESS ? "cannot be asked (destroyed?)" : "now captures a graph",
                      (void *)stream);
  DCCL_CUCHECK(dccl_cu.event_record(o->event, last), "cuEventRecord (after the communicator's last stream)");
  DCCL_CUCHECK(dccl_cu.stream_wait_event(stream, o->event, 0), "cuStreamWaitEvent (ordering its streams)");
  return ncclSuccess;
}

ncclResult_t dccl_stream_order(struct dccl_stream_order *o, CUstream stream, int captured, uint32_t running) {
  if (captured) return ncclSuccess;
  CUstream last = o->last;
  int switched = o->have_last && last != stream;
  if (switched && running > 0) DCCLCHECK(wait_for(o, last, stream));
  o->last = stream;
  o->have_last = 1;
  return ncclSuccess;
}
