/* The last error: kept per thread, and process-wide for ncclGetLastError(NULL) from another thread. */
#include "util/error.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ERROR_TEXT_MAX 1024

/* Guards the process-wide copy of the last error. */
static pthread_mutex_t error_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t error_once = PTHREAD_ONCE_INIT;

/* Held across fork(), so a child never inherits it locked by another thread. */
static void error_lock(void) {
  pthread_mutex_lock(&error_mutex);
}
static void error_unlock(void) {
  pthread_mutex_unlock(&error_mutex);
}
static void error_init_once(void) {
  pthread_atfork(error_lock, error_unlock, error_unlock);
}
static __thread char tls_error[ERROR_TEXT_MAX];
static __thread char tls_error_seen[ERROR_TEXT_MAX]; /* this thread's copy of the process-wide text */
static char process_error[ERROR_TEXT_MAX];

ncclResult_t dccl_error(ncclResult_t code, const char *fmt, ...) {
  int saved_errno = errno;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tls_error, sizeof tls_error, fmt, ap);
  va_end(ap);
  pthread_once(&error_once, error_init_once);
  pthread_mutex_lock(&error_mutex);
  memcpy(process_error, tls_error, sizeof process_error);
  pthread_mutex_unlock(&error_mutex);
  DCCL_WARN(DCCL_ALL, "%s", tls_error);
  errno = saved_errno;
  return code;
}

/* The process-wide text is copied out under the lock: another thread may overwrite it at any time. */
const char *dccl_last_error(void) {
  if (tls_error[0] != '\0') return tls_error;
  pthread_mutex_lock(&error_mutex);
  memcpy(tls_error_seen, process_error, sizeof tls_error_seen);
  pthread_mutex_unlock(&error_mutex);
  return tls_error_seen;
}

void dccl_clear_error(void) {
  tls_error[0] = '\0';
}
