/* Is the peer process on this host still running? A pidfd (kept open, so a reused pid cannot fool it) polled with
 * a zero timeout, else /proc/<pid>/stat with the start time recorded when the watch began. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transports/shm/shm_private.h"
#include "util/log.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every architecture */
#endif

ncclResult_t dccl_shm_proc_stat(pid_t pid, char *state, unsigned long long *start_time) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return ncclSystemError;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* The command name is in parentheses and may itself hold spaces or ')': the fields start after the last ')'. */
  char *p = strrchr(buf, ')');
  if (!p) return ncclSystemError;
  /* Field 3 is the state; field 22 the start time, 19 fields later. */
  if (sscanf(p + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu", state,
             start_time) != 2)
    return ncclSystemError;
  return ncclSuccess;
}

int dccl_shm_proc_alive(pid_t pid, unsigned long long start_time) {
  char state;
  unsigned long long now_start;
  if (dccl_shm_proc_stat(pid, &state, &now_start) != ncclSuccess) return 0;
  if (state == 'Z' || state == 'X' || state == 'x') return 0; /* a zombie has ended; only its parent keeps it */
  return now_start == start_time;
}

void dccl_shm_watch_start(struct dccl_shm_peer_watch *w, pid_t pid) {
  w->pid = pid;
  w->dead = 0;
  w->start_time = 0;
  char state;
  if (dccl_shm_proc_stat(pid, &state, &w->start_time) != ncclSuccess) w->start_time = 0;
  long fd = syscall(SYS_pidfd_open, (int)pid, 0); /* close-on-exec by definition */
  w->pidfd = fd >= 0 ? (int)fd : -1;
  if (fd < 0 && errno == ESRCH) w->dead = 1;
  if (fd < 0 && errno != ESRCH)
    DCCL_INFO(DCCL_SHM, "pidfd_open(%d) failed (%s): watching the peer through /proc", (int)pid, strerror(errno));
}

int dccl_shm_watch_alive(struct dccl_shm_peer_watch *w) {
  if (w->dead) return 0;
  if (w->pidfd >= 0) {
    /* A pidfd turns readable when the process exits, before it is reaped. */
    struct pollfd p = {.fd = w->pidfd, .events = POLLIN};
    int r = poll(&p, 1, 0);
    if (r == 0) return 1;
    if (r > 0) {
      w->dead = 1;
      return 0;
    }
    /* poll failed (EINTR, ENOMEM): ask /proc this time. */
  }
  if (!dccl_shm_proc_alive(w->pid, w->start_time)) w->dead = 1;
  return !w->dead;
}

void dccl_shm_watch_stop(struct dccl_shm_peer_watch *w) {
  if (w->pidfd >= 0) close(w->pidfd);
  w->pidfd = -1;
}
