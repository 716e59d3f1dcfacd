/* GID selection: pure functions of the table, so tests can feed any table. */
#include "transports/net_ib/ib_gid.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int is_ipv4_mapped(const uint8_t g[16]) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g, prefix, sizeof(prefix)) == 0;
}
static int is_link_local(const uint8_t g[16]) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

/* The GID an address is written as: IPv4 mapped into ::ffff:0:0/96, IPv6 as is. */
static int addr_to_gid(const struct sockaddr_storage *a, uint8_t g[16]) {
  memset(g, 0, 16);
  if (a->ss_family == AF_INET) {
    g[10] = g[11] = 0xff;
    memcpy(g + 12, &((const struct sockaddr_in *)a)->sin_addr, 4);
    return 1;
  }
  if (a->ss_family == AF_INET6) {
    memcpy(g, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
    return 1;
  }
  return 0;
}

const char *dccl_ib_gid_str(const uint8_t gid[16], char *buf, size_t len) {
  if (!inet_ntop(AF_INET6, gid, buf, (socklen_t)len)) snprintf(buf, len, "?");
  return buf;
}

static const char *type_name(uint32_t t) {
  return t == DCCL_IB_GID_ROCE_V2 ? "RoCEv2" : t == DCCL_IB_GID_ROCE_V1 ? "RoCEv1" : "IB";
}

static int chose(const struct dccl_ib_gid_entry *e, const char *reason, char *why, size_t why_len) {
  char g[64];
  snprintf(why, why_len, "GID index %u (%s %s): %s", e->index, type_name(e->type), dccl_ib_gid_str(e->gid, g, sizeof(g)),
           reason);
  return (int)e->index;
}

/* The first entry of `type` passing `want` (NULL: any). */
static const struct dccl_ib_gid_entry *first(const struct dccl_ib_gid_entry *t, int n, uint32_t type,
                                             int (*want)(const uint8_t *)) {
  for (int i = 0; i < n; i++)
    if (t[i].type == type && (!want || want(t[i].gid))) return &t[i];
  return NULL;
}
static int is_global_ipv6(const uint8_t *g) { return !is_ipv4_mapped(g) && !is_link_local(g); }

int dccl_ib_select_gid(const struct dccl_ib_gid_entry *t, int n, const struct sockaddr_storage *local,
                       int forced_index, char *why, size_t why_len) {
  if (forced_index >= 0) {
    for (int i = 0; i < n; i++)
      if ((int)t[i].index == forced_index) return chose(&t[i], "set by DCCL_IB_GID_INDEX", why, why_len);
    snprintf(why, why_len, "DCCL_IB_GID_INDEX=%d: the port's GID table has no such entry", forced_index);
    return -1;
  }
  uint8_t want[16];
  if (local && addr_to_gid(local, want)) {
    for (int i = 0; i < n; i++)
      if (t[i].type == DCCL_IB_GID_ROCE_V2 && memcmp(t[i].gid, want, 16) == 0)
        return chose(&t[i], "the address that routes to the peer", why, why_len);
  }
  const struct dccl_ib_gid_entry *e;
  if ((e = first(t, n, DCCL_IB_GID_ROCE_V2, is_ipv4_mapped)))
    return chose(&e[0], "first RoCEv2 IPv4 entry (no entry of the routed address)", why, why_len);
  if ((e = first(t, n, DCCL_IB_GID_ROCE_V2, is_global_ipv6)))
    return chose(&e[0], "first global RoCEv2 IPv6 entry", why, why_len);
  if ((e = first(t, n, DCCL_IB_GID_ROCE_V2, NULL))) return chose(&e[0], "first RoCEv2 entry", why, why_len);
  if ((e = first(t, n, DCCL_IB_GID_ROCE_V1, NULL))) return chose(&e[0], "no RoCEv2 entry; RoCEv1", why, why_len);
  snprintf(why, why_len, "the port's GID table has no RoCE entry (%d entries)", n);
  return -1;
}

int dccl_ib_route_source(const struct sockaddr_storage *peer, struct sockaddr_storage *local) {
  int fd = socket(peer->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  socklen_t len = peer->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  struct sockaddr_storage dst = *peer;
  /* connect() on a datagram socket only looks up the route; a port is needed but nothing is sent. */
  if (dst.ss_family == AF_INET) ((struct sockaddr_in *)&dst)->sin_port = htons(9);
  else ((struct sockaddr_in6 *)&dst)->sin6_port = htons(9);
  int ok = connect(fd, (struct sockaddr *)&dst, len) == 0;
  socklen_t llen = sizeof(*local);
  ok = ok && getsockname(fd, (struct sockaddr *)local, &llen) == 0;
  close(fd);
  return ok ? 0 : -1;
}
