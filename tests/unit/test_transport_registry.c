/* The transport registry (transports/registry.c): priority order, lookup by name and alias, and completed ops
 * tables, where every op a provider lacks, or that lies past the size it was built with, is a default. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "transports/registry.h"
#include "unit_check.h"

static int all_ops_set(const struct dccl_transport *t) {
  return t->describe_self && t->can_connect && t->setup && t->connect && t->start && t->progress && t->send_from &&
         t->send_flushed && t->check_peer && t->abort && t->close && t->comm_free && t->host_view && t->unreachable;
}

static void test_registered(void) {
  int n = dccl_transport_count();
  const char *want[] = {
#ifdef DCCL_HAVE_DEVICE_CODE
      "p2p",
      "staged",
#endif
      "shm",
#ifdef DCCL_HAVE_IBVERBS
      "net_ib",
#endif
      "socket"};
  char want_names[64] = "";
  int nwant = (int)(sizeof(want) / sizeof(want[0]));
  check(n == nwant, "%d transports registered, want %d (%s)", n, nwant, dccl_transport_names());
  for (int i = 0; i < n && i < nwant; i++) {
    const struct dccl_transport *t = dccl_transport_at(i);
    check(!strcmp(t->name, want[i]), "priority %d is %s, want %s", i, t->name, want[i]);
    check(t->index == i, "%s has index %d, want %d", t->name, t->index, i);
    check(t->size == sizeof(struct dccl_transport), "%s: registered size %zu", t->name, t->size);
    check(all_ops_set(t), "%s has an op left NULL", t->name);
    check(dccl_transport_find(t->name) == t, "%s not found by its name", t->name);
    int device_only = !strcmp(t->name, "p2p") || !strcmp(t->name, "staged");
    int want_buffers = device_only ? DCCL_BUFFERS_DEVICE : DCCL_BUFFERS_HOST;
#ifdef DCCL_HAVE_DEVICE_CODE
    if (t->moves_bytes) want_buffers |= DCCL_BUFFERS_DEVICE; /* sockets, net_ib: device links between hosts */
#endif
    check(t->buffers == want_buffers, "%s carries buffers %d, want %d", t->name, t->buffers, want_buffers);
    /* Pretend hosts (DCCL_HOSTID) on one GPU must link over the network, as real hosts would. */
    check(!device_only || t->host_local, "%s is not limited to one host as DCCL_HOSTID sees it", t->name);
    snprintf(want_names + strlen(want_names), sizeof(want_names) - strlen(want_names), "%s%s", i ? ", " : "",
             want[i]);
  }
  check(dccl_transport_at(n) == NULL && dccl_transport_at(-1) == NULL, "out-of-range index answered");
  check(dccl_transport_find("SHM") == dccl_transport_find("shm") && dccl_transport_find("shm"),
        "names are case-insensitive");
  check(dccl_transport_find("nvlink_magic") == NULL, "an unknown name was found");
#ifdef DCCL_HAVE_IBVERBS
  check(dccl_transport_find("ib") == dccl_transport_find("net_ib"), "the alias ib names net_ib");
  check(dccl_transport_find(dccl_transport_find("ib")->fallback) == dccl_transport_find("socket"),
        "net_ib falls back to socket");
#endif
  check(!strcmp(dccl_transport_names(), want_names), "names: %s, want %s", dccl_transport_names(), want_names);
}

static int fake_can_connect(const struct dccl_peer_info *a, const struct dccl_peer_info *b, const void *x,
                            const void *y) {
  return 1;
}
static ncclResult_t fake_setup(struct dccl_conn *c, void *info) {
  return ncclSuccess;
}
static ncclResult_t fake_connect(struct dccl_conn *c, const void *info) {
  return ncclSuccess;
}

/* A provider built against an older, shorter table: the bytes past its size are not its own (junk here) and
 * must not be read. */
static void test_complete_older_table(void) {
  union {
    struct dccl_transport t;
    unsigned char bytes[sizeof(struct dccl_transport)];
  } old;
  memset(old.bytes, 0xab, sizeof old.bytes);
  old.t.name = "fake";
  old.t.alias = NULL;
  old.t.host_local = old.t.moves_bytes = old.t.confirm_start = 0;
  old.t.fallback = NULL;
  old.t.unreachable = NULL;
  old.t.describe_self = NULL;
  old.t.can_connect = fake_can_connect;
  old.t.setup = fake_setup;
  old.t.connect = fake_connect;
  old.t.size = offsetof(struct dccl_transport, connect) + sizeof(old.t.connect);
  struct dccl_transport out;
  char why[128] = "";
  check(dccl_transport_complete(&out, &old.t, 5, why, sizeof why) == 0, "an older table refused: %s", why);
  check(out.index == 5 && out.size == sizeof(out), "index %d, size %zu", out.index, out.size);
  check(all_ops_set(&out), "an op past the provider's size was left NULL");
  check(out.start(NULL) == ncclSuccess && out.progress(NULL) == ncclSuccess && out.check_peer(NULL) == ncclSuccess,
        "the defaults must succeed");
  check(out.send_flushed(NULL) == 1 && out.send_from(NULL, 0, NULL, 0) == 0 && out.host_view(NULL) == NULL,
        "defaults: flushed, no zero-copy, no host view");
  out.abort(NULL), out.close(NULL), out.comm_free(NULL, 1); /* must do nothing */

  old.t.size = offsetof(struct dccl_transport, describe_self);
  check(dccl_transport_complete(&out, &old.t, 5, why, sizeof why) != 0 && strstr(why, "too small"),
        "a table without can_connect accepted (%s)", why);
  old.t.size = sizeof(struct dccl_transport);
  old.t.send_from = NULL, old.t.send_flushed = NULL, old.t.start = NULL, old.t.progress = NULL;
  old.t.check_peer = NULL, old.t.abort = NULL, old.t.close = NULL, old.t.comm_free = NULL;
  old.t.setup = NULL;
  check(dccl_transport_complete(&out, &old.t, 5, why, sizeof why) != 0 && strstr(why, "setup"),
        "a table without setup accepted (%s)", why);
}

int main(void) {
  test_registered();
  test_complete_older_table();
  printf("test_transport_registry: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
