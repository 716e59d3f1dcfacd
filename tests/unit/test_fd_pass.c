/* util/fd_pass: a file descriptor crosses from a forked child to the parent over an abstract Unix datagram socket
 * (how a cuMem allocation's descriptor reaches a peer process for a window). Checked: the received descriptor
 * reads what the child wrote through its own; the companion data arrives intact; waiting with nothing sent returns
 * ncclInProgress within its timeout; sending to a socket nobody bound fails with a message. The exchange: 4
 * processes each send 300 descriptors to each of the others at once, more than a socket's queue holds, and each
 * receives all 900 with their notes (none wedges); an exchange still waiting for a descriptor after its timeout
 * fails, naming what it waited for, and one whose stop flag is raised ends within a few 100 ms waits. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
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

/* Raises the flag at `arg` after 100 ms. */
static void *stop_soon(void *arg) {
  usleep(100000);
  atomic_store((_Atomic int *)arg, 1);
  return NULL;
}

#define PROCS 4
#define EACH 300

/* Process p of the exchange: sends EACH descriptors to every other process, checks what it receives. 0: all right. */
static int exchange_as(int p, const int *socks, char names[PROCS][DCCL_FD_NAME_BYTES]) {
  static struct dccl_fd_letter out[(PROCS - 1) * EACH];
  static int fds[(PROCS - 1) * EACH];
  static struct dccl_fd_note notes[(PROCS - 1) * EACH];
  int nout = 0, bad = 0, from[PROCS] = {0};
  for (int i = 0; i < EACH; i++)
    for (int q = 0; q < PROCS; q++)
      if (q != p) out[nout++] = (struct dccl_fd_letter){names[q], 0, {p, 1, (uint64_t)i}};
  if (dccl_fd_exchange(socks[p], out, nout, nout, fds, notes, 20000, NULL, "the test's exchange") != ncclSuccess) {
    printf("process %d: %s\n", p, dccl_last_error());
    return 1;
  }
  for (int k = 0; k < nout; k++) {
    int r = notes[k].rank;
    bad += r < 0 || r >= PROCS || r == p || notes[k].tag != (uint64_t)from[r]++ || fds[k] < 0;
    close(fds[k]);
  }
  return bad != 0;
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
  int waiting = -1;
  struct dccl_fd_note waited;
  t0 = now();
  check(dccl_fd_exchange(sock, NULL, 0, 1, &waiting, &waited, 200, NULL, "the lonely exchange") == ncclRemoteError &&
            strstr(dccl_last_error(), "the lonely exchange") && strstr(dccl_last_error(), "0 of 1"),
        "an exchange nobody answers fails after its timeout: %s", dccl_last_error());
  check(now() - t0 < 5.0, "the unanswered exchange took %.3f s", now() - t0);
  /* A communicator that fails meanwhile (its abort flag) ends the wait long before the timeout. */
  static _Atomic int stop;
  pthread_t stopper;
  pthread_create(&stopper, NULL, stop_soon, &stop);
  t0 = now();
  check(dccl_fd_exchange(sock, NULL, 0, 1, &waiting, &waited, 60000, &stop, "the stopped exchange") ==
                ncclRemoteError && strstr(dccl_last_error(), "stopped"),
        "a set stop flag ends the exchange: %s", dccl_last_error());
  check(now() - t0 < 5.0, "the stopped exchange took %.3f s of its 60", now() - t0);
  pthread_join(stopper, NULL);
  dccl_fd_socket_close(sock);

  int socks[PROCS];
  char names[PROCS][DCCL_FD_NAME_BYTES];
  for (int p = 0; p < PROCS; p++)
    check(dccl_fd_socket_open(100 + (uint64_t)p, &socks[p], names[p]) == ncclSuccess, "open %d", p);
  pid_t kids[PROCS - 1];
  for (int p = 1; p < PROCS; p++)
    if ((kids[p - 1] = fork()) == 0) _exit(exchange_as(p, socks, names));
  check(exchange_as(0, socks, names) == 0, "process 0 received every descriptor, in each sender's order");
  for (int p = 1; p < PROCS; p++) {
    status = -1;
    check(waitpid(kids[p - 1], &status, 0) == kids[p - 1] && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "process %d received every descriptor, in each sender's order", p);
  }
  for (int p = 0; p < PROCS; p++) dccl_fd_socket_close(socks[p]);
  printf("test_fd_pass: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
