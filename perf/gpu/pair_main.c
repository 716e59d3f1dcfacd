/* gpu_ipc_pair [--kind legacy|fd | --local] [--budget-ms N] [--label TEXT]
 * Two processes on GPU 0 share memory through CUDA IPC of one kind (--kind), or, with --local, one process plays
 * both sides on two streams (the reference). A (the parent) prints every figure; B (the child) prints only what
 * it alone sees. Exit status: 0 all measured, 2 a measurement failed, 3 a watchdog expired. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_common.h"
#include "pair.h"
#include "unix_msg.h"

static void peer_gone(const char *what) {
  printf("FAILED: the peer process did not answer (%s)\n", what);
  exit(2);
}

void pair_barrier(struct pair *p) {
  if (!p->local && msg_barrier(p->sock) != 0) peer_gone("barrier");
}

void pair_agree(struct pair *p, int *n) {
  if (p->local) return;
  if (p->role == 0 ? msg_send(p->sock, n, sizeof *n, -1) : msg_recv(p->sock, n, sizeof *n, NULL)) peer_gone("agree");
}

void pair_reset_flags(struct pair *p) {
  for (int i = 0; i < 2; i++)
    if (pair_mine(p, i)) CU_MUST(cuMemsetD8(p->side[i].own.ptr, 0, 4096));
  CU_MUST(cuCtxSynchronize());
  pair_barrier(p);
}

void pair_wait(struct pair *p, double timeout_s, const char *what) {
  for (int i = 0; i < 2; i++) {
    if (!pair_mine(p, i)) continue;
    CUresult e = stream_wait(p->side[i].stream, timeout_s);
    if (e == CUDA_ERROR_NOT_READY) printf("FAILED: %s: side %d still running after %.0f s\n", what, i, timeout_s);
    if (e != CUDA_SUCCESS) cu_die(e, what, __FILE__, __LINE__);
  }
}

/* Each side's region, payload, stream, events and result words; in two processes the regions are exchanged. */
static void setup_sides(struct pair *p) {
  /* Both sides' streams before the gates': under MPS the gated echo in one process hung when the gates' streams
   * were created in between (docs/gpu.md), perhaps because streams then shared a hardware queue. */
  for (int i = 0; i < 2; i++)
    if (pair_mine(p, i)) CU_MUST(cuStreamCreate(&p->side[i].stream, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 2; i++)
    if (pair_mine(p, i)) CU_MUST(cuStreamCreate(&p->side[i].gate, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 2; i++) {
    if (!pair_mine(p, i)) continue;
    struct side *s = &p->side[i];
    CU_MUST(region_alloc(&s->own, p->kind, PAIR_INBOX + PAIR_BYTES, p->dev));
    CU_MUST(cuMemsetD8(s->own.ptr, 0, s->own.size));
    CU_MUST(cuMemAlloc(&s->src, PAIR_BYTES));
    CU_MUST(cuMemsetD32(s->src, 0x5a000000u + (unsigned)i, PAIR_BYTES / 4));
    CU_MUST(cuMemAlloc(&s->stamps, (PAIR_MAX_ITERS + 1) * sizeof(uint64_t)));
    CU_MUST(cuMemAlloc(&s->status, 2 * sizeof(int)));
    for (int e = 0; e < PAIR_MAX_EVENTS; e++) CU_MUST(cuEventCreate(&s->events[e], CU_EVENT_DEFAULT));
    for (int e = 0; e < PAIR_MAX_BATCHES; e++) CU_MUST(cuEventCreate(&s->batch_start[e], CU_EVENT_DEFAULT));
  }
  CU_MUST(cuCtxSynchronize());
  if (p->local) {
    p->side[0].peer = p->side[1].own.ptr;
    p->side[1].peer = p->side[0].own.ptr;
    return;
  }
  struct side *s = &p->side[p->role];
  struct region_wire mine, theirs;
  int fd = -1, their_fd = -1;
  CU_MUST(region_export(&s->own, s->own.ptr, &mine, &fd));
  if (msg_send(p->sock, &mine, sizeof mine, fd) != 0) peer_gone("sending the region");
  if (fd >= 0) close(fd);
  if (msg_recv(p->sock, &theirs, sizeof theirs, &their_fd) != 0) peer_gone("receiving the region");
  struct open_cost cost;
  CU_MUST(mapping_open(&s->peer_map, &theirs, their_fd, p->dev, &cost));
  if (their_fd >= 0) close(their_fd);
  s->peer = s->peer_map.ptr;
  pair_barrier(p);
}

static void teardown_sides(struct pair *p) {
  pair_barrier(p); /* nobody unmaps memory the other may still write */
  for (int i = 0; i < 2; i++) {
    if (!pair_mine(p, i)) continue;
    struct side *s = &p->side[i];
    if (!p->local) CU_MUST(mapping_close(&s->peer_map, NULL));
    pair_barrier(p); /* the peer's mapping of our region is gone before we free it */
    region_free(&s->own);
    for (int e = 0; e < PAIR_MAX_EVENTS; e++) cuEventDestroy(s->events[e]);
    for (int e = 0; e < PAIR_MAX_BATCHES; e++) cuEventDestroy(s->batch_start[e]);
    cuStreamDestroy(s->gate);
    cuMemFree(s->src);
    cuMemFree(s->stamps);
    cuMemFree(s->status);
    cuStreamDestroy(s->stream);
  }
}

static void usage(void) {
  fprintf(stderr, "usage: gpu_ipc_pair [--kind legacy|fd | --local] [--budget-ms N] [--label TEXT]\n");
  exit(2);
}

int main(int argc, char **argv) {
  struct pair p;
  memset(&p, 0, sizeof p);
  p.kind = REGION_LEGACY;
  p.budget_us = 1e6;
  const char *label = "";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--local"))
      p.local = 1;
    else if (!strcmp(argv[i], "--kind") && i + 1 < argc) {
      const char *k = argv[++i];
      if (!strcmp(k, "legacy"))
        p.kind = REGION_LEGACY;
      else if (!strcmp(k, "fd"))
        p.kind = REGION_POSIX_FD;
      else
        usage();
    } else if (!strcmp(argv[i], "--budget-ms") && i + 1 < argc)
      p.budget_us = atof(argv[++i]) * 1e3;
    else if (!strcmp(argv[i], "--label") && i + 1 < argc)
      label = argv[++i];
    else
      usage();
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  pid_t child = -1;
  if (!p.local) {
    /* Fork before any CUDA call: a CUDA context does not survive fork. */
    int fds[2];
    if (msg_pair(fds, 60) != 0) return perror("socketpair"), 2;
    child = fork();
    if (child < 0) return perror("fork"), 2;
    p.role = child == 0;
    p.sock = fds[p.role];
    close(fds[!p.role]);
    if (p.role == 1) prctl(PR_SET_PDEATHSIG, SIGKILL);
  }
  watchdog_arm(240, p.role ? "gpu_ipc_pair B" : "gpu_ipc_pair A");
  p.dev = gpu_open();
  p.sms = gpu_sm_count(p.dev);
  if (p.role == 0) {
    printf("== gpu_ipc_pair %s: %s, MPS attribute %d, %d SMs\n", label,
           p.local ? "one process, two streams" : region_kind_name(p.kind), gpu_mps_enabled(p.dev), p.sms);
    measure_attributes(&p);
  }
  if (!p.local) measure_open_costs(&p);
  setup_sides(&p);
  measure_kernel_roundtrip(&p);
  measure_stream_copies(&p);
  teardown_sides(&p);
  if (child > 0) {
    int st = 0;
    waitpid(child, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      printf("FAILED: process B ended with status 0x%x\n", st);
      return 2;
    }
  }
  if (p.role == 0) printf("== gpu_ipc_pair %s: done\n", label);
  return 0;
}
