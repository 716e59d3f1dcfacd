/* The process's net_ib contexts: one per RDMA port, shared by every communicator that uses it. A context is the
 * opened device, one protection domain, one completion channel for every link's CQ, the registration cache, and
 * one proxy thread that round-robins over the links of all communicators. Frameworks create dozens of
 * communicators per process; a context each would cost a PD, a thread and registrations per communicator.
 *
 * The proxy never waits for a peer, and each link carries its own error and abort state, so one communicator's
 * failure (a dead peer, an abort) leaves the other communicators' links running. A forked child forgets the table
 * without touching it: its parent's contexts, PDs and proxy threads are not its to use or free. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/net_ib/ib_private.h"
#include "util/error.h"

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dccl_ib_ctx *table; /* the live contexts of this process */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void forget_in_child(void) {
  pthread_mutex_init(&table_lock, NULL);
  table = NULL; /* the parent's: never freed here */
}
static void register_atfork(void) { (void)pthread_atfork(NULL, NULL, forget_in_child); }

static int proxy_progress(void *arg) {
  struct dccl_ib_ctx *ic = arg;
  int moved = 0;
  pthread_mutex_lock(&ic->lock);
  for (struct dccl_ib_link *l = ic->links; l; l = l->next) moved += dccl_ib_link_progress(l);
  pthread_mutex_unlock(&ic->lock);
  return moved;
}

/* Before sleeping: ask every CQ for an event on its next completion, then look once more, so a completion that
 * arrived before the request is not slept through. */
static int proxy_arm(void *arg) {
  struct dccl_ib_ctx *ic = arg;
  pthread_mutex_lock(&ic->lock);
  for (struct dccl_ib_link *l = ic->links; l; l = l->next)
    if (!l->cq_armed && ibv_req_notify_cq(l->cq, 0) == 0) l->cq_armed = 1;
  pthread_mutex_unlock(&ic->lock);
  return proxy_progress(ic) > 0;
}

static void proxy_drain(void *arg) {
  struct dccl_ib_ctx *ic = arg;
  struct ibv_cq *cq;
  void *ctx;
  pthread_mutex_lock(&ic->lock);
  while (ibv_get_cq_event(ic->channel, &cq, &ctx) == 0) {
    ibv_ack_cq_events(cq, 1);
    ((struct dccl_ib_link *)ctx)->cq_armed = 0;
  }
  pthread_mutex_unlock(&ic->lock);
}

static const struct dccl_proxy_ops ib_proxy_ops = {proxy_progress, proxy_arm, proxy_drain};

static ncclResult_t open_device(struct dccl_ib_ctx *ic, const struct dccl_ib_local *dev) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  for (int i = 0; list && i < n && !ic->ctx; i++)
    if (!strcmp(ibv_get_device_name(list[i]), dev->name)) ic->ctx = ibv_open_device(list[i]);
  if (list) ibv_free_device_list(list);
  if (!ic->ctx) return dccl_error(ncclSystemError, "net_ib: cannot open RDMA device %s", dev->name);
  snprintf(ic->device, sizeof(ic->device), "%s", dev->name);
  ic->port = dev->port;
  if (ibv_query_device(ic->ctx, &ic->dev_attr) || ibv_query_port(ic->ctx, (uint8_t)ic->port, &ic->port_attr))
    return dccl_error(ncclSystemError, "net_ib: cannot query %s port %d: %s", dev->name, ic->port, strerror(errno));
  if (!(ic->pd = ibv_alloc_pd(ic->ctx)))
    return dccl_error(ncclSystemError, "net_ib: cannot allocate a protection domain on %s: %s", dev->name,
                      strerror(errno));
  if (!(ic->channel = ibv_create_comp_channel(ic->ctx)))
    return dccl_error(ncclSystemError, "net_ib: cannot create a completion channel on %s: %s", dev->name,
                      strerror(errno));
  int flags = fcntl(ic->channel->fd, F_GETFL);
  if (flags < 0 || fcntl(ic->channel->fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return dccl_error(ncclSystemError, "net_ib: cannot make the completion channel non-blocking: %s", strerror(errno));
  return ncclSuccess;
}

/* The port's GID table, with each entry's type, read once. */
static void read_gids(struct dccl_ib_ctx *ic) {
  if (ic->port_attr.link_layer != IBV_LINK_LAYER_ETHERNET) return; /* InfiniBand routes by LID */
  struct ibv_gid_entry entries[DCCL_IB_MAX_GIDS];
  ssize_t n = ibv_query_gid_table(ic->ctx, entries, DCCL_IB_MAX_GIDS, 0);
  for (ssize_t i = 0; i < n; i++) {
    if (entries[i].port_num != (uint32_t)ic->port) continue;
    struct dccl_ib_gid_entry *e = &ic->gids[ic->ngids++];
    e->index = entries[i].gid_index;
    e->type = entries[i].gid_type == IBV_GID_TYPE_ROCE_V2   ? DCCL_IB_GID_ROCE_V2
              : entries[i].gid_type == IBV_GID_TYPE_ROCE_V1 ? DCCL_IB_GID_ROCE_V1
                                                            : DCCL_IB_GID_IB;
    memcpy(e->gid, entries[i].gid.raw, 16);
  }
}

static void destroy(struct dccl_ib_ctx *ic) {
  dccl_proxy_stop(&ic->proxy);
  if (ic->regcache) {
    DCCL_INFO(DCCL_NET, "net_ib: %llu slots were sent from registered user buffers without a copy",
              (unsigned long long)atomic_load(&ic->zero_copy_slots));
    dccl_ib_regcache_destroy(ic->regcache);
  }
  if (ic->channel) ibv_destroy_comp_channel(ic->channel);
  if (ic->pd) ibv_dealloc_pd(ic->pd);
  if (ic->ctx) ibv_close_device(ic->ctx);
  pthread_mutex_destroy(&ic->lock);
  free(ic);
}

static ncclResult_t create(const struct dccl_ib_local *dev, int oversubscribed, struct dccl_ib_ctx **out) {
  struct dccl_ib_ctx *ic = calloc(1, sizeof(*ic));
  if (!ic) return dccl_error(ncclSystemError, "out of memory for net_ib state");
  pthread_mutex_init(&ic->lock, NULL);
  ncclResult_t res = open_device(ic, dev);
  struct dccl_ib_registrar reg;
  if (res == ncclSuccess && (dccl_ib_verbs_registrar(ic->pd, IBV_ACCESS_LOCAL_WRITE, &reg) != 0 ||
                             !(ic->regcache = dccl_ib_regcache_create(&reg, NULL))))
    res = dccl_error(ncclSystemError, "net_ib: cannot create the registration cache on %s", dev->name);
  /* DCCL_NET_GDR=1 without support is reported here (WARN) but does not stop host-buffer traffic. */
  if (res == ncclSuccess && dccl_gdr_choose(0, &ic->gdr) != ncclSuccess) ic->gdr.path = DCCL_GDR_STAGING;
  if (res == ncclSuccess) {
    read_gids(ic);
    res = dccl_proxy_start(&ic->proxy, &ib_proxy_ops, ic, ic->channel->fd, oversubscribed, 0);
  }
  if (res != ncclSuccess) {
    destroy(ic);
    return res;
  }
  DCCL_INFO(DCCL_NET, "net_ib: opened %s port %d for this process (one protection domain and proxy thread)",
            ic->device, ic->port);
  *out = ic;
  return ncclSuccess;
}

ncclResult_t dccl_ib_ctx_acquire(const struct dccl_ib_local *dev, int oversubscribed, struct dccl_ib_ctx **out) {
  pthread_once(&atfork_once, register_atfork);
  pthread_mutex_lock(&table_lock);
  struct dccl_ib_ctx *ic = table;
  while (ic && !(ic->port == dev->port && !strcmp(ic->device, dev->name))) ic = ic->next;
  ncclResult_t res = ncclSuccess;
  if (!ic) { /* made under the lock: two first communicators must not open the port twice */
    res = create(dev, oversubscribed, &ic);
    if (res == ncclSuccess) {
      ic->next = table;
      table = ic;
    }
  }
  if (res == ncclSuccess) {
    ic->refs++;
    ic->oversubscribed_refs += oversubscribed != 0;
    dccl_proxy_set_oversubscribed(&ic->proxy, ic->oversubscribed_refs > 0);
    *out = ic;
  }
  pthread_mutex_unlock(&table_lock);
  return res;
}

void dccl_ib_ctx_release(struct dccl_ib_ctx *ic, int oversubscribed) {
  pthread_mutex_lock(&table_lock);
  int last = --ic->refs == 0;
  ic->oversubscribed_refs -= oversubscribed != 0;
  if (last) {
    for (struct dccl_ib_ctx **p = &table; *p; p = &(*p)->next)
      if (*p == ic) {
        *p = ic->next;
        break;
      }
  } else {
    dccl_proxy_set_oversubscribed(&ic->proxy, ic->oversubscribed_refs > 0);
  }
  pthread_mutex_unlock(&table_lock);
  if (last) destroy(ic);
}

void dccl_ib_ctx_add_link(struct dccl_ib_ctx *ic, struct dccl_ib_link *l) {
  pthread_mutex_lock(&ic->lock);
  l->next = ic->links;
  ic->links = l;
  pthread_mutex_unlock(&ic->lock);
}

void dccl_ib_ctx_remove_link(struct dccl_ib_ctx *ic, struct dccl_ib_link *l) {
  pthread_mutex_lock(&ic->lock);
  for (struct dccl_ib_link **p = &ic->links; *p; p = &(*p)->next)
    if (*p == l) {
      *p = l->next;
      break;
    }
  pthread_mutex_unlock(&ic->lock);
}

int dccl_ib_ctx_count(void) {
  pthread_mutex_lock(&table_lock);
  int n = 0;
  for (struct dccl_ib_ctx *ic = table; ic; ic = ic->next) n++;
  pthread_mutex_unlock(&table_lock);
  return n;
}
