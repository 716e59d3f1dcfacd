#include "unix_msg.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int msg_pair(int fds[2], int timeout_s) {
  if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fds) != 0) return -1;
  struct timeval tv = {timeout_s, 0};
  for (int i = 0; i < 2; i++) setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return 0;
}

int msg_send(int sock, const void *buf, size_t len, int fd) {
  struct iovec iov = {(void *)buf, len};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } ctl;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    memset(&ctl, 0, sizeof ctl);
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof ctl.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  ssize_t n;
  do n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == (ssize_t)len ? 0 : -1;
}

int msg_recv(int sock, void *buf, size_t len, int *fd) {
  struct iovec iov = {buf, len};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } ctl;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
  if (fd) *fd = -1;
  ssize_t n;
  do n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); n >= 0 && c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    int got;
    memcpy(&got, CMSG_DATA(c), sizeof got);
    if (fd)
      *fd = got;
    else
      close(got);
  }
  return n == (ssize_t)len && !(msg.msg_flags & MSG_TRUNC) ? 0 : -1;
}

int msg_barrier(int sock) {
  char b = 'b';
  if (msg_send(sock, &b, 1, -1) != 0) return -1;
  return msg_recv(sock, &b, 1, NULL);
}
