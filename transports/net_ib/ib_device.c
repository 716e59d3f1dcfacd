/* Device discovery and the DCCL_IB_HCA filter. */
#include "transports/net_ib/ib_device.h"

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo/pci_topo.h"
#include "util/cuda_driver.h"
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

/* The choice for each GPU of the process ([ordinal + 1]; [0]: no GPU), made when first asked. */
#define MAX_GPUS 64
struct choice {
  int made;
  struct dccl_ib_local local, rails[DCCL_IB_MAX_RAILS];
  int nrails;
};
static struct choice choices[MAX_GPUS + 1];
static pthread_mutex_t choices_lock = PTHREAD_MUTEX_INITIALIZER;

#define MAX_PORTS 16
struct port {
  char name[64], pci[16]; /* pci: the device's bus id, "" when it has none (soft-RoCE) */
  int port, link_layer;
};

/* The PCI bus id behind an RDMA device: the last part of its sysfs device link. */
static void device_pci(const char *name, char *out, size_t len) {
  char path[160], target[256];
  out[0] = 0;
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device", name);
  ssize_t n = readlink(path, target, sizeof(target) - 1);
  if (n <= 0) return;
  target[n] = 0;
  const char *base = strrchr(target, '/');
  base = base ? base + 1 : target;
  if (strlen(base) == 12 && base[4] == ':' && base[7] == ':' && base[10] == '.') snprintf(out, len, "%s", base);
}

/* Adds each port of one device that is active and passes the filter to ports[]; notes every port in `seen`. */
static void list_ports(struct ibv_device *dev, const char *spec, struct port *ports, int *n, char *seen,
                       size_t seen_len) {
  const char *name = ibv_get_device_name(dev);
  struct ibv_context *ctx = ibv_open_device(dev);
  if (!ctx) {
    snprintf(seen + strlen(seen), seen_len - strlen(seen), " %s(cannot open)", name);
    return;
  }
  struct ibv_device_attr attr;
  if (ibv_query_device(ctx, &attr) == 0) {
    for (int port = 1; port <= attr.phys_port_cnt && *n < MAX_PORTS; port++) {
      struct ibv_port_attr pa;
      if (ibv_query_port(ctx, (uint8_t)port, &pa) != 0) continue;
      int ok = dccl_ib_hca_match(spec, name, port);
      snprintf(seen + strlen(seen), seen_len - strlen(seen), " %s:%d(%s%s)", name, port,
               ibv_port_state_str(pa.state), ok ? "" : ", filtered out");
      if (!ok || pa.state != IBV_PORT_ACTIVE) continue;
      struct port *p = &ports[(*n)++];
      snprintf(p->name, sizeof(p->name), "%s", name);
      device_pci(name, p->pci, sizeof(p->pci));
      p->port = port;
      p->link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
    }
  }
  ibv_close_device(ctx);
}

int dccl_ib_rails_of(const int *hops, const int *link_layer, int n, int best, int *out, int max) {
  int count = 0, first = best >= 0 ? best : 0;
  if (n <= 0 || max <= 0) return 0;
  out[count++] = first;
  for (int i = 0; i < n && count < max; i++)
    if (i != first && link_layer[i] == link_layer[first] && (best < 0 || hops[i] == hops[best])) out[count++] = i;
  return count;
}

/* Of several ports, the one nearest GPU `ordinal`, or the process's CPUs without one, in hwloc's tree (-1 where
 * that cannot be told); hops[] gets each port's distance. Writes why into `why`. */
static int nearest_port(const struct port *ports, int n, int ordinal, int *hops, char *why, size_t len) {
  char gpu[32] = "";
  unsigned char uuid[16];
  if (ordinal >= 0 && !dccl_cuda_device_identity(ordinal, uuid, gpu, sizeof(gpu))) gpu[0] = 0;
  const char *pcis[MAX_PORTS];
  for (int i = 0; i < n; i++) pcis[i] = ports[i].pci[0] ? ports[i].pci : NULL;
  int best = dccl_pci_nearest(gpu[0] ? gpu : NULL, pcis, n, hops);
  if (best < 0) {
    snprintf(why, len, "the first of %d (hwloc cannot place them)", n);
    return -1;
  }
  int w = snprintf(why, len, "nearest to %s%s in hwloc's tree:", gpu[0] ? "GPU " : "this process's CPUs",
                   gpu[0] ? gpu : "");
  for (int i = 0; i < n && w > 0 && (size_t)w < len; i++)
    w += snprintf(why + w, len - (size_t)w, " %.63s:%d %d hops%s", ports[i].name, ports[i].port, hops[i],
                  i + 1 < n ? "," : "");
  return best;
}

static void discover(struct choice *c, int ordinal) {
  struct dccl_ib_local *rails = c->rails, *local = &c->local;
  const char *spec = dccl_param_str(DCCL_PARAM_IB_HCA);
  int n = 0, nports = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  struct port ports[MAX_PORTS];
  char seen[160] = "", why[400] = "the only active port";
  for (int i = 0; list && i < n; i++) list_ports(list[i], spec, ports, &nports, seen, sizeof(seen));
  if (list) ibv_free_device_list(list);
  if (nports > 0) {
    int hops[MAX_PORTS], layers[MAX_PORTS], picked[DCCL_IB_MAX_RAILS];
    int best = nports > 1 ? nearest_port(ports, nports, ordinal, hops, why, sizeof(why)) : 0;
    for (int i = 0; i < nports; i++) layers[i] = ports[i].link_layer;
    c->nrails = dccl_ib_rails_of(hops, layers, nports, best, picked, DCCL_IB_MAX_RAILS);
    char names[200] = "";
    for (int r = 0; r < c->nrails; r++) {
      const struct port *p = &ports[picked[r]];
      rails[r] = (struct dccl_ib_local){.ready = 1, .port = p->port, .link_layer = p->link_layer};
      snprintf(rails[r].name, sizeof(rails[r].name), "%.63s", p->name);
      snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%.63s:%d", r ? ", " : "", p->name, p->port);
    }
    *local = rails[0];
    char gpu[24] = "no GPU";
    if (ordinal >= 0) snprintf(gpu, sizeof(gpu), "GPU %d", ordinal);
    DCCL_INFO(DCCL_NET, "net_ib for %s: using %s port %d (%s): %s; rails (lane mod %d): %s", gpu, local->name,
              local->port, local->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", why, c->nrails,
              names);
  } else {
    snprintf(local->why, sizeof(local->why), "%s", n == 0 ? "no RDMA device"
                                                          : "no active RDMA port passes DCCL_IB_HCA; ports:");
    if (n > 0) snprintf(local->why + strlen(local->why), sizeof(local->why) - strlen(local->why), "%s", seen);
    DCCL_INFO(DCCL_NET, "net_ib not available: %s", local->why);
  }
}

static struct choice *choice_for(int ordinal) {
  if (ordinal < -1 || ordinal >= MAX_GPUS) ordinal = -1;
  struct choice *c = &choices[ordinal + 1];
  pthread_mutex_lock(&choices_lock);
  if (!c->made) {
    discover(c, ordinal);
    c->made = 1;
  }
  pthread_mutex_unlock(&choices_lock);
  return c;
}

const struct dccl_ib_local *dccl_ib_local(int ordinal) { return &choice_for(ordinal)->local; }

int dccl_ib_rails(int ordinal, const struct dccl_ib_local **out) {
  struct choice *c = choice_for(ordinal);
  *out = c->rails;
  return c->nrails;
}
