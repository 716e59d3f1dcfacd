/* The environment parameters: each entry of DCCL_PARAM_TABLE is read from DCCL_<NAME>, else NCCL_<NAME>, else
 * its default, once per process. An empty variable counts as unset. */
#include "util/params.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

/* The table's defaults as text (for the docs and for STR parameters) and as numbers (for INT parameters). */
#define PARAM_DEFAULT_TEXT_INT(def) #def
#define PARAM_DEFAULT_TEXT_STR(def) def
#define PARAM_DEFAULT_NUMBER_INT(def) (def)
#define PARAM_DEFAULT_NUMBER_STR(def) 0

static const struct dccl_param_desc param_table[DCCL_PARAM_COUNT] = {
#define PARAM_DESC(name, kind, def, doc) {#name, #kind, PARAM_DEFAULT_TEXT_##kind(def), doc},
    DCCL_PARAM_TABLE(PARAM_DESC)
#undef PARAM_DESC
};

static const int64_t param_default_number[DCCL_PARAM_COUNT] = {
#define PARAM_NUMBER(name, kind, def, doc) PARAM_DEFAULT_NUMBER_##kind(def),
    DCCL_PARAM_TABLE(PARAM_NUMBER)
#undef PARAM_NUMBER
};

struct param_value {
  const char *text; /* the environment's text, or the default's */
  int64_t number;   /* INT parameters: the value in use */
  char source[48];  /* the variable the value came from; "" when it is the default */
  int malformed;    /* an INT whose text did not parse: the default is in use */
};

static struct param_value param_values[DCCL_PARAM_COUNT];
static pthread_mutex_t params_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int params_loaded;
static atomic_int params_reported;

/* Decimal with an optional K, M or G suffix (powers of 1024). Returns 0 for anything else or on overflow. */
static int parse_param_int(const char *text, int64_t *value) {
  char *end;
  errno = 0;
  long long number = strtoll(text, &end, 10);
  if (end == text || errno == ERANGE) return 0;
  static const char suffixes[] = "KMG"; /* powers of 1024 */
  const char *suffix = *end != '\0' ? strchr(suffixes, toupper((unsigned char)*end)) : NULL;
  int64_t scale = suffix != NULL ? (int64_t)1 << (10 * (suffix - suffixes + 1)) : 1;
  if (suffix != NULL) end++;
  if (*end != '\0') return 0;
  if (number > INT64_MAX / scale || number < INT64_MIN / scale) return 0;
  *value = (int64_t)number * scale;
  return 1;
}

static const char *param_env_lookup(const char *name, char *source, size_t source_size) {
  static const char *const prefixes[] = {"DCCL_", "NCCL_"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
    snprintf(source, source_size, "%s%s", prefixes[i], name);
    const char *text = getenv(source);
    if (text != NULL && text[0] != '\0') return text;
  }
  source[0] = '\0';
  return NULL;
}

/* Runs under params_lock, so it must not log: logging reads DCCL_DEBUG through this file. */
static void params_load(void) {
  for (int id = 0; id < DCCL_PARAM_COUNT; id++) {
    const struct dccl_param_desc *desc = &param_table[id];
    struct param_value *value = &param_values[id];
    const char *env_text = param_env_lookup(desc->name, value->source, sizeof value->source);
    /* A copy: a later setenv of the same variable may free the environment's string. */
    char *copy = env_text != NULL ? strdup(env_text) : NULL;
    if (copy == NULL) value->source[0] = '\0';
    value->text = copy != NULL ? copy : desc->def;
    value->number = param_default_number[id];
    if (copy != NULL && strcmp(desc->kind, "INT") == 0 && !parse_param_int(copy, &value->number)) {
      value->malformed = 1;
      value->number = param_default_number[id];
    }
  }
}

/* Reports, once, what came from the environment. Deferred until logging is usable: while the log is reading
 * its own settings through dccl_param_str it answers "disabled", and the report waits for a later call. */
static void params_report(void) {
  if (atomic_load_explicit(&params_reported, memory_order_acquire)) return;
  if (!dccl_log_enabled(DCCL_LOG_WARN, DCCL_ENV)) return;
  if (atomic_exchange(&params_reported, 1)) return;
  for (int id = 0; id < DCCL_PARAM_COUNT; id++) {
    const struct param_value *value = &param_values[id];
    if (value->malformed) {
      DCCL_WARN(DCCL_ENV, "%s=\"%s\" is not an integer (K, M, G suffixes allowed); using the default %s", value->source,
                value->text, param_table[id].def);
    } else if (value->source[0] != '\0') {
      DCCL_INFO(DCCL_ENV, "%s set by environment to %s", value->source, value->text);
    }
  }
}

/* A forked child is a new process: it reads its own environment (a launcher may set DCCL_HOSTID per child). */
static void params_after_fork_in_child(void) {
  pthread_mutex_init(&params_lock, NULL);
  atomic_store(&params_loaded, 0);
}

static void params_ensure_loaded(void) {
  if (atomic_load_explicit(&params_loaded, memory_order_acquire)) return;
  static int atfork_registered;
  pthread_mutex_lock(&params_lock);
  if (!atomic_load_explicit(&params_loaded, memory_order_relaxed)) {
    params_load();
    if (!atfork_registered) atfork_registered = pthread_atfork(NULL, NULL, params_after_fork_in_child) == 0;
    atomic_store_explicit(&params_loaded, 1, memory_order_release);
  }
  pthread_mutex_unlock(&params_lock);
}

static const struct param_value *param_get(enum dccl_param_id id) {
  if ((int)id < 0 || id >= DCCL_PARAM_COUNT) return NULL;
  params_ensure_loaded();
  params_report();
  return &param_values[id];
}

int64_t dccl_param_int(enum dccl_param_id id) {
  const struct param_value *value = param_get(id);
  return value != NULL ? value->number : 0;
}

const char *dccl_param_str(enum dccl_param_id id) {
  const struct param_value *value = param_get(id);
  return value != NULL ? value->text : "";
}

/* Only the static descriptions: does not read the environment. */
const struct dccl_param_desc *dccl_param_table(int *count) {
  if (count != NULL) *count = DCCL_PARAM_COUNT;
  return param_table;
}
