/* Runs a test case in a forked child with an environment of its own: DCCL reads its parameters once per process,
 * so a case that sets variables needs a fresh process. Shared by the unit tests of parameters and logging. */
#ifndef DCCL_TEST_FORKED_CASE_H_
#define DCCL_TEST_FORKED_CASE_H_

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/params.h"

static int case_failures;
#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      case_failures++;                                                           \
    }                                                                            \
  } while (0)

/* Runs `body` in a child whose environment has no DCCL_/NCCL_ parameter but the "NAME=VALUE" entries given. */
static int run_case(const char *name, void (*body)(void), const char *const *env) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int count;
    const struct dccl_param_desc *table = dccl_param_table(&count); /* does not read the environment */
    char var[64];
    for (int i = 0; i < count; i++) {
      snprintf(var, sizeof var, "DCCL_%s", table[i].name);
      unsetenv(var);
      snprintf(var, sizeof var, "NCCL_%s", table[i].name);
      unsetenv(var);
    }
    for (int i = 0; env != NULL && env[i] != NULL; i++) {
      const char *equals = strchr(env[i], '=');
      snprintf(var, sizeof var, "%.*s", (int)(equals - env[i]), env[i]);
      setenv(var, equals + 1, 1);
    }
    alarm(20); /* a deadlock fails the case instead of hanging the suite */
    body();
    fflush(NULL);
    _exit(case_failures == 0 ? 0 : 1);
  }
  int status = 0;
  int ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  printf("%s %s\n", ok ? "PASS" : "FAIL", name);
  return ok;
}

#endif
