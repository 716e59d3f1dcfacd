/* TCP helpers for the bootstrap and the socket transport: choosing the interface, listening, connecting with
 * retries, and full sends/receives that honour a deadline and an abort flag. */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "core/debug.h"
#include "core/params.h"

int64_t dccl_deadline_after_s(int64_t seconds) {
  return seconds > 0 ? dccl_now_ns() + seconds * 1000000000ll : 0;
}

int dccl_wait_state(_Atomic int *abort_flag, int64_t deadline_ns) {
  if (abort_flag && atomic_load_explicit(abort_flag, memory_order_acquire)) return DCCL_WAIT_ABORTED;
  if (deadline_ns && dccl_now_ns() >= deadline_ns) return DCCL_WAIT_TIMED_OUT;
  return DCCL_WAIT_OK;
}

ncclResult_t dccl_wait_check(_Atomic int *abort_flag, int64_t deadline_ns, const char *what) {
  switch (dccl_wait_state(abort_flag, deadline_ns)) {
    case DCCL_WAIT_ABORTED:
      return dccl_error(ncclRemoteError, "socket: aborted while %s", what);
    case DCCL_WAIT_TIMED_OUT:
      return dccl_error(ncclRemoteError, "socket: timed out while %s", what);
    default:
      return ncclSuccess;
  }
}

int dccl_poll_slice_ms(int64_t deadline_ns) {
  if (!deadline_ns) return DCCL_POLL_SLICE_MS;
  int64_t left_ms = (deadline_ns - dccl_now_ns()) / 1000000 + 1;
  if (left_ms < 0) return 0;
  return left_ms < DCCL_POLL_SLICE_MS ? (int)left_ms : DCCL_POLL_SLICE_MS;
}

socklen_t dccl_sockaddr_len(const struct sockaddr_storage *addr) {
  return addr->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

const char *dccl_socket_addr_str(const struct sockaddr_storage *addr, char *buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr->ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
  } else if (addr->ss_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
  } else {
    snprintf(buf, len, "<family %d>", addr->ss_family);
  }
  return buf;
}

void dccl_wire_addr_from_sockaddr(struct dccl_wire_addr *wire, const struct sockaddr_storage *addr) {
  memset(wire, 0, sizeof(*wire));
  wire->family = addr->ss_family;
  if (addr->ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
    wire->port = in->sin_port;
    memcpy(wire->addr, &in->sin_addr, 4);
  } else if (addr->ss_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
    wire->port = in6->sin6_port;
    wire->scope_id = in6->sin6_scope_id;
    memcpy(wire->addr, &in6->sin6_addr, 16);
  }
}

ncclResult_t dccl_wire_addr_to_sockaddr(const struct dccl_wire_addr *wire, struct sockaddr_storage *addr) {
  memset(addr, 0, sizeof(*addr));
  if (wire->family == AF_INET) {
    struct sockaddr_in *in = (struct sockaddr_in *)addr;
    in->sin_family = AF_INET;
    in->sin_port = wire->port;
    memcpy(&in->sin_addr, wire->addr, 4);
  } else if (wire->family == AF_INET6) {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)addr;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = wire->port;
    in6->sin6_scope_id = wire->scope_id;
    memcpy(&in6->sin6_addr, wire->addr, 16);
  } else {
    return dccl_error(ncclInvalidArgument, "socket: address family %u is neither IPv4 nor IPv6", wire->family);
  }
  if (wire->port == 0) return dccl_error(ncclInvalidArgument, "socket: address has port 0");
  return ncclSuccess;
}

ncclResult_t dccl_random_bytes(void *buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = getrandom((char *)buf + got, len - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return dccl_error(ncclSystemError, "getrandom failed: %s", strerror(errno));
    }
    got += (size_t)n;
  }
  return ncclSuccess;
}

int dccl_secret_equal(const uint8_t *a, const uint8_t *b) {
  uint8_t diff = 0;
  for (int i = 0; i < DCCL_SECRET_BYTES; i++) diff |= (uint8_t)(a[i] ^ b[i]);
  return diff == 0;
}

/* ---- Choosing the interface ---- */

enum ifname_mode { IFNAME_AUTO, IFNAME_PREFIX, IFNAME_EXACT, IFNAME_EXCLUDE };

/* Does `name` match one entry of the comma-separated `list` (exactly or as a prefix)? */
static int ifname_in_list(const char *name, const char *list, int exact) {
  const char *p = list;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > 0) {
      if (exact ? (strlen(name) == len && strncmp(name, p, len) == 0) : strncmp(name, p, len) == 0) return 1;
    }
    if (!end) break;
    p = end + 1;
  }
  return 0;
}

static int is_loopback_if(const struct ifaddrs *ifa) {
  return (ifa->ifa_flags & IFF_LOOPBACK) != 0;
}

static int is_link_local_v6(const struct sockaddr *sa) {
  if (sa->sa_family != AF_INET6) return 0;
  return IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* Whether this interface may be used under the user's settings; loopback and bridges are handled by the caller. */
static int ifname_allowed(const char *name, enum ifname_mode mode, const char *list) {
  switch (mode) {
    case IFNAME_PREFIX:
      return ifname_in_list(name, list, 0);
    case IFNAME_EXACT:
      return ifname_in_list(name, list, 1);
    case IFNAME_EXCLUDE:
      return !ifname_in_list(name, list, 0);
    default:
      return strncmp(name, "docker", 6) != 0 && strncmp(name, "virbr", 5) != 0;
  }
}

/* One pass over the interfaces: the first usable address of `family` (AF_UNSPEC: any). Loopback is taken only if
 * `want_loopback`; IPv6 link-local only if `allow_link_local`. */
static int pick_address(struct ifaddrs *list, enum ifname_mode mode, const char *names, int family, int want_loopback,
                        int allow_link_local, struct sockaddr_storage *out, const char **ifname) {
  for (struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) continue;
    int fam = ifa->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (family != AF_UNSPEC && fam != family) continue;
    if (is_loopback_if(ifa) != want_loopback) continue;
    if (!allow_link_local && is_link_local_v6(ifa->ifa_addr)) continue;
    if (!ifname_allowed(ifa->ifa_name, mode, names)) continue;
    memset(out, 0, sizeof(*out));
    memcpy(out, ifa->ifa_addr, fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
    *ifname = ifa->ifa_name;
    return 1;
  }
  return 0;
}

static ncclResult_t parse_family(int *family) {
  const char *s = dccl_param_str(DCCL_PARAM_SOCKET_FAMILY);
  if (!s || !*s) {
    *family = AF_UNSPEC;
    return ncclSuccess;
  }
  if (strcasecmp(s, "AF_INET") == 0 || strcasecmp(s, "inet") == 0 || strcmp(s, "4") == 0) {
    *family = AF_INET;
  } else if (strcasecmp(s, "AF_INET6") == 0 || strcasecmp(s, "inet6") == 0 || strcmp(s, "6") == 0) {
    *family = AF_INET6;
  } else {
    return dccl_error(ncclInvalidArgument, "DCCL_SOCKET_FAMILY=%s: expected AF_INET or AF_INET6", s);
  }
  return ncclSuccess;
}

ncclResult_t dccl_socket_local_addr(struct sockaddr_storage *addr) {
  int family = AF_UNSPEC;
  DCCLCHECK(parse_family(&family));
  const char *setting = dccl_param_str(DCCL_PARAM_SOCKET_IFNAME);
  if (!setting) setting = "";
  enum ifname_mode mode = IFNAME_AUTO;
  const char *names = setting;
  if (setting[0] == '^') {
    mode = IFNAME_EXCLUDE;
    names = setting + 1;
  } else if (setting[0] == '=') {
    mode = IFNAME_EXACT;
    names = setting + 1;
  } else if (setting[0])
    mode = IFNAME_PREFIX;

  struct ifaddrs *list = NULL;
  if (getifaddrs(&list) != 0) return dccl_error(ncclSystemError, "getifaddrs failed: %s", strerror(errno));
  /* Families in order of preference: IPv4 first when either will do, since it needs no scope. */
  int families[2] = {family == AF_UNSPEC ? AF_INET : family, family == AF_UNSPEC ? AF_INET6 : family};
  const char *ifname = NULL;
  int found = 0;
  if (mode == IFNAME_PREFIX || mode == IFNAME_EXACT) {
    /* The user named interfaces: loopback is as good as any. */
    for (int f = 0; f < 2 && !found; f++)
      for (int lo = 0; lo < 2 && !found; lo++)
        found = pick_address(list, mode, names, families[f], lo, 0, addr, &ifname) ||
                pick_address(list, mode, names, families[f], lo, 1, addr, &ifname);
  } else {
    for (int f = 0; f < 2 && !found; f++) found = pick_address(list, mode, names, families[f], 0, 0, addr, &ifname);
    for (int f = 0; f < 2 && !found; f++) found = pick_address(list, mode, names, families[f], 0, 1, addr, &ifname);
    for (int f = 0; f < 2 && !found; f++) found = pick_address(list, mode, names, families[f], 1, 0, addr, &ifname);
  }
  ncclResult_t res = ncclSuccess;
  if (!found) {
    res = dccl_error(ncclSystemError,
                     "no usable network interface (DCCL_SOCKET_IFNAME=\"%s\", DCCL_SOCKET_FAMILY=\"%s\")", setting,
                     family == AF_INET    ? "AF_INET"
                     : family == AF_INET6 ? "AF_INET6"
                                          : "");
  } else {
    char buf[80];
    DCCL_INFO(DCCL_NET | DCCL_BOOTSTRAP, "using interface %s address %s", ifname,
              dccl_socket_addr_str(addr, buf, sizeof(buf)));
    if (addr->ss_family == AF_INET)
      ((struct sockaddr_in *)addr)->sin_port = 0;
    else
      ((struct sockaddr_in6 *)addr)->sin6_port = 0;
  }
  freeifaddrs(list);
  return res;
}

/* ---- Listening, connecting, moving bytes ---- */

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
