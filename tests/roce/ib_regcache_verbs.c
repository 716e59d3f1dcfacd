/* The registration cache on a real RDMA device (ibv_reg_mr): needs one, so it runs inside the soft-RoCE VM
 * (label roce_guest); elsewhere it fails saying so.
 * Usage: ib_regcache_verbs [device]   (default: the first device libibverbs lists)
 * Checks: a miss registers the page-rounded range (the ibv_mr's addr/length), a hit returns the same MR; a range
 * unmapped and mapped again at the same address (MAP_FIXED) gets a new MR, over the new pages (frame numbers
 * before and after differ, and the old MR, still held, keeps the old frames); eviction and destroy deregister;
 * without CAP_SYS_ADMIN (in a child) nothing is cached; the device's MR count (`rdma resource`) is back where it started. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../unit/cap_drop.h"
#include "transports/net_ib/ib_regcache.h"

static int failures;
#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "ib_regcache_verbs:%d: CHECK(%s) failed\n", __LINE__, #cond); \
      failures++;                                                                     \
    }                                                                                 \
  } while (0)

static size_t page;
static const char *dev_name;

/* The device's MR count from `rdma resource show DEV` ("... mr N ..."); -1 when the tool is not there. */
static long device_mr_count(void) {
  char cmd[128], line[512];
  snprintf(cmd, sizeof cmd, "rdma resource show %s 2>/dev/null", dev_name);
  FILE *p = popen(cmd, "r");
  if (p == NULL) return -1;
  long count = -1;
  while (fgets(line, sizeof line, p) != NULL) {
    char *at = strstr(line, " mr ");
    if (at != NULL) count = strtol(at + 4, NULL, 10);
  }
  pclose(p);
  return count;
}

static uint64_t frame_of(const void *addr) {
  uint64_t id = 0;
  dccl_ib_pagemap_identify(NULL, (uintptr_t)addr & ~(uintptr_t)(page - 1), page, &id, 1);
  return id;
}

static char *map_pages(void *at, size_t n, int fill) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | (at != NULL ? MAP_FIXED : 0);
  char *p = mmap(at, n * page, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  memset(p, fill, n * page);
  return p;
}

/* Opens `dev`, allocates a PD and makes the verbs registrar over it; exits when it cannot. */
static struct ibv_pd *open_registrar(struct ibv_device *dev, struct dccl_ib_registrar *registrar) {
  struct ibv_context *ctx = ibv_open_device(dev);
  struct ibv_pd *pd = ctx != NULL ? ibv_alloc_pd(ctx) : NULL;
  if (pd == NULL) {
    fprintf(stderr, "ib_regcache_verbs: cannot open %s or allocate a protection domain\n", dev_name);
    exit(1);
  }
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  CHECK(dccl_ib_verbs_registrar(pd, access, registrar) == 0);
  return pd;
}

static void close_registrar(struct ibv_pd *pd) {
  struct ibv_context *ctx = pd->context;
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_close_device(ctx) == 0);
}

/* Without CAP_SYS_ADMIN: registered per use, never cached, nothing left behind. In a child of its own, made
 * before this process opens pagemap or the device: frame visibility is fixed when pagemap is opened. */
static int hidden_frames_case(struct ibv_device *dev, long mrs_before) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    CHECK(drop_cap_sys_admin() == 0);
    struct dccl_ib_registrar registrar;
    struct ibv_pd *pd = open_registrar(dev, &registrar);
    struct dccl_ib_regcache *cache = dccl_ib_regcache_create(&registrar, NULL);
    char *buf = map_pages(NULL, 4, 1);
    struct dccl_ib_reg reg;
    CHECK(dccl_ib_regcache_get(cache, buf, 4 * page, &reg) == DCCL_IB_REG_UNCACHED);
    CHECK(mrs_before < 0 || device_mr_count() == mrs_before + 1);
    dccl_ib_regcache_put(cache, &reg);
    CHECK(mrs_before < 0 || device_mr_count() == mrs_before);
    CHECK(dccl_ib_regcache_get(cache, buf, 4 * page, &reg) == DCCL_IB_REG_UNCACHED);
    dccl_ib_regcache_put(cache, &reg);
    dccl_ib_regcache_destroy(cache);
    close_registrar(pd);
    fflush(NULL);
    _exit(failures == 0 ? 0 : 1);
  }
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv) {
  page = (size_t)sysconf(_SC_PAGESIZE);
  int ndev = 0;
  struct ibv_device **devs = ibv_get_device_list(&ndev);
  if (devs == NULL || ndev == 0) {
    fprintf(stderr, "ib_regcache_verbs: no RDMA device (ibv_get_device_list found none): this test needs one, "
                    "e.g. inside the soft-RoCE VM (scripts/roce-vm.sh)\n");
    return 1;
  }
  struct ibv_device *dev = devs[0];
  for (int i = 0; argc > 1 && i < ndev; i++)
    if (strcmp(ibv_get_device_name(devs[i]), argv[1]) == 0) dev = devs[i];
  if (argc > 1 && strcmp(ibv_get_device_name(dev), argv[1]) != 0) {
    fprintf(stderr, "ib_regcache_verbs: no RDMA device named %s\n", argv[1]);
    return 1;
  }
  dev_name = ibv_get_device_name(dev);
  long mrs_before = device_mr_count();
  printf("device %s, MRs before: %ld\n", dev_name, mrs_before);
  CHECK(hidden_frames_case(dev, mrs_before));

  struct dccl_ib_registrar registrar;
  struct ibv_pd *pd = open_registrar(dev, &registrar);
  CHECK(registrar.max_mr_size > 0);
  printf("max_mr_size %llu\n", (unsigned long long)registrar.max_mr_size);
  struct dccl_ib_regcache_limits limits = {.max_entries = 2, .max_bytes = UINT64_C(1) << 30};
  struct dccl_ib_regcache *cache = dccl_ib_regcache_create(&registrar, &limits);

  /* miss, then hit on the same MR */
  size_t n = 16;
  char *buf = map_pages(NULL, n, 1);
  struct dccl_ib_reg reg, held;
  CHECK(dccl_ib_regcache_get(cache, buf + 10, n * page - 20, &reg) == DCCL_IB_REG_MISS);
  struct ibv_mr *mr = reg.mr.handle;
  CHECK(mr != NULL && mr->addr == (void *)buf && mr->length == n * page && mr->lkey == reg.mr.lkey);
  dccl_ib_regcache_put(cache, &reg);
  CHECK(dccl_ib_regcache_get(cache, buf, n * page, &held) == DCCL_IB_REG_HIT);
  CHECK(held.mr.handle == mr);
  long mrs_one = device_mr_count();
  CHECK(mrs_before < 0 || mrs_one == mrs_before + 1);

  /* free and reuse: the old MR is still held (so its pages stay pinned); the new mapping's pages are others,
   * and the lookup gives a new MR for them */
  uint64_t old_frame = frame_of(buf);
  CHECK(munmap(buf, n * page) == 0);
  CHECK(map_pages(buf, n, 2) == buf);
  uint64_t new_frame = frame_of(buf);
  printf("frame of the first page: %#llx registered, %#llx after the range was mapped again\n",
         (unsigned long long)old_frame, (unsigned long long)new_frame);
  CHECK(old_frame != new_frame);
  CHECK(dccl_ib_regcache_get(cache, buf, n * page, &reg) == DCCL_IB_REG_MISS);
  CHECK(reg.mr.handle != mr && reg.mr.lkey != held.mr.lkey);
  CHECK(frame_of(buf) == new_frame); /* registering pinned the new pages, it did not bring the old ones back */
  CHECK(mrs_before < 0 || device_mr_count() == mrs_before + 2);
  dccl_ib_regcache_put(cache, &held); /* the stale MR goes with its last reference */
  CHECK(mrs_before < 0 || device_mr_count() == mrs_before + 1);
  dccl_ib_regcache_put(cache, &reg);

  /* eviction past two entries deregisters the least recently used */
  char *other = map_pages(NULL, 4, 3);
  for (int i = 0; i < 3; i++) {
    CHECK(dccl_ib_regcache_get(cache, other + (size_t)i * page, 10, &reg) == DCCL_IB_REG_MISS);
    dccl_ib_regcache_put(cache, &reg);
  }
  struct dccl_ib_regcache_stats s;
  dccl_ib_regcache_stats(cache, &s);
  CHECK(s.entries == 2 && s.registrations == 2 && s.stale == 1 && s.evictions == 2);
  CHECK(mrs_before < 0 || device_mr_count() == mrs_before + 2);
  dccl_ib_regcache_destroy(cache);
  CHECK(mrs_before < 0 || device_mr_count() == mrs_before);

  long mrs_after = device_mr_count();
  printf("MRs after: %ld\n", mrs_after);
  CHECK(mrs_before < 0 || mrs_after == mrs_before);
  if (mrs_before < 0) printf("(no `rdma` tool: the device's MR count was not checked)\n");

  close_registrar(pd);
  ibv_free_device_list(devs);
  printf("%s\n", failures == 0 ? "PASS ib_regcache_verbs" : "FAIL ib_regcache_verbs");
  return failures == 0 ? 0 : 1;
}
