/* The GPUDirect RDMA decision (transports/net_ib/ib_gdr.h): the rule on every combination of DCCL_NET_GDR and
 * detected capabilities, the real detection on this machine (no GPU: host staging, with the reason, logged once
 * at INFO), and the registration of a device buffer falling back to staging when the registrar fails. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "forked_case.h"
#include "transports/net_ib/ib_gdr.h"
#include "util/cuda_driver.h"
#include "util/error.h"

/* The whole log of this process (DCCL_DEBUG_FILE=/tmp/dccl_test_ib_gdr_%p.log), then removes it. */
static const char *read_own_log(void) {
  static char text[1 << 14];
  char path[64];
  snprintf(path, sizeof path, "/tmp/dccl_test_ib_gdr_%d.log", (int)getpid());
  text[0] = '\0';
  FILE *file = fopen(path, "r");
  if (file != NULL) {
    text[fread(text, 1, sizeof text - 1, file)] = '\0';
    fclose(file);
  }
  unlink(path);
  return text;
}
#define LOG_TO_OWN_FILE "DCCL_DEBUG_FILE=/tmp/dccl_test_ib_gdr_%p.log"

static int count_of(const char *text, const char *what) {
  int n = 0;
  for (const char *at = strstr(text, what); at != NULL; at = strstr(at + 1, what)) n++;
  return n;
}

/* --- the rule --- */

static void every_combination(void) {
  const char *params[] = {NULL, "", "auto", "AUTO", "0", "1"};
  for (unsigned bits = 0; bits < 16; bits++) {
    struct dccl_gdr_caps caps = {.gpu = bits & 1, .cu_dmabuf = (bits >> 1) & 1, .ibv_dmabuf = (bits >> 2) & 1,
                                 .peermem = (bits >> 3) & 1};
    int dmabuf = caps.gpu && caps.cu_dmabuf && caps.ibv_dmabuf, peermem = caps.gpu && caps.peermem;
    enum dccl_gdr_path available = dmabuf ? DCCL_GDR_DMABUF : peermem ? DCCL_GDR_PEERMEM : DCCL_GDR_STAGING;
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
      struct dccl_gdr_choice c;
      ncclResult_t res = dccl_gdr_decide(params[i], &caps, &c);
      const char *p = params[i] != NULL ? params[i] : "(unset)";
      int ok;
      if (params[i] != NULL && strcmp(params[i], "0") == 0) {
        ok = res == ncclSuccess && c.path == DCCL_GDR_STAGING && !c.required &&
             strcmp(c.reason, "host staging: DCCL_NET_GDR=0") == 0;
      } else if (params[i] != NULL && strcmp(params[i], "1") == 0) {
        ok = available != DCCL_GDR_STAGING ? res == ncclSuccess && c.path == available && c.required
                                           : res == ncclSystemError &&
                                                 strstr(c.reason, "DCCL_NET_GDR=1 but GPUDirect RDMA is "
                                                                  "unavailable: ") == c.reason;
      } else {
        ok = res == ncclSuccess && c.path == available && !c.required;
      }
      /* the reason names the path taken, or what is missing */
      if (res == ncclSuccess && c.path == DCCL_GDR_DMABUF)
        ok &= strcmp(c.reason, "GPUDirect RDMA: dma-buf via cuMemGetHandleForAddressRange and "
                               "ibv_reg_dmabuf_mr") == 0;
      if (res == ncclSuccess && c.path == DCCL_GDR_PEERMEM)
        ok &= strstr(c.reason, "GPUDirect RDMA: nvidia-peermem") == c.reason;
      if (available == DCCL_GDR_STAGING && (params[i] == NULL || strcmp(params[i], "0") != 0)) {
        ok &= strstr(c.reason, caps.gpu ? "no nvidia-peermem and no dma-buf support" : "no GPU") != NULL;
        if (caps.gpu) {
          ok &= (strstr(c.reason, "no dma-buf export") != NULL) == !caps.cu_dmabuf;
          ok &= (strstr(c.reason, "no ibv_reg_dmabuf_mr") != NULL) == !caps.ibv_dmabuf;
        }
      }
      if (!ok) fprintf(stderr, "  caps gpu %d cu_dmabuf %d ibv_dmabuf %d peermem %d, DCCL_NET_GDR=%s: %d %s (%s)\n",
                       caps.gpu, caps.cu_dmabuf, caps.ibv_dmabuf, caps.peermem, p, (int)res,
                       dccl_gdr_path_name(c.path), c.reason);
      CHECK(ok);
    }
    struct dccl_gdr_choice c;
    CHECK(dccl_gdr_decide("yes", &caps, &c) == ncclInvalidUsage);
    CHECK(strcmp(c.reason, "DCCL_NET_GDR=\"yes\" is not one of auto, 0 or 1") == 0);
  }
}

static void reasons_spelled_out(void) {
  struct dccl_gdr_choice c;
  struct dccl_gdr_caps none = {0};
  CHECK(dccl_gdr_decide("auto", &none, &c) == ncclSuccess);
  CHECK(strcmp(c.reason, "host staging: no GPU (no CUDA driver or device)") == 0);
  struct dccl_gdr_caps gpu_only = {.gpu = 1};
  CHECK(dccl_gdr_decide(NULL, &gpu_only, &c) == ncclSuccess);
  CHECK(strcmp(c.reason, "host staging: no nvidia-peermem and no dma-buf support (the CUDA driver or device has "
                         "no dma-buf export and libibverbs has no ibv_reg_dmabuf_mr (rdma-core < 34))") == 0);
  struct dccl_gdr_caps old_verbs = {.gpu = 1, .cu_dmabuf = 1, .peermem = 1};
  CHECK(dccl_gdr_decide("1", &old_verbs, &c) == ncclSuccess && c.path == DCCL_GDR_PEERMEM);
  CHECK(strcmp(c.reason, "GPUDirect RDMA: nvidia-peermem (ibv_reg_mr on device memory; no dma-buf: libibverbs has "
                         "no ibv_reg_dmabuf_mr (rdma-core < 34))") == 0);
}

/* --- the real detection: this machine has no GPU --- */

/* These cases are about a machine without a GPU; on one with a GPU they say so and check nothing. (Asked in each
 * child: the parent must not initialise the library, or its children would inherit its log settings.) */
static int gpu_here(void) {
  if (!dccl_cuda_available()) return 0;
  printf("  a GPU is present: this no-GPU case checks nothing\n");
  return 1;
}

static void detected_auto(void) {
  if (gpu_here()) return;
  struct dccl_gdr_caps caps;
  dccl_gdr_detect(0, &caps);
  CHECK(caps.gpu == 0 && caps.cu_dmabuf == 0);
  struct dccl_gdr_choice c;
  CHECK(dccl_gdr_choose(0, &c) == ncclSuccess);
  CHECK(dccl_gdr_choose(0, &c) == ncclSuccess);
  CHECK(c.path == DCCL_GDR_STAGING);
  CHECK(strcmp(c.reason, "host staging: no GPU (no CUDA driver or device)") == 0);
  const char *log = read_own_log();
  CHECK(count_of(log, "DCCL INFO [NET] host staging: no GPU (no CUDA driver or device)") == 1); /* said once */
}

static void detected_off(void) {
  if (gpu_here()) return;
  struct dccl_gdr_choice c;
  CHECK(dccl_gdr_choose(0, &c) == ncclSuccess && c.path == DCCL_GDR_STAGING);
  CHECK(count_of(read_own_log(), "[NET] host staging: DCCL_NET_GDR=0") == 1);
}

static void detected_required(void) {
  if (gpu_here()) return;
  struct dccl_gdr_choice c;
  CHECK(dccl_gdr_choose(0, &c) == ncclSystemError);
  CHECK(strcmp(dccl_last_error(), "DCCL_NET_GDR=1 but GPUDirect RDMA is unavailable: no GPU (no CUDA driver or "
                                  "device)") == 0);
}

static void detected_garbage(void) {
  if (gpu_here()) return;
  struct dccl_gdr_choice c;
  CHECK(dccl_gdr_choose(0, &c) == ncclInvalidUsage);
  CHECK(strstr(dccl_last_error(), "DCCL_NET_GDR=\"maybe\" is not one of auto, 0 or 1") != NULL);
}

/* --- registering a device buffer, with fake registrars --- */

static int fake_calls;
static int fake_reg_ok(const struct dccl_ib_registrar *self, uintptr_t start, size_t len, struct dccl_ib_mr *mr) {
  fake_calls++;
  mr->handle = self->ctx;
  mr->lkey = 7;
  mr->rkey = 8;
  return 0;
}
static int fake_reg_fail(const struct dccl_ib_registrar *self, uintptr_t start, size_t len, struct dccl_ib_mr *mr) {
  fake_calls++;
  return EFAULT;
}
static void fake_dereg(const struct dccl_ib_registrar *self, struct dccl_ib_mr *mr) {}

static struct dccl_gdr_choice choice_of(enum dccl_gdr_path path, int required) {
  struct dccl_gdr_choice c = {.path = path, .required = required};
  return c;
}

static void register_paths_and_fallback(void) {
  static char dmabuf_tag, peermem_tag;
  struct dccl_gdr_registrars ok = {
      .dmabuf = {.reg = fake_reg_ok, .dereg = fake_dereg, .ctx = &dmabuf_tag},
      .peermem = {.reg = fake_reg_ok, .dereg = fake_dereg, .ctx = &peermem_tag}};
  struct dccl_gdr_registrars failing = {.dmabuf = {.reg = fake_reg_fail, .dereg = fake_dereg},
                                        .peermem = {.reg = fake_reg_fail, .dereg = fake_dereg}};
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const void *dev = (const void *)(uintptr_t)(0x7f0000000000 + 100); /* never touched: a pretend device pointer */
  struct dccl_ib_mr mr;
  enum dccl_gdr_path used;
  struct dccl_gdr_choice c = choice_of(DCCL_GDR_DMABUF, 0);
  CHECK(dccl_gdr_register(&c, &ok, dev, 2 * page, &mr, &used) == ncclSuccess);
  CHECK(used == DCCL_GDR_DMABUF && mr.handle == &dmabuf_tag && mr.lkey == 7);
  CHECK(mr.start == 0x7f0000000000 && mr.len == 3 * page); /* page-rounded */
  c = choice_of(DCCL_GDR_PEERMEM, 1);
  CHECK(dccl_gdr_register(&c, &ok, dev, 10, &mr, &used) == ncclSuccess);
  CHECK(used == DCCL_GDR_PEERMEM && mr.handle == &peermem_tag);
  /* staging chosen: nothing is registered */
  fake_calls = 0;
  c = choice_of(DCCL_GDR_STAGING, 0);
  CHECK(dccl_gdr_register(&c, &ok, dev, 10, &mr, &used) == ncclSuccess && used == DCCL_GDR_STAGING);
  CHECK(fake_calls == 0 && mr.handle == NULL);
  /* past max_mr_size: staging, without trying */
  struct dccl_gdr_registrars small = ok;
  small.dmabuf.max_mr_size = page;
  c = choice_of(DCCL_GDR_DMABUF, 1);
  CHECK(dccl_gdr_register(&c, &small, dev, 2 * page, &mr, &used) == ncclSuccess && used == DCCL_GDR_STAGING);
  CHECK(fake_calls == 0);
  /* the registration fails: auto falls back to staging with one WARN; required is an error */
  c = choice_of(DCCL_GDR_DMABUF, 0);
  CHECK(dccl_gdr_register(&c, &failing, dev, 10, &mr, &used) == ncclSuccess && used == DCCL_GDR_STAGING);
  CHECK(mr.handle == NULL && fake_calls == 1);
  c = choice_of(DCCL_GDR_PEERMEM, 0);
  CHECK(dccl_gdr_register(&c, &failing, dev, 10, &mr, &used) == ncclSuccess && used == DCCL_GDR_STAGING);
  c = choice_of(DCCL_GDR_PEERMEM, 1);
  CHECK(dccl_gdr_register(&c, &failing, dev, 10, &mr, &used) == ncclSystemError && used == DCCL_GDR_STAGING);
  CHECK(strstr(dccl_last_error(), "GPUDirect RDMA (nvidia-peermem) registration of device buffer") != NULL);
  CHECK(strstr(dccl_last_error(), "DCCL_NET_GDR=1 forbids staging") != NULL);
  const char *log = read_own_log();
  CHECK(count_of(log, "WARN [NET] GPUDirect RDMA (dma-buf) registration of device buffer") == 1);
  CHECK(count_of(log, "Bad address: host staging") == 1); /* the second fallback is not repeated at WARN */
}

/* Without a GPU, dma-buf export fails with a clear error (so a registration fails and the caller stages); the
 * registrar itself exists exactly when libibverbs has ibv_reg_dmabuf_mr. */
static void dmabuf_export_without_gpu(void) {
  if (gpu_here()) return;
  struct dccl_gdr_caps caps;
  dccl_gdr_detect(0, &caps);
  printf("  libibverbs has ibv_reg_dmabuf_mr: %s\n", caps.ibv_dmabuf ? "yes" : "no");
  struct dccl_ib_registrar r;
  if (!caps.ibv_dmabuf) CHECK(dccl_gdr_dmabuf_registrar(NULL, 0, &r) == ENOSYS);
  int fd = -1;
  CHECK(dccl_cuda_dmabuf_fd((const void *)(uintptr_t)0x10000, 4096, &fd) == ncclSystemError && fd == -1);
  CHECK(strstr(dccl_last_error(), "no cuMemGetHandleForAddressRange") != NULL);
  CHECK(dccl_cuda_dmabuf_supported(0) == 0);
}

int main(void) {
  int ok = 1;
  ok &= run_case("every_combination", every_combination, NULL);
  ok &= run_case("reasons_spelled_out", reasons_spelled_out, NULL);
  ok &= run_case("register_paths_and_fallback", register_paths_and_fallback,
                 (const char *const[]){"DCCL_DEBUG=INFO", LOG_TO_OWN_FILE, NULL});
  const char *info[] = {"DCCL_DEBUG=INFO", LOG_TO_OWN_FILE, NULL};
  ok &= run_case("detected_auto(no GPU)", detected_auto, info);
  ok &= run_case("detected_off", detected_off, (const char *const[]){"DCCL_DEBUG=INFO", LOG_TO_OWN_FILE,
                                                                      "DCCL_NET_GDR=0", NULL});
  ok &= run_case("detected_required(no GPU)", detected_required, (const char *const[]){"DCCL_NET_GDR=1", NULL});
  ok &= run_case("detected_garbage", detected_garbage, (const char *const[]){"DCCL_NET_GDR=maybe", NULL});
  ok &= run_case("dmabuf_export_without_gpu", dmabuf_export_without_gpu, NULL);
  return ok ? 0 : 1;
}
