/* Device discovery and the DCCL_IB_HCA filter. */
#include "transports/net_ib/ib_device.h"

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/params.h"

static int entry_matches(const char *entry, size_t len, const char *name, int port) {
  int exact = len > 0 && entry[0] == '=';
  if (exact) entry++, len--;
  const char *colon = memchr(entry, ':', len);
  size_t name_len = colon ? (size_t)(colon - entry) : len;
  if (colon && atoi(colon + 1) != port) return 0;
  if (exact) return strlen(name) == name_len && strncmp(name, entry, name_len) == 0;
  return strncmp(name, entry, name_len) == 0;
}

int dccl_ib_hca_match(const char *spec, const char *name, int port) {
  if (!spec || !spec[0]) return 1;
  int exclude = spec[0] == '^';
  if (exclude) spec++;
  int hit = 0;
  for (const char *p = spec; *p && !hit;) {
    size_t len = strcspn(p, ",");
    if (len > 0) hit = entry_matches(p, len, name, port);
    p += len + (p[len] == ',');
  }
  return exclude ? !hit : hit;
}

static struct dccl_ib_local local;
static pthread_once_t local_once = PTHREAD_ONCE_INIT;

/* Looks at each port of one device; fills `local` with the first active one passing the filter. */
static int pick_port(struct ibv_device *dev, const char *spec, char *seen, size_t seen_len) {
  const char *name = ibv_get_device_name(dev);
  struct ibv_context *ctx = ibv_open_device(dev);
  if (!ctx) {
    snprintf(seen + strlen(seen), seen_len - strlen(seen), " %s(cannot open)", name);
    return 0;
  }
  struct ibv_device_attr attr;
  int found = 0;
  if (ibv_query_device(ctx, &attr) == 0) {
    for (int port = 1; port <= attr.phys_port_cnt && !found; port++) {
      struct ibv_port_attr pa;
      if (ibv_query_port(ctx, (uint8_t)port, &pa) != 0) continue;
      int ok = dccl_ib_hca_match(spec, name, port);
      snprintf(seen + strlen(seen), seen_len - strlen(seen), " %s:%d(%s%s)", name, port,
               ibv_port_state_str(pa.state), ok ? "" : ", filtered out");
      if (!ok || pa.state != IBV_PORT_ACTIVE) continue;
      local.ready = 1;
      snprintf(local.name, sizeof(local.name), "%s", name);
      local.port = port;
      local.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
      found = 1;
    }
  }
  ibv_close_device(ctx);
  return found;
}

static void discover(void) {
  const char *spec = dccl_param_str(DCCL_PARAM_IB_HCA);
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  char seen[160] = "";
  for (int i = 0; list && i < n && !local.ready; i++) pick_port(list[i], spec, seen, sizeof(seen));
  if (list) ibv_free_device_list(list);
  if (local.ready) {
    DCCL_INFO(DCCL_NET, "net_ib: using %s port %d (%s)", local.name, local.port,
              local.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand");
  } else {
    snprintf(local.why, sizeof(local.why), "%s", n == 0 ? "no RDMA device"
                                                        : "no active RDMA port passes DCCL_IB_HCA; ports:");
    if (n > 0) snprintf(local.why + strlen(local.why), sizeof(local.why) - strlen(local.why), "%s", seen);
    DCCL_INFO(DCCL_NET, "net_ib not available: %s", local.why);
  }
}

const struct dccl_ib_local *dccl_ib_local(void) {
  pthread_once(&local_once, discover);
  return &local;
}
