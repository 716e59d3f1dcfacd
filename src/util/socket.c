/* Blocking TCP with a deadline and an abort flag: listen, accept, connect with retries, full sends and receives. */
#define _GNU_SOURCE /* accept4 */
#include "util/socket.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/deadline.h"
#include "util/error.h"
#include "util/net_addr.h"

void dccl_socket_set_nodelay(int fd) {
  int one = 1;
  /* Small control messages must not wait for Nagle's timer; failure only costs latency. */
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static ncclResult_t set_nonblocking(int fd, int on) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK)) < 0)
    return dccl_error(ncclSystemError, "fcntl(O_NONBLOCK) failed: %s", strerror(errno));
  return ncclSuccess;
}

ncclResult_t dccl_socket_listen(struct sockaddr_storage *addr, int *fd) {
  char buf[80];
  int s = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return dccl_error(ncclSystemError, "socket() failed: %s", strerror(errno));
  int one = 1;
  if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    DCCL_WARN(DCCL_NET, "SO_REUSEADDR failed: %s", strerror(errno));
  }
  socklen_t len = dccl_sockaddr_len(addr);
  if (bind(s, (struct sockaddr *)addr, len) != 0) {
    int err = errno;
    close(s);
    return dccl_error(ncclSystemError, "bind to %s failed: %s", dccl_socket_addr_str(addr, buf, sizeof(buf)),
                      strerror(err));
  }
  if (listen(s, SOMAXCONN) != 0) {
    int err = errno;
    close(s);
    return dccl_error(ncclSystemError, "listen failed: %s", strerror(err));
  }
  len = sizeof(*addr);
  if (getsockname(s, (struct sockaddr *)addr, &len) != 0) {
    int err = errno;
    close(s);
    return dccl_error(ncclSystemError, "getsockname failed: %s", strerror(err));
  }
  *fd = s;
  return ncclSuccess;
}

ncclResult_t dccl_socket_accept(int listen_fd, int *fd, struct sockaddr_storage *peer) {
  *fd = -1;
  for (;;) {
    socklen_t len = sizeof(*peer);
    int s = accept4(listen_fd, (struct sockaddr *)peer, &len, SOCK_CLOEXEC);
    if (s >= 0) {
      dccl_socket_set_nodelay(s);
      *fd = s;
      return ncclSuccess;
    }
    if (errno == EINTR) continue;
    /* A connection that vanished between poll and accept, or nothing waiting: not an error. */
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED || errno == EPROTO) return ncclSuccess;
    if (errno == EMFILE || errno == ENFILE)
      return dccl_error(ncclSystemError, "accept failed: %s (out of file descriptors)", strerror(errno));
    return dccl_error(ncclSystemError, "accept failed: %s", strerror(errno));
  }
}

/* One nonblocking connect attempt, waited for until the deadline: *fd >= 0 if connected, else *last_err says why
 * (the caller retries). Fails only for local errors, an abort or the deadline. */
static ncclResult_t connect_once(const struct sockaddr_storage *addr, int64_t deadline_ns, _Atomic int *abort_flag,
                                 int *fd, int *last_err) {
  *fd = -1;
  int s = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return dccl_error(ncclSystemError, "socket() failed: %s", strerror(errno));
  int rc;
  do rc = connect(s, (const struct sockaddr *)addr, dccl_sockaddr_len(addr));
  while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EINPROGRESS) {
    *last_err = errno;
    close(s);
    return ncclSuccess;
  }
  while (rc != 0) {
    if (dccl_wait_state(abort_flag, deadline_ns) != DCCL_WAIT_OK) {
      *last_err = ETIMEDOUT;
      close(s);
      return ncclSuccess;
    }
    struct pollfd pfd = {.fd = s, .events = POLLOUT};
    int n = poll(&pfd, 1, dccl_poll_slice_ms(deadline_ns));
    if (n < 0 && errno != EINTR) {
      *last_err = errno;
      close(s);
      return ncclSuccess;
    }
    if (n <= 0) continue;
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      *last_err = err;
      close(s);
      return ncclSuccess;
    }
    rc = 0;
  }
  ncclResult_t res = set_nonblocking(s, 0);
  if (res != ncclSuccess) {
    close(s);
    return res;
  }
  dccl_socket_set_nodelay(s);
  *fd = s;
  return ncclSuccess;
}

ncclResult_t dccl_socket_connect_wait(const struct sockaddr_storage *addr, int64_t deadline_ns, _Atomic int *abort_flag,
                                      int *fd) {
  int backoff_ms = 10, last_err = 0;
  char buf[80];
  for (;;) {
    DCCLCHECK(connect_once(addr, deadline_ns, abort_flag, fd, &last_err));
    if (*fd >= 0) return ncclSuccess;
    /* Refused or unreachable: the listener may not be up yet; try again until the deadline. */
    int64_t wake = dccl_now_ns() + (int64_t)backoff_ms * 1000000;
    for (;;) {
      int state = dccl_wait_state(abort_flag, deadline_ns);
      if (state == DCCL_WAIT_ABORTED)
        return dccl_error(ncclRemoteError, "socket: aborted while connecting to %s",
                          dccl_socket_addr_str(addr, buf, sizeof(buf)));
      if (state == DCCL_WAIT_TIMED_OUT)
        return dccl_error(ncclRemoteError, "socket: could not connect to %s: %s",
                          dccl_socket_addr_str(addr, buf, sizeof(buf)), strerror(last_err));
      int64_t left_ms = (wake - dccl_now_ns()) / 1000000;
      if (left_ms <= 0) break;
      int slice = dccl_poll_slice_ms(deadline_ns);
      poll(NULL, 0, left_ms < slice ? (int)left_ms : slice);
    }
    if (backoff_ms < 500) backoff_ms *= 2;
  }
}

ncclResult_t dccl_socket_connect(const struct sockaddr_storage *addr, int timeout_ms, int *fd) {
  int64_t deadline = dccl_now_ns() + (int64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000000;
  return dccl_socket_connect_wait(addr, deadline, NULL, fd);
}

ncclResult_t dccl_socket_send_wait(int fd, const void *data, size_t size, _Atomic int *abort_flag,
                                   int64_t deadline_ns) {
  const char *p = data;
  while (size > 0) {
    ssize_t n = send(fd, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      return dccl_error(ncclRemoteError, "socket send failed: %s", strerror(errno));
    DCCLCHECK(dccl_wait_check(abort_flag, deadline_ns, "sending"));
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    if (poll(&pfd, 1, dccl_poll_slice_ms(deadline_ns)) < 0 && errno != EINTR)
      return dccl_error(ncclSystemError, "poll failed: %s", strerror(errno));
  }
  return ncclSuccess;
}

ncclResult_t dccl_socket_recv_wait(int fd, void *data, size_t size, _Atomic int *abort_flag, int64_t deadline_ns) {
  char *p = data;
  while (size > 0) {
    ssize_t n = recv(fd, p, size, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= (size_t)n;
      continue;
    }
    if (n == 0) return dccl_error(ncclRemoteError, "socket closed by the remote side");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return dccl_error(ncclRemoteError, "socket recv failed: %s", strerror(errno));
    DCCLCHECK(dccl_wait_check(abort_flag, deadline_ns, "receiving"));
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, dccl_poll_slice_ms(deadline_ns)) < 0 && errno != EINTR)
      return dccl_error(ncclSystemError, "poll failed: %s", strerror(errno));
  }
  return ncclSuccess;
}

ncclResult_t dccl_socket_send_all(int fd, const void *data, size_t size) {
  return dccl_socket_send_wait(fd, data, size, NULL, 0);
}

ncclResult_t dccl_socket_recv_all(int fd, void *data, size_t size, _Atomic int *abort_flag) {
  return dccl_socket_recv_wait(fd, data, size, abort_flag, 0);
}
