/* ncclConfig_t from callers built against other NCCL versions (src/core/comm_config.c): configs of 72 (2.27),
 * 80 (2.28), 88 (2.29) and 96 (2.30) bytes, each followed by junk it does not own; bad magic, size, version and
 * field values; names copied; a NULL config inheriting the parent's; and ncclCommSplit doing so. */
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "core/comm.h"
#include "core/comm_config.h"
#include "dccl.h"
#include "unit_check.h"
#include "util/error.h"

/* A caller's config of `size` bytes inside a bigger buffer filled with junk: only `size` bytes are its own. */
static union {
  ncclConfig_t cfg;
  unsigned char bytes[256];
} caller;

static void make_caller(size_t size, unsigned version) {
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  memset(caller.bytes, 0x5a, sizeof caller.bytes);
  memcpy(caller.bytes, &init, size < sizeof init ? size : sizeof init);
  caller.cfg.size = size;
  caller.cfg.version = version;
  caller.cfg.blocking = 1;
  caller.cfg.splitShare = 1;
}

static void test_sizes(void) {
  const struct {
    size_t size;
    unsigned version;
  } callers[] = {{72, 22705}, {80, 22809}, {88, 22903}, {96, 23001}};
  for (int i = 0; i < 4; i++) {
    size_t size = callers[i].size;
    make_caller(size, callers[i].version);
    if (size > offsetof(ncclConfig_t, nvlinkCentricSched)) caller.cfg.nvlinkCentricSched = 1;
    struct dccl_comm_config out;
    ncclResult_t r = dccl_config_read(&caller.cfg, NULL, &out, "test");
    check(r == ncclSuccess, "%zu-byte config refused: %s", size, dccl_last_error());
    check(out.cfg.size == sizeof(ncclConfig_t) && out.cfg.blocking == 1 && out.cfg.splitShare == 1,
          "%zu bytes: size %zu, blocking %d, splitShare %d", size, out.cfg.size, out.cfg.blocking, out.cfg.splitShare);
    /* 2.27's struct ends before nChannelsPerNetPeer: the junk after it must not be read as those fields. */
    int want = size >= 80 ? 1 : NCCL_CONFIG_UNDEF_INT;
    check(out.cfg.nvlinkCentricSched == want && (size >= 80 || out.cfg.nChannelsPerNetPeer == NCCL_CONFIG_UNDEF_INT),
          "%zu bytes: nvlinkCentricSched %d (want %d), nChannelsPerNetPeer %d", size, out.cfg.nvlinkCentricSched, want,
          out.cfg.nChannelsPerNetPeer);
  }
}

static void expect_refused(const char *what, const char *word) {
  struct dccl_comm_config out;
  ncclResult_t r = dccl_config_read(&caller.cfg, NULL, &out, "test");
  check(r == ncclInvalidArgument && strstr(dccl_last_error(), word), "%s: result %d, message '%s' (want '%s')", what, r,
        dccl_last_error(), word);
}

static void test_refusals(void) {
  make_caller(80, 22809);
  caller.cfg.magic = 0x12345678u;
  expect_refused("wrong magic", "magic");
  make_caller(80, 22809);
  caller.cfg.size = 8;
  expect_refused("size too small", "size");
  make_caller(80, 0);
  expect_refused("version 0", "version");
  make_caller(80, 22809);
  caller.cfg.blocking = 2;
  expect_refused("blocking = 2", "config.blocking = 2");
  make_caller(80, 22809);
  caller.cfg.minCTAs = 8, caller.cfg.maxCTAs = 4;
  expect_refused("minCTAs > maxCTAs", "config.minCTAs = 8 exceeds config.maxCTAs = 4");
  make_caller(80, 22809);
  caller.cfg.CTAPolicy = 7;
  expect_refused("CTAPolicy = 7", "config.CTAPolicy = 7");
  make_caller(80, 22809);
  caller.cfg.nvlsCTAs = 0;
  expect_refused("nvlsCTAs = 0", "config.nvlsCTAs = 0");
}

static void test_names_and_inheritance(void) {
  char name[32] = "trainer-dp";
  make_caller(80, 22809);
  caller.cfg.commName = name;
  struct dccl_comm_config parent, child, copy;
  check(dccl_config_read(&caller.cfg, NULL, &parent, "test") == ncclSuccess, "config with a name refused");
  strcpy(name, "changed");
  check(parent.cfg.commName && !strcmp(parent.cfg.commName, "trainer-dp") && parent.cfg.commName != name,
        "the name is not a copy: '%s'", parent.cfg.commName ? parent.cfg.commName : "(null)");
  check(dccl_config_read(NULL, &parent, &child, "test") == ncclSuccess && child.cfg.splitShare == 1 &&
            child.cfg.commName == child.comm_name && !strcmp(child.comm_name, "trainer-dp"),
        "a NULL config does not inherit the parent's");
  dccl_config_copy(&copy, &child);
  check(copy.cfg.commName == copy.comm_name, "a copy's name points into the original");
  check(dccl_config_read(NULL, NULL, &child, "test") == ncclSuccess && child.cfg.blocking == NCCL_CONFIG_UNDEF_INT &&
            !child.cfg.commName,
        "no config and no parent must give the defaults");
}

/* ncclCommSplit with a NULL config: the child has the parent's config. */
static void test_split_inherits(void) {
  ncclUniqueId id;
  ncclComm_t parent = NULL, child = NULL;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.splitShare = 1;
  cfg.commName = "parent";
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r == ncclSuccess) r = ncclCommInitRankConfig(&parent, 1, id, 0, &cfg);
  if (r == ncclSuccess) r = ncclCommSplit(parent, 0, 0, &child, NULL);
  check(r == ncclSuccess && child && child->config.cfg.splitShare == 1 && child->config.cfg.commName &&
            !strcmp(child->config.cfg.commName, "parent"),
        "a split with a NULL config did not inherit the parent's (%s)", r ? ncclGetLastError(NULL) : "");
  if (child) ncclCommDestroy(child);
  if (parent) ncclCommDestroy(parent);
}

int main(void) {
  test_sizes();
  test_refusals();
  test_names_and_inheritance();
  test_split_inherits();
  printf("test_comm_config: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
