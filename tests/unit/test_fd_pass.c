/* util/fd_pass: a file descriptor crosses from a forked child to the parent over an abstract Unix datagram socket
 * (how a cuMem allocation's descriptor reaches a peer process for a window). Checked: the received descriptor
 * reads what the child wrote through its own; the companion data arrives intact; waiting with nothing sent returns
 * ncclInProgress within its timeout; sending to a socket nobody bound fails with a message. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "unit_check.h"
#include "util/error.h"
#include "util/fd_pass.h"

struct note {
  int rank, index;
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void) {
  int sock = -1, fd = -1;
  char name[DCCL_FD_NAME_BYTES];
  check(dccl_fd_socket_open(7, &sock, name) == ncclSuccess, "open: %s", dccl_last_error());

  double t0 = now();
  struct note in = {0, 0};
  check(dccl_fd_recv(sock, &fd, &in, sizeof(in), 50) == ncclInProgress && fd == -1,
        "a wait with nothing sent gives ncclInProgress");
  check(now() - t0 < 2.0, "the empty wait took %.3f s", now() - t0);

  pid_t child = fork();
  if (child == 0) {
    int mine = memfd_create("dccl-fd-test", 0), out = -1;
    char child_name[DCCL_FD_NAME_BYTES];
    struct note note = {3, 11};
    int ok = mine >= 0 && write(mine, "window", 6) == 6 && dccl_fd_socket_open(8, &out, child_name) == ncclSuccess &&
             dccl_fd_send(out, name, mine, &note, sizeof(note)) == ncclSuccess;
    _exit(ok ? 0 : 1);
  }
  int status = -1;
  check(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "the child sent its descriptor");
  check(dccl_fd_recv(sock, &fd, &in, sizeof(in), 5000) == ncclSuccess && fd >= 0, "receive: %s", dccl_last_error());
  check(in.rank == 3 && in.index == 11, "the companion data: rank %d index %d", in.rank, in.index);
  char text[8] = {0};
  check(fd >= 0 && pread(fd, text, 6, 0) == 6 && !memcmp(text, "window", 6), "the descriptor reads \"%s\"", text);
  if (fd >= 0) close(fd);

  char nobody[DCCL_FD_NAME_BYTES] = {0};
  snprintf(nobody + 1, sizeof(nobody) - 1, "dccl-fd-nobody-%d", (int)getpid());
  int devnull_fd = dup(0);
  struct note note = {0, 0};
  check(dccl_fd_send(sock, nobody, devnull_fd, &note, sizeof(note)) == ncclSystemError &&
            strstr(dccl_last_error(), "nobody") != NULL,
        "a send to an unbound name fails naming it: %s", dccl_last_error());
  close(devnull_fd);
  dccl_fd_socket_close(sock);
  printf("test_fd_pass: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
