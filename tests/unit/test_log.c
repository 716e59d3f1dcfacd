/* Logging (levels, subsystems, line format, debug file, reset) and the error API (dccl_error, ncclGetLastError,
 * ncclGetVersion, ncclGetErrorString). The log settings are read once per process, so every case runs in a fresh
 * child with its own environment. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "forked_case.h"
#include "util/error.h"
#include "util/params.h"

static void short_host_name(char *host, size_t size) {
  gethostname(host, size);
  host[size - 1] = '\0';
  char *dot = strchr(host, '.');
  if (dot != NULL) *dot = '\0';
}

/* The whole log of this process (DCCL_DEBUG_FILE=/tmp/dccl_test_log_%h_%p.log), then removes the file. */
static char *read_own_log(void) {
  char host[64], path[160];
  short_host_name(host, sizeof host);
  snprintf(path, sizeof path, "/tmp/dccl_test_log_%s_%d.log", host, (int)getpid());
  static char text[1 << 17];
  text[0] = '\0';
  FILE *file = fopen(path, "r");
  CHECK(file != NULL);
  if (file != NULL) {
    size_t n = fread(text, 1, sizeof text - 1, file);
    text[n] = '\0';
    fclose(file);
  }
  unlink(path);
  return text;
}
#define LOG_TO_OWN_FILE "DCCL_DEBUG_FILE=/tmp/dccl_test_log_%h_%p.log"

static void line_format(void) {
  char host[64], expected[256];
  short_host_name(host, sizeof host);
  dccl_log_set_rank(3);
  DCCL_WARN(DCCL_NET, "hello %d", 7);
  dccl_log_set_rank(-1);
  DCCL_INFO(DCCL_INIT, "no rank");
  DCCL_TRACE(DCCL_COLL, "too detailed");
  const char *log = read_own_log();
  snprintf(expected, sizeof expected, "%s:%d:r3 DCCL WARN [NET] hello 7\n", host, (int)getpid());
  CHECK(strstr(log, expected) == log); /* the first line */
  snprintf(expected, sizeof expected, "\n%s:%d DCCL INFO [INIT] no rank\n", host, (int)getpid());
  CHECK(strstr(log, expected) != NULL);
  CHECK(strstr(log, "too detailed") == NULL);
}

static void trace_names_the_source_line(void) {
  int line = __LINE__ + 1;
  DCCL_TRACE(DCCL_COLL, "step");
  char expected[64];
  snprintf(expected, sizeof expected, "DCCL TRACE [COLL] test_log.c:%d step\n", line);
  CHECK(strstr(read_own_log(), expected) != NULL);
}

static void long_message_is_truncated(void) {
  static char text[10000];
  memset(text, 'x', sizeof text - 1);
  DCCL_WARN(DCCL_INIT, "%s", text);
  DCCL_WARN(DCCL_INIT, "after");
  const char *log = read_own_log();
  const char *newline = strchr(log, '\n');
  CHECK(newline != NULL && newline - log < 4096 && newline[-1] == 'x');
  CHECK(newline != NULL && strstr(newline, "after\n") != NULL);
}

static void level_none(void) {
  CHECK(!dccl_log_enabled(DCCL_LOG_WARN, DCCL_ALL));
  CHECK(!dccl_log_enabled(DCCL_LOG_NONE, DCCL_ALL));
}

static void level_default_warn(void) {
  CHECK(dccl_log_enabled(DCCL_LOG_WARN, DCCL_INIT));
  CHECK(!dccl_log_enabled(DCCL_LOG_INFO, DCCL_INIT));
}

static void level_case_insensitive(void) {
  CHECK(dccl_log_enabled(DCCL_LOG_TRACE, DCCL_NET));
  CHECK(dccl_log_enabled(DCCL_LOG_INFO, DCCL_NET));
}

static void level_nccl_fallback(void) {
  CHECK(dccl_log_enabled(DCCL_LOG_INFO, DCCL_INIT));
  CHECK(!dccl_log_enabled(DCCL_LOG_TRACE, DCCL_INIT));
}

static void level_dccl_wins(void) {
  CHECK(dccl_log_enabled(DCCL_LOG_WARN, DCCL_INIT));
  CHECK(!dccl_log_enabled(DCCL_LOG_INFO, DCCL_INIT));
}

static void level_unknown_warns(void) {
  CHECK(dccl_log_enabled(DCCL_LOG_WARN, DCCL_INIT));
  CHECK(!dccl_log_enabled(DCCL_LOG_INFO, DCCL_INIT));
  CHECK(strstr(read_own_log(), "unknown debug level \"LOUD\"") != NULL);
}

static void subsys_list(void) {
  CHECK(dccl_log_enabled(DCCL_LOG_INFO, DCCL_INIT));
  CHECK(dccl_log_enabled(DCCL_LOG_INFO, DCCL_COLL));
  CHECK(!dccl_log_enabled(DCCL_LOG_INFO, DCCL_NET));
  CHECK(!dccl_log_enabled(DCCL_LOG_WARN, DCCL_SHM));
  CHECK(dccl_log_enabled(DCCL_LOG_WARN, DCCL_ALL));
}

static void subsys_negated(void) {
  CHECK(!dccl_log_enabled(DCCL_LOG_INFO, DCCL_NET));
  CHECK(!dccl_log_enabled(DCCL_LOG_INFO, DCCL_SHM));
  CHECK(dccl_log_enabled(DCCL_LOG_INFO, DCCL_INIT));
  CHECK(dccl_log_enabled(DCCL_LOG_INFO, DCCL_BOOTSTRAP));
}

static void subsys_nccl_fallback(void) {
  CHECK(dccl_log_enabled(DCCL_LOG_INFO, DCCL_NET));
  CHECK(!dccl_log_enabled(DCCL_LOG_INFO, DCCL_INIT));
}

static void reset_rereads_environment(void) {
  CHECK(!dccl_log_enabled(DCCL_LOG_WARN, DCCL_NET));
  setenv("DCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "NET", 1);
  ncclResetDebugInit();
  CHECK(dccl_log_enabled(DCCL_LOG_INFO, DCCL_NET));
  CHECK(!dccl_log_enabled(DCCL_LOG_INFO, DCCL_INIT));
  CHECK(!dccl_log_enabled(DCCL_LOG_TRACE, DCCL_NET));
}

static void *log_many_lines(void *arg) {
  dccl_log_set_rank((int)(intptr_t)arg);
  for (int i = 0; i < 200; i++) DCCL_INFO(DCCL_COLL, "line %d of a message long enough to notice a torn write", i);
  return NULL;
}

static void lines_do_not_interleave(void) {
  enum { THREADS = 4 };
  pthread_t threads[THREADS];
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&threads[i], NULL, log_many_lines, (void *)(intptr_t)i) == 0);
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  char *log = read_own_log();
  int lines = 0, whole = 0;
  for (char *save = NULL, *line = strtok_r(log, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
    lines++;
    int rank, number;
    char tail[64];
    const char *rest = strstr(line, ":r");
    whole += rest != NULL &&
             sscanf(rest, ":r%d DCCL INFO [COLL] line %d of a message long enough to notice a torn %63s", &rank,
                    &number, tail) == 3 &&
             strcmp(tail, "write") == 0;
  }
  CHECK(lines == THREADS * 200);
  CHECK(whole == THREADS * 200);
}

static void version(void) {
  int value = 0;
  CHECK(ncclGetVersion(&value) == ncclSuccess);
  CHECK(value == 22809);
  CHECK(value == NCCL_VERSION_CODE);
  CHECK(strcmp(ncclGetLastError(NULL), "") == 0);
  CHECK(ncclGetVersion(NULL) == ncclInvalidArgument);
  CHECK(strstr(ncclGetLastError(NULL), "NULL") != NULL);
}

static void error_strings(void) {
  const char *unknown = "unknown result code";
  for (int code = ncclSuccess; code < ncclNumResults; code++) {
    const char *text = ncclGetErrorString((ncclResult_t)code);
    CHECK(text != NULL && text[0] != '\0' && strcmp(text, unknown) != 0);
    for (int other = ncclSuccess; other < code; other++)
      CHECK(strcmp(text, ncclGetErrorString((ncclResult_t)other)) != 0);
  }
  CHECK(strcmp(ncclGetErrorString(ncclNumResults), unknown) == 0);
  CHECK(strcmp(ncclGetErrorString((ncclResult_t)-1), unknown) == 0);
  CHECK(strcmp(ncclGetErrorString((ncclResult_t)1000), unknown) == 0);
}

static void *error_in_other_thread(void *arg) {
  (void)arg;
  CHECK(strcmp(ncclGetLastError(NULL), "boom 42") == 0); /* the process-wide text */
  CHECK(dccl_error(ncclRemoteError, "thread %s", "failure") == ncclRemoteError);
  CHECK(strcmp(ncclGetLastError(NULL), "thread failure") == 0);
  return NULL;
}

static void last_error(void) {
  CHECK(strcmp(ncclGetLastError(NULL), "") == 0);
  errno = EAGAIN;
  CHECK(dccl_error(ncclSystemError, "boom %d", 42) == ncclSystemError);
  CHECK(errno == EAGAIN);
  CHECK(strcmp(ncclGetLastError(NULL), "boom 42") == 0);
  CHECK(strcmp(dccl_last_error(), "boom 42") == 0);
  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, error_in_other_thread, NULL) == 0);
  pthread_join(thread, NULL);
  CHECK(strcmp(ncclGetLastError(NULL), "boom 42") == 0); /* this thread's own text wins */
  dccl_clear_error();
  CHECK(strcmp(ncclGetLastError(NULL), "thread failure") == 0); /* then the process-wide one */
  static char long_text[5000];
  memset(long_text, 'y', sizeof long_text - 1);
  CHECK(dccl_error(ncclInternalError, "%s", long_text) == ncclInternalError);
  CHECK(strlen(ncclGetLastError(NULL)) > 100 && strlen(ncclGetLastError(NULL)) < sizeof long_text - 1);
  const char *log = read_own_log();
  CHECK(strstr(log, " DCCL WARN [ALL] boom 42\n") != NULL);
  CHECK(strstr(log, " DCCL WARN [ALL] thread failure\n") != NULL);
}

int main(void) {
  static const char *const info_env[] = {"DCCL_DEBUG=INFO", LOG_TO_OWN_FILE, NULL};
  static const char *const trace_env[] = {"DCCL_DEBUG=TRACE", LOG_TO_OWN_FILE, NULL};
  static const char *const warn_env[] = {LOG_TO_OWN_FILE, NULL};
  static const char *const none_env[] = {"DCCL_DEBUG=NONE", NULL};
  static const char *const mixed_case_env[] = {"DCCL_DEBUG=tRaCe", NULL};
  static const char *const nccl_level_env[] = {"NCCL_DEBUG=INFO", NULL};
  static const char *const both_level_env[] = {"DCCL_DEBUG=WARN", "NCCL_DEBUG=TRACE", NULL};
  static const char *const unknown_level_env[] = {"DCCL_DEBUG=LOUD", LOG_TO_OWN_FILE, NULL};
  static const char *const subsys_env[] = {"DCCL_DEBUG=INFO", "DCCL_DEBUG_SUBSYS=init, Coll", NULL};
  static const char *const negated_env[] = {"DCCL_DEBUG=INFO", "DCCL_DEBUG_SUBSYS=^NET,shm", NULL};
  static const char *const nccl_subsys_env[] = {"DCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=NET", NULL};

  int passed = 0, failed = 0;
#define RUN(body, env) (run_case(#body, body, env) ? passed++ : failed++)
  RUN(line_format, info_env);
  RUN(trace_names_the_source_line, trace_env);
  RUN(long_message_is_truncated, warn_env);
  RUN(level_none, none_env);
  RUN(level_default_warn, NULL);
  RUN(level_case_insensitive, mixed_case_env);
  RUN(level_nccl_fallback, nccl_level_env);
  RUN(level_dccl_wins, both_level_env);
  RUN(level_unknown_warns, unknown_level_env);
  RUN(subsys_list, subsys_env);
  RUN(subsys_negated, negated_env);
  RUN(subsys_nccl_fallback, nccl_subsys_env);
  RUN(reset_rereads_environment, none_env);
  RUN(lines_do_not_interleave, info_env);
  RUN(version, none_env);
  RUN(error_strings, NULL);
  RUN(last_error, warn_env);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
