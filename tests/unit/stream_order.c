/* One communicator's launches kept in issue order across streams (collectives/device/stream_order.c), against a
 * fake driver that records its calls. Checked: launches on one stream add no driver call; a launch on another
 * stream while CTAs run records the event on the last stream and makes the new one wait for it; a switch with
 * nothing running adds nothing; captured launches add nothing and leave the last stream as it was; a last stream
 * that now captures, or that the driver no longer knows, refuses the call (ncclInvalidUsage, naming it), adding no
 * wait and keeping the last stream; a failing cuEventRecord is the call's error. */
#include <stdio.h>
#include <string.h>

#include "collectives/device/stream_order.h"
#include "util/error.h"
#include "unit_check.h"

static CUstream recorded_on, waited_on;
static CUevent waited_for;
static int records, waits;
static CUstream capturing_stream, unknown_stream;
static CUresult record_result = CUDA_SUCCESS;

static CUresult fake_is_capturing(CUstream s, CUstreamCaptureStatus *st) {
  if (s == unknown_stream) return CUDA_ERROR_INVALID_HANDLE;
  *st = s == capturing_stream ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
static CUresult fake_record(CUevent e, CUstream s) {
  (void)e;
  records++;
  recorded_on = s;
  return record_result;
}
static CUresult fake_wait(CUstream s, CUevent e, unsigned flags) {
  (void)flags;
  waits++;
  waited_on = s;
  waited_for = e;
  return CUDA_SUCCESS;
}
struct dccl_cuda_api dccl_cu = {.stream_is_capturing = fake_is_capturing, .event_record = fake_record,
                                .stream_wait_event = fake_wait};
const char *dccl_cuda_error_text(CUresult r) { return r == CUDA_SUCCESS ? "no error" : "a fake error"; }

#define S(n) ((CUstream)(uintptr_t)(0x1000 * (n)))

static void reset(void) { records = waits = 0, recorded_on = waited_on = NULL, waited_for = NULL; }

int main(void) {
  struct dccl_stream_order o;
  memset(&o, 0, sizeof(o));
  o.event = (CUevent)(uintptr_t)0xe0;

  check(dccl_stream_order(&o, S(1), 0, 0) == ncclSuccess && records + waits == 0, "first launch: nothing added");
  check(dccl_stream_order(&o, S(1), 0, 64) == ncclSuccess && records + waits == 0,
        "the same stream with CTAs running: nothing added");

  reset();
  check(dccl_stream_order(&o, S(2), 0, 64) == ncclSuccess, "switch while running");
  check(records == 1 && recorded_on == S(1) && waits == 1 && waited_on == S(2) && waited_for == o.event,
        "switch while running: event recorded on the last stream (%d on %p), waited for on the new (%d on %p)",
        records, (void *)recorded_on, waits, (void *)waited_on);

  reset();
  check(dccl_stream_order(&o, S(1), 0, 0) == ncclSuccess && records + waits == 0,
        "switch with nothing running: nothing added");

  reset();
  check(dccl_stream_order(&o, S(3), 1, 64) == ncclSuccess && records + waits == 0, "captured launch: nothing added");
  check(o.last == S(1), "a captured launch leaves the last stream as it was");
  check(dccl_stream_order(&o, S(1), 0, 64) == ncclSuccess && records + waits == 0,
        "back on the last uncaptured stream: nothing added");

  reset();
  capturing_stream = S(1);
  ncclResult_t r = dccl_stream_order(&o, S(4), 0, 64);
  check(r == ncclInvalidUsage && strstr(dccl_last_error(), "now captures a graph") && waits == 0,
        "last stream capturing now: refused (%d, '%s'), no wait added", (int)r, dccl_last_error());
  check(o.last == S(1), "a refused call leaves the last stream as it was");
  capturing_stream = NULL;

  reset();
  unknown_stream = S(1);
  r = dccl_stream_order(&o, S(5), 0, 64);
  check(r == ncclInvalidUsage && strstr(dccl_last_error(), "destroyed") && waits == 0,
        "last stream unknown to the driver: refused (%d, '%s')", (int)r, dccl_last_error());

  unknown_stream = NULL;
  check(dccl_stream_order(&o, S(5), 0, 64) == ncclSuccess && records == 1 && recorded_on == S(1) && waits == 1,
        "the same switch once the last stream answers: ordered");

  reset();
  record_result = CUDA_ERROR_LAUNCH_FAILED;
  r = dccl_stream_order(&o, S(6), 0, 64);
  check(r == ncclUnhandledCudaError && strstr(dccl_last_error(), "cuEventRecord") && waits == 0,
        "cuEventRecord failing: the call's error (%d, '%s')", (int)r, dccl_last_error());
  record_result = CUDA_SUCCESS;

  printf("stream_order: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
