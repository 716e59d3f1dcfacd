/* The small API calls that need no communicator state: version, result-code texts, the last error. */
#include "core/comm.h"
#include "core/comm_registry.h"
#include "util/error.h"

ncclResult_t ncclGetVersion(int *version) {
  if (version == NULL) return dccl_error(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled CUDA error: a CUDA call failed";
    case ncclSystemError:
      return "system error: a system call, socket or memory allocation failed";
    case ncclInternalError:
      return "internal error: DCCL reached a state it should not";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage: the call is not allowed in this state";
    case ncclRemoteError:
      return "remote error: a peer process failed or the network connection broke";
    case ncclInProgress:
      return "operation in progress";
    case ncclNumResults:
      break;
  }
  return "unknown result code";
}

/* Per-communicator asynchronous error text comes later; for now every communicator shares the thread's text. */
/* A failed communicator's own reason first (it may have been recorded by another thread, e.g. the monitor);
 * otherwise the last error of this thread, else of the process. */
const char *ncclGetLastError(ncclComm_t comm) {
  if (comm && dccl_comm_is_live(comm) && comm->abort_flag && comm->error_text[0]) return comm->error_text;
  return dccl_last_error();
}
