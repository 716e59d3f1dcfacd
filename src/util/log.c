/* Logging (level and subsystem filters, one prefixed line per message).
 *
 * The filters are read once (pthread_once) into atomics, so a disabled DCCL_INFO costs three loads, no call
 * into the environment and no lock.
 * ncclResetDebugInit reads them again from the environment. */
#include "util/log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/params.h"

#define LOG_LINE_MAX 2048

static const struct {
  const char *name;
  unsigned bit;
} subsys_names[] = {
    {"INIT", DCCL_INIT}, {"COLL", DCCL_COLL},           {"P2P", DCCL_P2P},   {"SHM", DCCL_SHM},
    {"NET", DCCL_NET},   {"BOOTSTRAP", DCCL_BOOTSTRAP}, {"TUNE", DCCL_TUNE}, {"ENV", DCCL_ENV},
};
#define SUBSYS_COUNT (sizeof subsys_names / sizeof subsys_names[0])

static const char *const level_names[] = {"NONE", "WARN", "INFO", "TRACE"};

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static atomic_int log_ready;
static atomic_int log_level;
static atomic_uint log_subsys;
/* Guards the output file, its path and the host name against a concurrent ncclResetDebugInit. */
static pthread_mutex_t log_mutex = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_file; /* NULL: stderr */
static char log_path[PATH_MAX];
static char log_host[64];

static __thread int tls_rank = -1;
/* Set while this thread reads the log settings: a log call made meanwhile (the parameter report) is dropped
 * instead of re-entering pthread_once. */
static __thread int tls_reading_settings;

static void append_problem(char *problems, size_t size, const char *fmt, const char *arg) {
  size_t used = strlen(problems);
  if (used + 1 >= size) return;
  if (used > 0) used += (size_t)snprintf(problems + used, size - used, "; ");
  if (used < size) snprintf(problems + used, size - used, fmt, arg);
}

static int parse_level(const char *text, char *problems, size_t size) {
  if (text[0] == '\0') return DCCL_LOG_WARN;
  for (int level = DCCL_LOG_NONE; level <= DCCL_LOG_TRACE; level++)
    if (strcasecmp(text, level_names[level]) == 0) return level;
  if (strcasecmp(text, "VERSION") == 0) return DCCL_LOG_WARN; /* NCCL's level that prints little: closest */
  append_problem(problems, size, "unknown debug level \"%s\" (NONE, WARN, INFO, TRACE); using WARN", text);
  return DCCL_LOG_WARN;
}

/* "INIT,NET" selects those; "^INIT,NET" selects all but those; "" or "ALL" selects all. */
static unsigned parse_subsys(const char *text, char *problems, size_t size) {
  int negate = text[0] == '^';
  if (negate) text++;
  if (text[0] == '\0') return DCCL_ALL;
  unsigned mask = 0;
  char token[32];
  while (*text != '\0') {
    size_t len = strcspn(text, ",");
    const char *start = text;
    text += len + (text[len] == ',');
    while (len > 0 && isspace((unsigned char)start[0])) start++, len--;
    while (len > 0 && isspace((unsigned char)start[len - 1])) len--;
    if (len == 0) continue;
    snprintf(token, sizeof token, "%.*s", (int)len, start);
    if (strcasecmp(token, "ALL") == 0) {
      mask = DCCL_ALL;
      continue;
    }
    unsigned bit = 0;
    for (size_t i = 0; i < SUBSYS_COUNT; i++)
      if (strcasecmp(token, subsys_names[i].name) == 0) bit = subsys_names[i].bit;
    if (bit == 0) append_problem(problems, size, "unknown debug subsystem \"%s\" ignored", token);
    mask |= bit;
  }
  return negate ? (unsigned)DCCL_ALL & ~mask : mask;
}

/* %h: host name, %p: pid, %%: a percent sign. */
static void expand_log_path(const char *pattern, const char *host, char *path, size_t size) {
  size_t used = 0;
  path[0] = '\0';
  for (const char *c = pattern; *c != '\0' && used + 1 < size; c++) {
    if (c[0] == '%' && c[1] == 'h') {
      used += (size_t)snprintf(path + used, size - used, "%s", host);
      c++;
    } else if (c[0] == '%' && c[1] == 'p') {
      used += (size_t)snprintf(path + used, size - used, "%d", (int)getpid());
      c++;
    } else {
      if (c[0] == '%' && c[1] == '%') c++;
      path[used++] = *c;
      path[used] = '\0';
    }
  }
}

static void read_host_name(char *host, size_t size) {
  if (gethostname(host, size) != 0) snprintf(host, size, "unknown");
  host[size - 1] = '\0';
  char *dot = strchr(host, '.');
  if (dot != NULL) *dot = '\0';
}

static const char *subsys_name(unsigned subsys) {
  if (subsys == DCCL_ALL) return "ALL";
  for (size_t i = 0; i < SUBSYS_COUNT; i++)
    if (subsys & subsys_names[i].bit) return subsys_names[i].name;
  return "ALL";
}

/* snprintf at text + *used, never past the end; *used stays within the buffer. */
static void append_text(char *text, size_t size, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append_text(char *text, size_t size, size_t *used, const char *fmt, ...) {
  if (*used + 1 >= size) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text + *used, size - *used, fmt, ap);
  va_end(ap);
  if (n > 0) *used = *used + (size_t)n < size ? *used + (size_t)n : size - 1;
}

/* Formats one whole line and writes it with one call, so lines from several threads do not interleave. */
static void log_vwrite(int level, unsigned subsys, const char *file, int line, const char *fmt, va_list ap) {
  int saved_errno = errno;
  char text[LOG_LINE_MAX];
  size_t used = 0;
  if (level < DCCL_LOG_WARN || level > DCCL_LOG_TRACE) level = DCCL_LOG_TRACE;
  pthread_mutex_lock(&log_mutex);
  append_text(text, sizeof text, &used, "%s:%d", log_host, (int)getpid());
  if (tls_rank >= 0) append_text(text, sizeof text, &used, ":r%d", tls_rank);
  append_text(text, sizeof text, &used, " DCCL %s [%s] ", level_names[level], subsys_name(subsys));
  if (level == DCCL_LOG_TRACE && file != NULL) {
    const char *base = strrchr(file, '/');
    append_text(text, sizeof text, &used, "%s:%d ", base != NULL ? base + 1 : file, line);
  }
  if (used > sizeof text - 2) used = sizeof text - 2; /* room for the newline */
  int n = vsnprintf(text + used, sizeof text - used, fmt, ap);
  if (n > 0) used = used + (size_t)n < sizeof text - 1 ? used + (size_t)n : sizeof text - 2;
  text[used++] = '\n';
  text[used] = '\0';
  FILE *out = log_file != NULL ? log_file : stderr;
  fputs(text, out);
  fflush(out);
  pthread_mutex_unlock(&log_mutex);
  errno = saved_errno;
}

static void log_write(int level, unsigned subsys, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void log_write(int level, unsigned subsys, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_vwrite(level, subsys, NULL, 0, fmt, ap);
  va_end(ap);
}

static void log_configure(const char *level_text, const char *subsys_text, const char *file_pattern) {
  char problems[512] = "";
  int level = parse_level(level_text, problems, sizeof problems);
  unsigned mask = parse_subsys(subsys_text, problems, sizeof problems);
  char host[sizeof log_host];
  read_host_name(host, sizeof host);
  char path[PATH_MAX] = "";
  if (file_pattern[0] != '\0') expand_log_path(file_pattern, host, path, sizeof path);

  pthread_mutex_lock(&log_mutex);
  memcpy(log_host, host, sizeof log_host);
  if (strcmp(path, log_path) != 0) { /* a reset with the same file keeps appending to it */
    if (log_file != NULL) fclose(log_file);
    log_file = NULL;
    log_path[0] = '\0';
    if (path[0] != '\0') {
      log_file = fopen(path, "we");
      if (log_file != NULL)
        memcpy(log_path, path, sizeof log_path);
      else
        append_problem(problems, sizeof problems, "cannot open debug file \"%s\"; logging to stderr", path);
    }
  }
  atomic_store_explicit(&log_level, level, memory_order_relaxed);
  atomic_store_explicit(&log_subsys, mask, memory_order_relaxed);
  pthread_mutex_unlock(&log_mutex);

  if (problems[0] != '\0' && level >= DCCL_LOG_WARN) log_write(DCCL_LOG_WARN, DCCL_ENV, "%s", problems);
}

/* A launcher may fork while another thread (the rendezvous thread, say) holds the log lock: hold it across
 * fork() so the child never inherits it locked. */
static void log_before_fork(void) {
  pthread_mutex_lock(&log_mutex);
}
static void log_after_fork(void) {
  pthread_mutex_unlock(&log_mutex);
}

static void log_init_once(void) {
  pthread_atfork(log_before_fork, log_after_fork, log_after_fork);
  tls_reading_settings = 1;
  const char *level_text = dccl_param_str(DCCL_PARAM_DEBUG);
  const char *subsys_text = dccl_param_str(DCCL_PARAM_DEBUG_SUBSYS);
  const char *file_pattern = dccl_param_str(DCCL_PARAM_DEBUG_FILE);
  tls_reading_settings = 0;
  log_configure(level_text, subsys_text, file_pattern);
  atomic_store_explicit(&log_ready, 1, memory_order_release);
}

/* Returns 0 only while this very thread is reading the settings. */
static int log_ensure_init(void) {
  if (atomic_load_explicit(&log_ready, memory_order_acquire)) return 1;
  if (tls_reading_settings) return 0;
  pthread_once(&log_once, log_init_once);
  return 1;
}

int dccl_log_enabled(int level, unsigned subsys) {
  if (!log_ensure_init()) return 0;
  return level > DCCL_LOG_NONE && level <= atomic_load_explicit(&log_level, memory_order_relaxed) &&
         (subsys & atomic_load_explicit(&log_subsys, memory_order_relaxed)) != 0;
}

void dccl_log(int level, unsigned subsys, const char *file, int line, const char *fmt, ...) {
  if (!log_ensure_init()) return;
  va_list ap;
  va_start(ap, fmt);
  log_vwrite(level, subsys, file, line, fmt, ap);
  va_end(ap);
}

void dccl_log_set_rank(int rank) {
  tls_rank = rank < 0 ? -1 : rank;
}

/* The parameter cache is read once per process; a reset reads the environment afresh, with the same names
 * and precedence (DCCL_ before NCCL_, empty counts as unset, else the table's default). */
static const char *debug_setting_now(enum dccl_param_id id) {
  const struct dccl_param_desc *table = dccl_param_table(NULL);
  char name[64];
  snprintf(name, sizeof name, "DCCL_%s", table[id].name);
  const char *text = getenv(name);
  if (text != NULL && text[0] != '\0') return text;
  snprintf(name, sizeof name, "NCCL_%s", table[id].name);
  text = getenv(name);
  if (text != NULL && text[0] != '\0') return text;
  return table[id].def;
}

void ncclResetDebugInit(void) {
  log_ensure_init(); /* so that a first-time init cannot later overwrite what the reset reads */
  log_configure(debug_setting_now(DCCL_PARAM_DEBUG), debug_setting_now(DCCL_PARAM_DEBUG_SUBSYS),
                debug_setting_now(DCCL_PARAM_DEBUG_FILE));
}
