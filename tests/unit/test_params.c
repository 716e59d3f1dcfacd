/* Parameters: DCCL_ over NCCL_ over the default, integer suffixes, garbage, read-once, the report at INFO.
 * Parameters are read once per process, so every case runs in a fresh child with its own environment. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "forked_case.h"
#include "util/log.h"
#include "util/params.h"

/* The whole log file of this process (DCCL_DEBUG_FILE=/tmp/dccl_test_params_%p.log), then removes it. */
static char *read_own_log(void) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/dccl_test_params_%d.log", (int)getpid());
  static char text[1 << 16];
  text[0] = '\0';
  FILE *file = fopen(path, "r");
  if (file != NULL) {
    size_t n = fread(text, 1, sizeof text - 1, file);
    text[n] = '\0';
    fclose(file);
  }
  unlink(path);
  return text;
}
#define LOG_TO_OWN_FILE "DCCL_DEBUG_FILE=/tmp/dccl_test_params_%p.log"

static void defaults(void) {
  CHECK(dccl_param_int(DCCL_PARAM_NSLOTS) == 8);
  CHECK(dccl_param_int(DCCL_PARAM_CHUNK_SIZE) == 262144);
  CHECK(strcmp(dccl_param_str(DCCL_PARAM_TRANSPORT), "") == 0);
  CHECK(strcmp(dccl_param_str(DCCL_PARAM_DEBUG), "WARN") == 0);
  CHECK(strcmp(dccl_param_str(DCCL_PARAM_NSLOTS), "8") == 0);
}

static void dccl_values(void) {
  CHECK(dccl_param_int(DCCL_PARAM_NSLOTS) == 16);
  CHECK(strcmp(dccl_param_str(DCCL_PARAM_TRANSPORT), "shm") == 0);
}

static void nccl_fallback(void) {
  CHECK(dccl_param_int(DCCL_PARAM_NSLOTS) == 4);
  CHECK(strcmp(dccl_param_str(DCCL_PARAM_ALGO), "tree") == 0);
}

static void dccl_wins(void) {
  CHECK(dccl_param_int(DCCL_PARAM_NSLOTS) == 16);
  CHECK(strcmp(dccl_param_str(DCCL_PARAM_ALGO), "ring") == 0);
}

static void empty_is_unset(void) {
  CHECK(dccl_param_int(DCCL_PARAM_NSLOTS) == 4);          /* DCCL_ empty: NCCL_ used */
  CHECK(dccl_param_int(DCCL_PARAM_CHUNK_SIZE) == 262144); /* both empty: default */
}

static void suffixes(void) {
  CHECK(dccl_param_int(DCCL_PARAM_CHUNK_SIZE) == 1 << 20);
  CHECK(dccl_param_int(DCCL_PARAM_SPIN_NS) == 64 << 10);
  CHECK(dccl_param_int(DCCL_PARAM_YIELD_NS) == (int64_t)2 << 30);
  CHECK(dccl_param_int(DCCL_PARAM_TIMEOUT) == -5);
  CHECK(dccl_param_int(DCCL_PARAM_BOOTSTRAP_TIMEOUT) == 7);
  CHECK(dccl_param_int(DCCL_PARAM_NSLOTS) == 3 << 10);
}

static void garbage_uses_default(void) {
  CHECK(dccl_param_int(DCCL_PARAM_CHUNK_SIZE) == 262144);
  CHECK(dccl_param_int(DCCL_PARAM_NSLOTS) == 8);
  CHECK(dccl_param_int(DCCL_PARAM_SPIN_NS) == 20000);
  CHECK(dccl_param_int(DCCL_PARAM_YIELD_NS) == 200000);
  CHECK(dccl_param_int(DCCL_PARAM_TIMEOUT) == 0);
  CHECK(dccl_param_int(DCCL_PARAM_NCHANNELS) == 1);
  const char *log = read_own_log();
  CHECK(strstr(log, "DCCL WARN [ENV] DCCL_CHUNK_SIZE=\"12abc\" is not an integer") != NULL);
  CHECK(strstr(log, "NCCL_YIELD_NS=\"99999999999G\"") != NULL);
}

static void read_once(void) {
  CHECK(dccl_param_int(DCCL_PARAM_NSLOTS) == 16);
  setenv("DCCL_NSLOTS", "32", 1);
  CHECK(dccl_param_int(DCCL_PARAM_NSLOTS) == 16);
}

static void report_when_params_first(void) {
  CHECK(dccl_param_int(DCCL_PARAM_NSLOTS) == 16);
  const char *log = read_own_log();
  CHECK(strstr(log, "DCCL INFO [ENV] DCCL_NSLOTS set by environment to 16\n") != NULL);
  CHECK(strstr(log, "DCCL_DEBUG set by environment to INFO") != NULL);
  CHECK(strstr(log, "CHUNK_SIZE") == NULL); /* not set: not reported */
}

static void report_when_log_first(void) {
  DCCL_INFO(DCCL_ENV, "first line");
  CHECK(dccl_param_int(DCCL_PARAM_NSLOTS) == 16);
  const char *log = read_own_log();
  CHECK(strstr(log, "first line") != NULL);
  CHECK(strstr(log, "DCCL_NSLOTS set by environment to 16") != NULL);
}

static void *read_nslots(void *arg) {
  *(int64_t *)arg = dccl_param_int(DCCL_PARAM_NSLOTS);
  DCCL_INFO(DCCL_INIT, "thread read %lld", (long long)*(int64_t *)arg);
  return NULL;
}

static void concurrent_first_use(void) {
  enum { THREADS = 8 };
  pthread_t threads[THREADS];
  int64_t values[THREADS];
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&threads[i], NULL, read_nslots, &values[i]) == 0);
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  for (int i = 0; i < THREADS; i++) CHECK(values[i] == 16);
  const char *log = read_own_log();
  const char *first = strstr(log, "DCCL_NSLOTS set by environment");
  CHECK(first != NULL && strstr(first + 1, "DCCL_NSLOTS set by environment") == NULL); /* reported once */
}

static void table(void) {
  int count = -1;
  const struct dccl_param_desc *desc = dccl_param_table(&count);
  CHECK(count == DCCL_PARAM_COUNT);
  CHECK(strcmp(desc[DCCL_PARAM_DEBUG].name, "DEBUG") == 0);
  CHECK(strcmp(desc[DCCL_PARAM_DEBUG].kind, "STR") == 0);
  CHECK(strcmp(desc[DCCL_PARAM_DEBUG].def, "WARN") == 0);
  CHECK(strcmp(desc[DCCL_PARAM_CHUNK_SIZE].name, "CHUNK_SIZE") == 0);
  CHECK(strcmp(desc[DCCL_PARAM_CHUNK_SIZE].kind, "INT") == 0);
  CHECK(strcmp(desc[DCCL_PARAM_CHUNK_SIZE].def, "262144") == 0);
  for (int i = 0; i < count; i++) CHECK(desc[i].doc != NULL && desc[i].doc[0] != '\0');
  CHECK(dccl_param_int(DCCL_PARAM_COUNT) == 0);
  CHECK(strcmp(dccl_param_str((enum dccl_param_id) - 1), "") == 0);
}

int main(void) {
  static const char *const quiet[] = {"DCCL_DEBUG=NONE", NULL};
  static const char *const dccl_env[] = {"DCCL_NSLOTS=16", "DCCL_TRANSPORT=shm", NULL};
  static const char *const nccl_env[] = {"NCCL_NSLOTS=4", "NCCL_ALGO=tree", NULL};
  static const char *const both_env[] = {"DCCL_NSLOTS=16", "NCCL_NSLOTS=4", "NCCL_ALGO=tree", "DCCL_ALGO=ring", NULL};
  static const char *const empty_env[] = {"DCCL_NSLOTS=", "NCCL_NSLOTS=4",
                                          "DCCL_CHUNK_SIZE=", "NCCL_CHUNK_SIZE=", NULL};
  static const char *const suffix_env[] = {"DCCL_CHUNK_SIZE=1M",
                                           "DCCL_SPIN_NS=64k",
                                           "NCCL_YIELD_NS=2G",
                                           "DCCL_TIMEOUT=-5",
                                           "DCCL_BOOTSTRAP_TIMEOUT=+7",
                                           "DCCL_NSLOTS=3K",
                                           NULL};
  static const char *const garbage_env[] = {
      "DCCL_CHUNK_SIZE=12abc", "DCCL_NSLOTS=K",    "DCCL_SPIN_NS=0x10", "NCCL_YIELD_NS=99999999999G",
      "DCCL_TIMEOUT=1M2",      "DCCL_NCHANNELS= ", LOG_TO_OWN_FILE,     NULL};
  static const char *const once_env[] = {"DCCL_NSLOTS=16", "DCCL_DEBUG=NONE", NULL};
  static const char *const report_env[] = {"DCCL_NSLOTS=16", "DCCL_DEBUG=INFO", "DCCL_DEBUG_SUBSYS=ENV",
                                           LOG_TO_OWN_FILE, NULL};
  static const char *const threads_env[] = {"DCCL_NSLOTS=16", "DCCL_DEBUG=INFO", LOG_TO_OWN_FILE, NULL};

  int passed = 0, failed = 0;
#define RUN(body, env) (run_case(#body, body, env) ? passed++ : failed++)
  RUN(defaults, NULL);
  RUN(dccl_values, dccl_env);
  RUN(nccl_fallback, nccl_env);
  RUN(dccl_wins, both_env);
  RUN(empty_is_unset, empty_env);
  RUN(suffixes, suffix_env);
  RUN(garbage_uses_default, garbage_env);
  RUN(read_once, once_env);
  RUN(report_when_params_first, report_env);
  RUN(report_when_log_first, report_env);
  RUN(concurrent_first_use, threads_env);
  RUN(table, quiet);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
