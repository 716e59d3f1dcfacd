/* File descriptors between processes of one host (util/fd_pass.h). */
#define _GNU_SOURCE
#include "util/fd_pass.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/error.h"
#include "util/params.h"

/* An abstract name: a leading NUL, then text; nothing appears in the file system, nothing is left to clean up. */
static socklen_t address_of(const char name[DCCL_FD_NAME_BYTES], struct sockaddr_un *a) {
  memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  size_t len = strnlen(name + 1, DCCL_FD_NAME_BYTES - 1);
  memcpy(a->sun_path, name, 1 + len);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

ncclResult_t dccl_fd_socket_open(uint64_t tag, int *sock, char name[DCCL_FD_NAME_BYTES]) {
  static _Atomic unsigned serial;
  memset(name, 0, DCCL_FD_NAME_BYTES);
  snprintf(name + 1, DCCL_FD_NAME_BYTES - 1, "dccl-fd-%d-%llx-%u", (int)getpid(), (unsigned long long)tag,
           serial++);
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return dccl_error(ncclSystemError, "socket(AF_UNIX): %s", strerror(errno));
  struct sockaddr_un a;
  socklen_t len = address_of(name, &a);
  if (bind(s, (struct sockaddr *)&a, len) != 0) {
    int e = errno;
    close(s);
    return dccl_error(ncclSystemError, "bind of the Unix socket @%s: %s", name + 1, strerror(e));
  }
  *sock = s;
  return ncclSuccess;
}

void dccl_fd_socket_close(int sock) {
  if (sock >= 0) close(sock);
}

ncclResult_t dccl_fd_send(int sock, const char to[DCCL_FD_NAME_BYTES], int fd, const void *data, size_t bytes) {
  struct sockaddr_un a;
  socklen_t len = address_of(to, &a);
  struct iovec iov = {(void *)data, bytes};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof(control));
  struct msghdr msg = {.msg_name = &a, .msg_namelen = len, .msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = control.buf, .msg_controllen = sizeof(control.buf)};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  ssize_t n;
  do n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclInProgress;
  if (n != (ssize_t)bytes)
    return dccl_error(ncclSystemError, "sending a file descriptor to @%s: %s", to + 1,
                      n < 0 ? strerror(errno) : "short write");
  return ncclSuccess;
}

ncclResult_t dccl_fd_recv(int sock, int *fd, void *data, size_t bytes, int timeout_ms) {
  *fd = -1;
  struct pollfd p = {sock, POLLIN, 0};
  int ready;
  do ready = poll(&p, 1, timeout_ms);
  while (ready < 0 && errno == EINTR);
  if (ready == 0) return ncclInProgress;
  if (ready < 0) return dccl_error(ncclSystemError, "poll on a Unix socket: %s", strerror(errno));
  struct iovec iov = {data, bytes};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                       .msg_controllen = sizeof(control.buf)};
  ssize_t n;
  do n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&msg) : NULL;
  if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) memcpy(fd, CMSG_DATA(c), sizeof(int));
  if (n != (ssize_t)bytes || *fd < 0 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
    return dccl_error(ncclSystemError, "receiving a file descriptor: %s",
                      n < 0 ? strerror(errno) : "the message was not one descriptor and its data");
  }
  return ncclSuccess;
}

int64_t dccl_fd_exchange_timeout_ms(void) {
  int64_t s = dccl_param_int(DCCL_PARAM_TIMEOUT);
  return (s > 0 ? s : 60) * 1000;
}

ncclResult_t dccl_fd_exchange(int sock, const struct dccl_fd_letter *out, int nout, int expected, int *fds,
                              struct dccl_fd_note *notes, int64_t timeout_ms, const _Atomic int *stop,
                              const char *what) {
  int got = 0, stopped = 0;
  int64_t waited_ms = 0;
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < nout && res == ncclSuccess; i++)
    while ((res = dccl_fd_send(sock, out[i].to, out[i].fd, &out[i].note, sizeof(out[i].note))) == ncclInProgress) {
      if (got < expected) {
        ncclResult_t r = dccl_fd_recv(sock, &fds[got], &notes[got], sizeof(notes[got]), 1);
        if (r == ncclSuccess) {
          got++;
          continue;
        }
        if (r != ncclInProgress) {
          res = r;
          break;
        }
      } else {
        usleep(1000); /* all of ours came: the full queue drains as its owner takes what it waits for */
      }
      if (++waited_ms >= timeout_ms || (stopped = stop && atomic_load(stop))) break;
    }
  while (res == ncclSuccess && got < expected) {
    res = dccl_fd_recv(sock, &fds[got], &notes[got], sizeof(notes[got]), 100);
    if (res == ncclSuccess) got++;
    else if (res == ncclInProgress && (waited_ms += 100) < timeout_ms && !(stopped = stop && atomic_load(stop)))
      res = ncclSuccess;
  }
  if (res == ncclInProgress && stopped)
    res = dccl_error(ncclRemoteError, "%s: stopped (the communicator failed) with %d of %d file descriptors",
                     what, got, expected);
  else if (res == ncclInProgress)
    res = dccl_error(ncclRemoteError, "%s: %d of %d file descriptors arrived from the other processes in %lld ms",
                     what, got, expected, (long long)timeout_ms);
  if (res != ncclSuccess)
    while (got > 0) close(fds[--got]);
  return res;
}
