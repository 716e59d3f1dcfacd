/* The last-error text and the result-checking macros every internal call uses. */
#ifndef DCCL_UTIL_ERROR_H_
#define DCCL_UTIL_ERROR_H_

#include "dccl.h"
#include "util/log.h"

/* Records `fmt` as the last error (readable through ncclGetLastError), logs it at WARN and returns `code`.
 * The text is kept per thread and, for ncclGetLastError(NULL) from another thread, process-wide too. */
ncclResult_t dccl_error(ncclResult_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text dccl_error last recorded in this thread, else process-wide; "" if none. */
const char *dccl_last_error(void);
void dccl_clear_error(void);

/* Propagates a failure, logging where it passed (TRACE). */
#define DCCLCHECK(call)                                             \
  do {                                                              \
    ncclResult_t dccl_res_ = (call);                                \
    if (dccl_res_ != ncclSuccess) {                                 \
      DCCL_TRACE(DCCL_ALL, "%s failed: %d", #call, (int)dccl_res_); \
      return dccl_res_;                                             \
    }                                                               \
  } while (0)
#define DCCLCHECKGOTO(call, res, label)                         \
  do {                                                          \
    (res) = (call);                                             \
    if ((res) != ncclSuccess) {                                 \
      DCCL_TRACE(DCCL_ALL, "%s failed: %d", #call, (int)(res)); \
      goto label;                                               \
    }                                                           \
  } while (0)

#endif
