/* Logging: levels, subsystems, one prefixed line per message. */
#ifndef DCCL_UTIL_LOG_H_
#define DCCL_UTIL_LOG_H_

#include "dccl.h"

enum dccl_log_level { DCCL_LOG_NONE = 0, DCCL_LOG_WARN = 1, DCCL_LOG_INFO = 2, DCCL_LOG_TRACE = 3 };

/* Subsystems, selected with DCCL_DEBUG_SUBSYS=INIT,COLL,... (default ALL). */
enum dccl_subsys {
  DCCL_INIT = 1u << 0,
  DCCL_COLL = 1u << 1,
  DCCL_P2P = 1u << 2,
  DCCL_SHM = 1u << 3,
  DCCL_NET = 1u << 4,
  DCCL_BOOTSTRAP = 1u << 5,
  DCCL_TUNE = 1u << 6,
  DCCL_ENV = 1u << 7,
  DCCL_ALL = ~0u
};

/* Current level and subsystem mask; read from DCCL_DEBUG / DCCL_DEBUG_SUBSYS on first use. */
int dccl_log_enabled(int level, unsigned subsys);
void dccl_log(int level, unsigned subsys, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The rank printed in this thread's log prefix (-1: none). */
void dccl_log_set_rank(int rank);

#define DCCL_LOG_AT(level, subsys, ...)                                                                    \
  do {                                                                                                     \
    if (dccl_log_enabled((level), (subsys))) dccl_log((level), (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define DCCL_WARN(subsys, ...) DCCL_LOG_AT(DCCL_LOG_WARN, (subsys), __VA_ARGS__)
#define DCCL_INFO(subsys, ...) DCCL_LOG_AT(DCCL_LOG_INFO, (subsys), __VA_ARGS__)
#define DCCL_TRACE(subsys, ...) DCCL_LOG_AT(DCCL_LOG_TRACE, (subsys), __VA_ARGS__)

#endif
