/* The last error: kept per thread, and process-wide for ncclGetLastError(NULL) from another thread. */
#include "util/error.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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
/* Each thread's texts live on the heap, reached through one pointer of TLS: the library is loaded by dlopen (as
 * Python loads PyTorch's modules, and libnccl.so.2 with them) and must fit the few hundred bytes of static TLS
 * glibc keeps for that. The key frees a thread's texts when it exits. */
struct error_texts {
  char error[ERROR_TEXT_MAX]; /* this thread's last error */
  char seen[ERROR_TEXT_MAX];  /* this thread's copy of the process-wide text */
};
static pthread_key_t texts_key;
static __thread struct error_texts *tls_texts;
static char process_error[ERROR_TEXT_MAX];

static void error_init_once(void) {
  pthread_atfork(error_lock, error_unlock, error_unlock);
  (void)pthread_key_create(&texts_key, free);
}

static struct error_texts *texts(void) {
  if (!tls_texts) {
    pthread_once(&error_once, error_init_once);
    tls_texts = calloc(1, sizeof(*tls_texts));
    if (tls_texts) (void)pthread_setspecific(texts_key, tls_texts);
  }
  return tls_texts;
}

ncclResult_t dccl_error(ncclResult_t code, const char *fmt, ...) {
  int saved_errno = errno;
  struct error_texts *t = texts();
  char spare[ERROR_TEXT_MAX];
  char *text = t ? t->error : spare;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, ERROR_TEXT_MAX, fmt, ap);
  va_end(ap);
  pthread_once(&error_once, error_init_once);
  pthread_mutex_lock(&error_mutex);
  memcpy(process_error, text, sizeof process_error);
  pthread_mutex_unlock(&error_mutex);
  DCCL_WARN(DCCL_ALL, "%s", text);
  errno = saved_errno;
  return code;
}

/* The process-wide text is copied out under the lock: another thread may overwrite it at any time. */
const char *dccl_last_error(void) {
  struct error_texts *t = texts();
  if (!t) return "out of memory (and the last error's text with it)";
  if (t->error[0] != '\0') return t->error;
  pthread_mutex_lock(&error_mutex);
  memcpy(t->seen, process_error, sizeof t->seen);
  pthread_mutex_unlock(&error_mutex);
  return t->seen;
}

void dccl_clear_error(void) {
  if (tls_texts) tls_texts->error[0] = '\0';
}
