/* The transport registry (registry.h). The table below is the one place that lists transports. */
#include "transports/registry.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"

/* Priority order: shared memory inside a host, then RDMA, then TCP, which reaches every peer. A link takes only
 * transports that carry its buffers (p2p, then staged: device buffers; the others: host buffers). */
static const struct dccl_transport *const providers[] = {
#ifdef DCCL_HAVE_DEVICE_CODE
    &dccl_transport_p2p,    /* device links only */
    &dccl_transport_staged, /* device links only: through pinned shared host memory */
#endif
    &dccl_transport_shm,
#ifdef DCCL_HAVE_IBVERBS
    &dccl_transport_ib,
#endif
    &dccl_transport_socket,
};
#define NPROVIDERS ((int)(sizeof(providers) / sizeof(providers[0])))
_Static_assert(NPROVIDERS <= DCCL_MAX_TRANSPORTS, "raise DCCL_MAX_TRANSPORTS");

static struct dccl_transport registered[DCCL_MAX_TRANSPORTS];
static int nregistered;
static char names[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* ---- the "not supported" defaults ---- */
static void no_describe(void *mine) {
  (void)mine;
}
static ncclResult_t no_start(struct dccl_conn *conn) {
  return ncclSuccess;
}
static ncclResult_t no_progress(struct dccl_conn *conn) {
  return ncclSuccess;
}
static int no_send_from(struct dccl_conn *conn, uint64_t tail, const void *src, uint64_t bytes) {
  return 0;
}
static int always_flushed(struct dccl_conn *conn) {
  return 1;
}
static ncclResult_t peer_assumed_alive(struct dccl_conn *conn) {
  return ncclSuccess;
}
static void no_abort(struct dccl_conn *conn) {
  (void)conn;
}
static void no_close(struct dccl_conn *conn) {
  (void)conn;
}
static void no_comm_free(void *state, int aborted) {
  (void)state;
}
static const char *no_host_view(const struct dccl_conn *conn) {
  (void)conn;
  return NULL;
}

int dccl_transport_complete(struct dccl_transport *out, const struct dccl_transport *table, int index, char *why,
                            size_t why_len) {
  size_t have = table->size;
  if (have < offsetof(struct dccl_transport, can_connect) + sizeof(table->can_connect)) {
    snprintf(why, why_len, "its ops table is %zu bytes: too small to hold the required ops", have);
    return -1;
  }
  memset(out, 0, sizeof(*out));
  memcpy(out, table, have < sizeof(*out) ? have : sizeof(*out));
  out->size = sizeof(*out);
  out->index = index;
  const char *missing = !out->name          ? "name"
                        : !out->can_connect ? "can_connect"
                        : !out->setup       ? "setup"
                        : !out->connect     ? "connect"
                                            : NULL;
  if (missing) {
    snprintf(why, why_len, "it has no %s", missing);
    return -1;
  }
  if (!out->unreachable) out->unreachable = "";
  if (!out->buffers) out->buffers = DCCL_BUFFERS_HOST;
  if (!out->describe_self) out->describe_self = no_describe;
  if (!out->start) out->start = no_start;
  if (!out->progress) out->progress = no_progress;
  if (!out->send_from) out->send_from = no_send_from;
  if (!out->send_flushed) out->send_flushed = always_flushed;
  if (!out->check_peer) out->check_peer = peer_assumed_alive;
  if (!out->abort) out->abort = no_abort;
  if (!out->close) out->close = no_close;
  if (!out->comm_free) out->comm_free = no_comm_free;
  if (!out->host_view) out->host_view = no_host_view;
  return 0;
}

static void register_all(void) {
  for (int i = 0; i < NPROVIDERS; i++) {
    char why[128];
    if (dccl_transport_complete(&registered[nregistered], providers[i], nregistered, why, sizeof why) != 0) {
      DCCL_WARN(DCCL_INIT, "transport %s left out: %s", providers[i]->name ? providers[i]->name : "(unnamed)", why);
      continue;
    }
    size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", registered[nregistered].name);
    nregistered++;
  }
}

int dccl_transport_count(void) {
  pthread_once(&once, register_all);
  return nregistered;
}

const struct dccl_transport *dccl_transport_at(int index) {
  return index >= 0 && index < dccl_transport_count() ? &registered[index] : NULL;
}

const struct dccl_transport *dccl_transport_find(const char *name) {
  for (int i = 0; i < dccl_transport_count(); i++)
    if (!strcasecmp(name, registered[i].name) || (registered[i].alias && !strcasecmp(name, registered[i].alias)))
      return &registered[i];
  return NULL;
}

const char *dccl_transport_names(void) {
  dccl_transport_count();
  return names;
}
