/* GID selection (transports/net_ib/ib_gid.c) and the DCCL_IB_HCA filter (ib_device.c), on made-up tables: the
 * RoCEv2 entry of the routed address wins wherever it sits, the fallbacks go in their documented order, a forced
 * index is honoured or refused, and the routing lookup finds a real local source address. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "transports/net_ib/ib_device.h"
#include "transports/net_ib/ib_gid.h"

static int passed, failed;

static void check(const char *name, int ok) {
  printf("%s: %s\n", ok ? "PASS" : "FAIL", name);
  if (ok) passed++;
  else failed++;
}

static struct dccl_ib_gid_entry entry(uint32_t index, uint32_t type, const char *addr) {
  struct dccl_ib_gid_entry e = {.index = index, .type = type};
  struct in_addr v4;
  if (inet_pton(AF_INET, addr, &v4) == 1) {
    e.gid[10] = e.gid[11] = 0xff;
    memcpy(e.gid + 12, &v4, 4);
  } else {
    inet_pton(AF_INET6, addr, e.gid);
  }
  return e;
}

/* A socket address from "10.0.0.5" or "2001:db8::5". */
static struct sockaddr_storage addr(const char *a) {
  struct sockaddr_storage s;
  memset(&s, 0, sizeof(s));
  if (inet_pton(AF_INET, a, &((struct sockaddr_in *)&s)->sin_addr) == 1) {
    s.ss_family = AF_INET;
  } else {
    s.ss_family = AF_INET6;
    inet_pton(AF_INET6, a, &((struct sockaddr_in6 *)&s)->sin6_addr);
  }
  return s;
}

static int pick(const struct dccl_ib_gid_entry *t, int n, const struct sockaddr_storage *local, int forced) {
  char why[256];
  int r = dccl_ib_select_gid(t, n, local, forced, why, sizeof(why));
  printf("  -> %d (%s)\n", r, why);
  return r;
}

/* A typical RoCE port with two addresses on its netdev: link-local v1/v2, then each address as v1 and v2. */
static void typical_table(void) {
  struct dccl_ib_gid_entry t[] = {
      entry(0, DCCL_IB_GID_ROCE_V1, "fe80::1"),     entry(1, DCCL_IB_GID_ROCE_V2, "fe80::1"),
      entry(2, DCCL_IB_GID_ROCE_V1, "10.0.0.5"),    entry(3, DCCL_IB_GID_ROCE_V2, "10.0.0.5"),
      entry(4, DCCL_IB_GID_ROCE_V1, "192.168.1.5"), entry(5, DCCL_IB_GID_ROCE_V2, "192.168.1.5"),
      entry(6, DCCL_IB_GID_ROCE_V2, "2001:db8::5"),
  };
  int n = (int)(sizeof(t) / sizeof(t[0]));
  struct sockaddr_storage a = addr("192.168.1.5"), b = addr("10.0.0.5"), c = addr("2001:db8::5");
  struct sockaddr_storage other = addr("172.16.0.9");
  check("routed IPv4 address picks its RoCEv2 entry (not the first)", pick(t, n, &a, -1) == 5);
  check("another routed IPv4 address picks its own", pick(t, n, &b, -1) == 3);
  check("routed IPv6 address picks its RoCEv2 entry", pick(t, n, &c, -1) == 6);
  check("unknown address: first RoCEv2 IPv4 entry", pick(t, n, &other, -1) == 3);
  check("no address: first RoCEv2 IPv4 entry", pick(t, n, NULL, -1) == 3);
  check("forced index is used as given", pick(t, n, &a, 2) == 2);
  check("forced index missing from the table is refused", pick(t, n, &a, 42) == -1);
}

static void fallback_order(void) {
  struct dccl_ib_gid_entry v6only[] = {entry(0, DCCL_IB_GID_ROCE_V2, "fe80::1"),
                                       entry(1, DCCL_IB_GID_ROCE_V2, "2001:db8::7")};
  check("no IPv4: a global RoCEv2 IPv6 entry before a link-local one", pick(v6only, 2, NULL, -1) == 1);
  struct dccl_ib_gid_entry ll[] = {entry(0, DCCL_IB_GID_ROCE_V1, "10.1.1.1"), entry(7, DCCL_IB_GID_ROCE_V2, "fe80::2")};
  check("any RoCEv2 entry before RoCEv1", pick(ll, 2, NULL, -1) == 7);
  struct dccl_ib_gid_entry v1[] = {entry(4, DCCL_IB_GID_ROCE_V1, "10.1.1.1")};
  check("RoCEv1 only: used", pick(v1, 1, NULL, -1) == 4);
  struct sockaddr_storage a = addr("10.1.1.1");
  check("a RoCEv1 entry of the routed address does not beat the rules", pick(v1, 1, &a, -1) == 4);
  check("empty table: none", pick(NULL, 0, NULL, -1) == -1);
}

static void routing_lookup(void) {
  struct sockaddr_storage peer = addr("127.0.0.1"), local;
  int r = dccl_ib_route_source(&peer, &local);
  char buf[64] = "";
  if (r == 0) inet_ntop(AF_INET, &((struct sockaddr_in *)&local)->sin_addr, buf, sizeof(buf));
  printf("  route to 127.0.0.1 from %s\n", buf);
  check("route lookup to loopback gives 127.0.0.1", r == 0 && !strcmp(buf, "127.0.0.1"));
}

static void hca_filter(void) {
  check("empty filter passes all", dccl_ib_hca_match("", "mlx5_0", 1));
  check("prefix matches", dccl_ib_hca_match("mlx5", "mlx5_1", 1));
  check("prefix does not match another device", !dccl_ib_hca_match("mlx5", "rxe0", 1));
  check("exact match needs the whole name", !dccl_ib_hca_match("=mlx5_1", "mlx5_10", 1));
  check("exact match", dccl_ib_hca_match("=mlx5_1", "mlx5_1", 1));
  check("port given: other port refused", !dccl_ib_hca_match("mlx5_0:2", "mlx5_0", 1));
  check("port given: that port passes", dccl_ib_hca_match("mlx5_0:2", "mlx5_0", 2));
  check("list: second entry matches", dccl_ib_hca_match("mlx4,rxe", "rxe0", 1));
  check("exclusion refuses the listed", !dccl_ib_hca_match("^rxe", "rxe0", 1));
  check("exclusion passes the others", dccl_ib_hca_match("^rxe", "mlx5_0", 1));
}

int main(void) {
  typical_table();
  fallback_order();
  routing_lookup();
  hca_filter();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
