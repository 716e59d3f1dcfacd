/* The check every small unit test needs: counts passes and failures, prints a printf-style message on failure. */
#ifndef DCCL_TEST_UNIT_CHECK_H_
#define DCCL_TEST_UNIT_CHECK_H_

#include <stdarg.h>
#include <stdio.h>

static int checks_passed, checks_failed;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
  if (ok) {
    checks_passed++;
    return;
  }
  checks_failed++;
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL: ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
}

#endif
