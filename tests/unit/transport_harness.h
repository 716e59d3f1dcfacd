/* What the transport unit tests share: the check counter, a clock, full reads and writes on the socketpair the two
 * test processes talk over, and the slot sizes both sides agree on. */
#ifndef DCCL_TEST_TRANSPORT_HARNESS_H_
#define DCCL_TEST_TRANSPORT_HARNESS_H_

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int passed, failed;
#define CHECK(cond, ...)                                                           \
  do {                                                                             \
    if (cond) {                                                                    \
      passed++;                                                                    \
    } else {                                                                       \
      failed++;                                                                    \
      fprintf(stderr, "FAIL %s:%d (pid %d): ", __FILE__, __LINE__, (int)getpid()); \
      fprintf(stderr, __VA_ARGS__);                                                \
      fputc('\n', stderr);                                                         \
    }                                                                              \
  } while (0)

/* Forks the peer process, the two linked by a socket pair: returns the child's pid in the parent and 0 in the child,
 * each with its own end in *sock (the other end closed), or -1 after a failed check. */
static pid_t fork_linked(int *sock) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
    CHECK(0, "socketpair: %s", strerror(errno));
    return -1;
  }
  pid_t child = fork();
  if (child < 0) {
    CHECK(0, "fork: %s", strerror(errno));
    close(sv[0]);
    close(sv[1]);
    return -1;
  }
  close(sv[child == 0 ? 0 : 1]);
  *sock = sv[child == 0 ? 1 : 0];
  return child;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t k = write(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Reads n bytes, waiting at most timeout_s in all. */
static int read_all(int fd, void *p, size_t n, double timeout_s) {
  char *c = p;
  double end = now_s() + timeout_s;
  while (n) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int left_ms = (int)((end - now_s()) * 1000);
    if (left_ms <= 0 || poll(&pfd, 1, left_ms) <= 0) return -1;
    ssize_t k = read(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

static void notify(int sock) {
  (void)!write(sock, "x", 1);
}

static int await(int sock, double timeout_s) {
  char c;
  return read_all(sock, &c, 1, timeout_s);
}

/* The child's result: its failed-check count (or 100 + signal if it died). */
static int child_failures(pid_t pid) {
  int status;
  if (waitpid(pid, &status, 0) != pid) return 1000;
  if (WIFSIGNALED(status)) {
    fprintf(stderr, "child %d died of signal %d\n", (int)pid, WTERMSIG(status));
    return 100 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}

/* --- patterned slots --- */
static uint64_t slot_len(uint64_t i, uint64_t slot_bytes) {
  if (i % 10 == 0) return slot_bytes;
  if (i % 10 == 1) return 0;
  if (i % 10 == 2) return 1;
  return (i * 2654435761u) % (slot_bytes + 1);
}

#endif
