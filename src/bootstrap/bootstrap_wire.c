/* The bootstrap's wire helpers: fixed-size addresses, random secrets and their comparison. */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/random.h>

#include "bootstrap/bootstrap_internal.h"
#include "util/error.h"

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
