/* Socket addresses: which local interface to use (DCCL_SOCKET_IFNAME / DCCL_SOCKET_FAMILY), lengths, and text for
 * logs. */
#include "util/net_addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "util/error.h"
#include "util/params.h"

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
