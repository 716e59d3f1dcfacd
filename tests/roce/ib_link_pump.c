/* The host side of device links over net_ib: a link pump (transports/link_pump.h) drives a pair of net_ib links
 * while two threads only fill and drain their FIFOs, as kernels do (nobody calls progress). Two communicators of
 * one process (ncclCommInitAll) over RDMA loopback on the VM's rxe0 provide the links: rank 0's ring link to rank
 * 1 and rank 1's from rank 0 (lane 0, idle otherwise). 400 slots, every byte checked, through a 100 ms pause that
 * lets both pumps and the net_ib proxy fall asleep; the sender's pump is freed right after its last post and must
 * send what is left first; the communicators then still all-reduce right. Needs an RDMA device (the soft-RoCE VM:
 * scripts/roce-vm.sh); device buffers themselves need a GPU as well, which no machine here has beside a NIC. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/comm.h"
#include "dccl.h"
#include "tests/unit/unit_check.h"
#include "transports/link_pump.h"
#include "util/error.h"

#define NSLOTS_SENT 400
#define PAUSE_AT 200

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static unsigned char pattern(uint64_t slot, uint64_t j) {
  return (unsigned char)(slot * 131 + j * 7 + (j >> 9));
}
static uint64_t slot_len(uint64_t i, uint64_t slot_bytes) {
  return 1 + (i * 7919) % slot_bytes;
}

static _Atomic int failures_reported;
static void on_failed(void *arg, ncclResult_t res) {
  (void)arg;
  printf("pump failure (%d): %s\n", res, dccl_last_error());
  atomic_fetch_add(&failures_reported, 1);
}

static struct dccl_link_pump *pump_of(struct dccl_conn *c) {
  struct dccl_link_pump_hooks hooks = {.failed = on_failed};
  struct dccl_link_pump *p = NULL;
  if (dccl_link_pump_create(&p, &hooks, 200, 0) != ncclSuccess || dccl_link_pump_add(p, c) != ncclSuccess) return NULL;
  dccl_link_pump_expect_replays(p); /* no launch kicks it: it must look by itself */
  return p;
}

struct sender {
  struct dccl_conn *c;
  struct dccl_link_pump *pump;
  int bad, flushed;
};

static void *send_all(void *arg) {
  struct sender *s = arg;
  uint64_t slot_bytes = s->c->desc.slot_bytes;
  for (uint64_t i = 0; i < NSLOTS_SENT && !s->bad; i++) {
    if (i == PAUSE_AT) usleep(100000);
    struct dccl_send_slot ss;
    uint64_t len = slot_len(i, slot_bytes);
    double end = now_s() + 60;
    while (!dccl_conn_send_slot(s->c, len, DCCL_PROTO_BULK, &ss) && !(s->bad = now_s() > end)) sched_yield();
    if (s->bad) break;
    for (uint64_t j = 0; j < len; j++) ((unsigned char *)ss.payload)[j] = pattern(i, j);
    dccl_conn_send_post(s->c, &ss, len, i, 0);
  }
  _Atomic int no_abort = 0;
  dccl_link_pump_free(s->pump, 60, &no_abort); /* sends what is left before it returns */
  s->flushed = s->c->transport->send_flushed(s->c);
  return NULL;
}

/* Every slot, checked; *paused: how long the slot after the sender's pause took to come after the one before. */
static int recv_all(struct dccl_conn *c, double *paused) {
  int bad = 0;
  uint64_t slot_bytes = c->desc.slot_bytes;
  double before = 0;
  for (uint64_t i = 0; i < NSLOTS_SENT; i++) {
    struct dccl_recv_slot rs;
    double end = now_s() + 60;
    if (i == PAUSE_AT) before = now_s();
    while (!dccl_conn_recv_slot(c, &rs))
      if (now_s() > end) return printf("FAIL: slot %llu never arrived\n", (unsigned long long)i), bad + 1;
    uint64_t len = slot_len(i, slot_bytes);
    int wrong = rs.h.seq != i || rs.h.bytes != len;
    for (uint64_t j = 0; j < len && !wrong; j++) wrong = ((const unsigned char *)rs.payload)[j] != pattern(i, j);
    if (wrong && bad++ < 5) printf("FAIL: slot %llu arrived wrong\n", (unsigned long long)i);
    if (i == PAUSE_AT) *paused = now_s() - before;
    dccl_conn_recv_done(c);
  }
  return bad;
}

static int allreduce_ok(ncclComm_t *comms) {
  static float buf[2][1000];
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 1000; i++) buf[r][i] = (float)(r + 1);
  ncclGroupStart();
  for (int r = 0; r < 2; r++) ncclAllReduce(buf[r], buf[r], 1000, ncclFloat32, ncclSum, comms[r], NULL);
  if (ncclGroupEnd() != ncclSuccess) return 0;
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 1000; i++)
      if (buf[r][i] != 3.0f) return 0;
  return 1;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  setenv("DCCL_TRANSPORT", "ib", 1);
  if (!getenv("DCCL_ROCE_VM") && !getenv("DCCL_IB_HCA")) printf("note: expects an RDMA device (scripts/roce-vm.sh)\n");
  ncclComm_t comms[2];
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) {
    printf("FAIL: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  struct dccl_conn *out = dccl_comm_find_conn(comms[0], 1, 1, 0), *in = dccl_comm_find_conn(comms[1], 0, 0, 0);
  check(out && in && !strcmp(out->transport->name, "net_ib") && !strcmp(in->transport->name, "net_ib"),
        "rank 0's ring link to rank 1 and rank 1's from rank 0 are net_ib links");
  if (!out || !in) return 1;
  struct dccl_link_pump *in_pump = pump_of(in);
  struct sender s = {.c = out, .pump = pump_of(out)};
  check(in_pump && s.pump, "pumps: %s", dccl_last_error());
  if (!in_pump || !s.pump) return 1;
  double t0 = now_s();
  pthread_t t;
  pthread_create(&t, NULL, send_all, &s);
  double paused = 0;
  int bad = recv_all(in, &paused);
  pthread_join(t, NULL);
  double took = now_s() - t0;
  printf("%d slots of up to %llu bytes through two pumps and net_ib in %.3f s; slot %d came %.3f s after slot %d\n",
         NSLOTS_SENT, (unsigned long long)out->desc.slot_bytes, took, PAUSE_AT, paused, PAUSE_AT - 1);
  /* About 1.4 s in the VM; 16 s when the pumps do not wake the net_ib proxy, which then only looks every second. */
  check(took < 8, "the transfer took %.1f s: the net_ib proxy was not kept awake", took);
  check(paused < 0.5, "after the sender's 0.1 s pause the next slot took %.3f s (the pumps sleep 200 us at most)",
        paused);
  check(bad == 0 && !s.bad, "%d of %d slots arrived wrong or never (sender %s)", bad, NSLOTS_SENT,
        s.bad ? "stuck" : "fine");
  check(s.flushed, "the sender's pump returned before its slots had left");
  check(atomic_load(&failures_reported) == 0, "a pump reported a failure");
  _Atomic int no_abort = 0;
  dccl_link_pump_free(in_pump, 10, &no_abort);
  check(allreduce_ok(comms), "an all-reduce after the pumps: %s", ncclGetLastError(NULL));
  for (int r = 0; r < 2; r++) ncclCommDestroy(comms[r]);
  printf("ib_link_pump: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed != 0;
}
