/* The clients of gpu_mps_fault (fault.h). Every line a client prints begins with its name and pid; results are
 * the driver's names for them, as the client saw them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fault.h"
#include "gpu_common.h"
#include "ipc_region.h"
#include "kernels.h"
#include "unix_msg.h"

#define SPIN_TIMEOUT_NS (60ull * 1000 * 1000 * 1000)

struct client {
  enum fault_role role;
  const char *name;
  int sock;
  CUdevice dev;
  CUstream spin, side;
  struct region own;        /* owner: the shared flag region */
  struct mapping peer;      /* the others: the owner's region mapped */
  CUdeviceptr flag;         /* the 32-bit flag every kernel spins on */
  volatile uint32_t *words; /* mapped host memory: [0] stop, [1] why, [2..3] heartbeat */
  CUdeviceptr words_dev;
};

__attribute__((format(printf, 2, 3))) static void say(const struct client *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("  [%s %d] ", c->name, (int)getpid());
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
}

static int step(const struct client *c, const char *what, CUresult r) {
  say(c, "%s: %s", what, cu_name(r));
  return r == CUDA_SUCCESS;
}

static uint64_t heartbeat(const struct client *c) {
  return *(volatile uint64_t *)(c->words + 2);
}

static int open_gpu(struct client *c) {
  CUcontext ctx;
  if (!step(c, "cuInit", cuInit(0)) || !step(c, "cuDeviceGet", cuDeviceGet(&c->dev, 0))) return 0;
  if (!step(c, "cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&ctx, c->dev))) return 0;
  if (!step(c, "cuCtxSetCurrent", cuCtxSetCurrent(ctx))) return 0;
  int err = kernels_preload();
  if (err) {
    say(c, "loading the kernels: cudaError %d", err);
    return 0;
  }
  return cuStreamCreate(&c->spin, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
         cuStreamCreate(&c->side, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS;
}

static int share(struct client *c) {
  struct region_wire w;
  int fd = -1;
  if (c->role == ROLE_OWNER) {
    if (!step(c, "cuMemCreate (POSIX fd) of the shared flag", region_alloc(&c->own, REGION_POSIX_FD, 2 << 20, c->dev)))
      return 0;
    CU_MUST(cuMemsetD8(c->own.ptr, 0, c->own.size));
    CU_MUST(cuCtxSynchronize());
    c->flag = c->own.ptr;
    if (!step(c, "export", region_export(&c->own, c->own.ptr, &w, &fd))) return 0;
    int sent = msg_send(c->sock, &w, sizeof w, fd) == 0;
    close(fd);
    return sent;
  }
  struct open_cost cost;
  if (msg_recv(c->sock, &w, sizeof w, &fd) != 0) return 0;
  int ok = step(c, "import + map of the shared flag", mapping_open(&c->peer, &w, fd, c->dev, &cost));
  close(fd);
  c->flag = c->peer.ptr;
  return ok;
}

static int spin(struct client *c, int on_own_memory) {
  CUdeviceptr flag = c->flag;
  if (on_own_memory) {
    CU_MUST(cuMemAlloc(&flag, 4096));
    CU_MUST(cuMemsetD8(flag, 0, 4096));
    CU_MUST(cuCtxSynchronize());
  }
  void *host = NULL;
  if (!step(c, "cuMemHostAlloc", cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE)))
    return 0;
  c->words = host;
  for (int i = 0; i < 4; i++) c->words[i] = 0;
  CU_MUST(cuMemHostGetDevicePointer(&c->words_dev, host, 0));
  int err = spin_launch(flag, c->words_dev, c->words_dev + 8, c->words_dev + 4, SPIN_TIMEOUT_NS, c->spin);
  if (err) {
    say(c, "spin launch: cudaError %d", err);
    return 0;
  }
  double deadline = now_us() + 5e6;
  while (heartbeat(c) == 0 && now_us() < deadline) sleep_ms(1);
  say(c, "spinning kernel (on %s) %s", on_own_memory ? "its own memory" : "the shared flag",
      heartbeat(c) ? "runs" : "did not start within 5 s");
  return heartbeat(c) != 0;
}

static int fault(struct client *c) {
  int err = fault_launch(16, c->side);
  if (err) say(c, "fault launch: cudaError %d", err);
  step(c, "the faulting kernel's stream, waited up to 5 s", stream_wait(c->side, 5));
  step(c, "its spinning kernel's stream (cuStreamQuery)", cuStreamQuery(c->spin));
  return 1;
}

static int observe(struct client *c) {
  uint64_t h0 = heartbeat(c);
  sleep_ms(300);
  uint64_t h1 = heartbeat(c);
  say(c, "heartbeat %llu -> %llu in 300 ms (%s), spin stream (cuStreamQuery): %s, kernel's exit word %u",
      (unsigned long long)h0, (unsigned long long)h1, h1 != h0 ? "kernel running" : "kernel not running",
      cu_name(cuStreamQuery(c->spin)), c->words[1]);
  return 1;
}

static int release(struct client *c) {
  if (c->role == ROLE_OWNER) {
    CUresult r = cuMemsetD32Async(c->flag, 1, 1, c->side);
    step(c, "set the shared flag (cuMemsetD32Async on another stream)", r);
    if (r == CUDA_SUCCESS) step(c, "that stream", stream_wait(c->side, 5));
  }
  sleep_ms(200); /* the flag alone first: the exit word says which released the kernel */
  c->words[0] = 1;
  step(c, "the spinning kernel, waited up to 5 s", stream_wait(c->spin, 5));
  static const char *why[] = {"never wrote (did not finish)", "the shared flag", "its stop word", "its deadline"};
  uint32_t w = c->words[1];
  say(c, "the kernel ended by %s", w < 4 ? why[w] : "?");
  return 1;
}

static int work(struct client *c) {
  CUdeviceptr p = 0;
  uint32_t v = 0;
  int ok = step(c, "cuMemAlloc", cuMemAlloc(&p, 1 << 20)) && step(c, "cuMemsetD32", cuMemsetD32(p, 7, 1));
  if (ok) {
    int err = store_launch(p, 42, c->side);
    say(c, "kernel launch: cudaError %d", err);
    ok = !err && step(c, "its stream", stream_wait(c->side, 5)) &&
         step(c, "cuMemcpyDtoH", cuMemcpyDtoH(&v, p, sizeof v));
    if (ok) say(c, "value read back: %u%s", v, v == 42 ? " (right)" : " (wrong)");
    ok = ok && v == 42;
  }
  if (p) step(c, "cuMemFree", cuMemFree(p));
  return ok;
}

static void probe(struct client *c) {
  int ok = open_gpu(c) && work(c);
  say(c, "new client: %s", ok ? "works" : "does not work");
  exit(ok ? 0 : 1);
}

void fault_client(enum fault_role role, const char *name, int sock) {
  struct client c = {.role = role, .name = name, .sock = sock};
  setvbuf(stdout, NULL, _IOLBF, 0);
  watchdog_arm(150, name);
  if (role == ROLE_PROBE) probe(&c);
  int32_t answer = open_gpu(&c);
  if (msg_send(sock, &answer, sizeof answer, -1) != 0 || !answer) exit(1);
  for (;;) {
    int32_t cmd;
    if (msg_recv(sock, &cmd, sizeof cmd, NULL) != 0) {
      say(&c, "the coordinator is gone: exiting");
      exit(1);
    }
    switch (cmd) {
      case CMD_SHARE:
        answer = share(&c);
        break;
      case CMD_SPIN:
        answer = spin(&c, 0);
        break;
      case CMD_SPIN_OWN:
        answer = spin(&c, 1);
        break;
      case CMD_FAULT:
        answer = fault(&c);
        break;
      case CMD_OBSERVE:
        answer = observe(&c);
        break;
      case CMD_RELEASE:
        answer = release(&c);
        break;
      case CMD_CONTINUE:
        answer = work(&c);
        break;
      case CMD_EXIT: {
        step(&c, "cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease(c.dev));
        answer = 1;
        msg_send(sock, &answer, sizeof answer, -1);
        exit(0);
      }
      default:
        answer = 0;
    }
    if (msg_send(sock, &answer, sizeof answer, -1) != 0) exit(1);
  }
}
