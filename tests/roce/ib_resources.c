/* net_ib in one process: two communicators (ncclCommInitAll) joined over RDMA loopback on the VM's rxe0.
 *   leaks:     QPs, CQs, MRs and PDs of the device (`rdma resource show`) are back to the baseline after
 *              ncclCommDestroy and after ncclCommAbort, and were above it while the communicators lived;
 *   zero-copy: sends from a buffer registered with ncclCommRegister are read in place by the NIC, and after the
 *              buffer is unmapped and a new mapping made at the same address, the receiver gets the new bytes
 *              (the registration cache must not serve the registration of the old pages);
 *   errors:    a completion error becomes an error naming the peer rank, the device, the QP number and the
 *              work completion's status text: a write to a deregistered FIFO ("remote access error"), and a
 *              receiver whose QP was moved to the error state (its receives are flushed), and a writer whose
 *              QPs point at a QP number nobody owns ("transport retry counter exceeded").
 * Needs an RDMA device (the soft-RoCE VM: scripts/roce-vm.sh). White-box: it reaches the links through the
 * library's internal headers to break them. */
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/comm.h"
#include "dccl.h"
#include "transports/net_ib/ib_private.h"

#define COUNT 70000 /* floats per rank: several slots */

static int failures;
#define CHECK(cond, ...)                              \
  do {                                                \
    if (!(cond)) {                                    \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);     \
      printf(__VA_ARGS__);                            \
      printf("\n");                                   \
      failures++;                                     \
    }                                                 \
  } while (0)

struct counts {
  int pd, cq, qp, mr;
};

/* The device's object counts from `rdma resource show`, e.g. "0: rxe0: pd 1 cq 2 qp 3 cm_id 0 mr 4 ctx 0 srq 0". */
static struct counts device_counts(void) {
  struct counts c = {-1, -1, -1, -1};
  FILE *p = popen("rdma resource show 2>/dev/null", "r");
  char word[64];
  int prev_is[4] = {0};
  while (p && fscanf(p, "%63s", word) == 1) {
    int v = atoi(word);
    if (prev_is[0]) c.pd = v;
    if (prev_is[1]) c.cq = v;
    if (prev_is[2]) c.qp = v;
    if (prev_is[3]) c.mr = v;
    prev_is[0] = !strcmp(word, "pd");
    prev_is[1] = !strcmp(word, "cq");
    prev_is[2] = !strcmp(word, "qp");
    prev_is[3] = !strcmp(word, "mr");
  }
  if (p) pclose(p);
  return c;
}

static void print_counts(const char *when, struct counts c) {
  printf("  %-28s pd %d cq %d qp %d mr %d\n", when, c.pd, c.cq, c.qp, c.mr);
}

static int same(struct counts a, struct counts b) { return a.pd == b.pd && a.cq == b.cq && a.qp == b.qp && a.mr == b.mr; }

/* One all-reduce on both communicators, driven by this thread in one group. */
static ncclResult_t allreduce_both(ncclComm_t comms[2], float *buf[2]) {
  ncclGroupStart();
  for (int r = 0; r < 2; r++) ncclAllReduce(buf[r], buf[r], COUNT, ncclFloat, ncclSum, comms[r], NULL);
  return ncclGroupEnd();
}

static int make_comms(ncclComm_t comms[2], float *buf[2]) {
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) {
    printf("FAIL: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    failures++;
    return -1;
  }
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < COUNT; i++) buf[r][i] = (float)(r + 1);
  ncclResult_t res = allreduce_both(comms, buf);
  CHECK(res == ncclSuccess, "all-reduce over net_ib: %s", ncclGetLastError(NULL));
  CHECK(buf[0][COUNT - 1] == 3.0f && buf[1][0] == 3.0f, "all-reduce result %g %g, want 3", buf[0][COUNT - 1],
        buf[1][0]);
  return 0;
}

static void leaks(const char *how, float *buf[2]) {
  struct counts base = device_counts(), live, after;
  print_counts("before", base);
  CHECK(base.qp >= 0, "rdma resource show gave no counts");
  ncclComm_t comms[2];
  if (make_comms(comms, buf) != 0) return;
  live = device_counts();
  print_counts("while two comms live", live);
  CHECK(live.qp > base.qp && live.cq > base.cq && live.mr > base.mr && live.pd > base.pd,
        "the live communicators' QPs/CQs/MRs/PDs are not counted: the check could not see a leak");
  for (int r = 0; r < 2; r++) {
    ncclResult_t res = !strcmp(how, "abort") ? ncclCommAbort(comms[r]) : ncclCommDestroy(comms[r]);
    CHECK(res == ncclSuccess, "%s: %s", how, ncclGetLastError(NULL));
  }
  after = device_counts();
  print_counts(!strcmp(how, "abort") ? "after ncclCommAbort" : "after ncclCommDestroy", after);
  CHECK(same(base, after), "verbs objects leaked after %s", how);
}

static struct dccl_ib_link *link_of(ncclComm_t comm, int peer, int is_send) {
  struct dccl_conn *c = dccl_comm_find_conn(comm, peer, is_send, 0);
  return c && !strcmp(c->transport->name, "net_ib") ? c->priv : NULL;
}

static void expect_text(const char *text, const char *want, const char *what) {
  CHECK(strstr(text, want) != NULL, "%s: the error does not say \"%s\": %s", what, want, text);
}

/* The text the proxy recorded for a link, once it has one (a retry count may take a moment to run out). */
static const char *link_text(struct dccl_ib_link *l) {
  for (int i = 0; i < 300 && !atomic_load(&l->error); i++) {
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  return atomic_load(&l->error) ? l->error_text : "(no error recorded)";
}

static void expect_link_error(struct dccl_ib_link *l, const char *rank, const char *status_text, const char *what) {
  char qpn[32];
  snprintf(qpn, sizeof(qpn), "QP %u", l->qps[0].qp->qp_num);
  const char *text = link_text(l);
  printf("  %s: %s (posted %llu, wr %llu/%llu, abort %d/%d)\n", what, text, (unsigned long long)l->posted,
         (unsigned long long)l->qps[0].wr_done, (unsigned long long)l->qps[0].wr_posted, (int)l->abort_requested,
         l->abort_sent);
  expect_text(text, rank, what);
  expect_text(text, l->ic->device, what);
  expect_text(text, qpn, what);
  /* "A|B": either text will do. */
  char want[128];
  snprintf(want, sizeof(want), "%s", status_text);
  char *alt = strchr(want, '|');
  if (alt) *alt++ = 0;
  if (!alt || !strstr(text, alt)) expect_text(text, want, what);
}

/* Breaks rank 1's receive link from rank 0 with `breaker`, then runs an all-reduce: it must fail, and the
 * broken links' recorded errors must say who, where and what. */
static void completion_error(const char *what, void (*breaker)(struct dccl_ib_link *, struct dccl_ib_link *),
                             const char *writer_status,
                             const char *victim_status, float *buf[2]) {
  struct counts base = device_counts();
  ncclComm_t comms[2];
  if (make_comms(comms, buf) != 0) return;
  struct dccl_ib_link *victim = link_of(comms[1], 0, 0), *writer = link_of(comms[0], 1, 1);
  CHECK(victim && writer, "the ring links between the two communicators are not net_ib links");
  if (!victim || !writer) return;
  breaker(victim, writer);
  ncclResult_t res = allreduce_both(comms, buf);
  printf("  %s: all-reduce returned %d: %s\n", what, (int)res, ncclGetLastError(NULL));
  CHECK(res == ncclRemoteError || res == ncclSystemError, "%s: result %d, want a remote or system error", what, (int)res);
  expect_text(ncclGetLastError(NULL), "net_ib link", what);
  if (writer_status) expect_link_error(writer, "to rank 1", writer_status, what);
  if (victim_status) expect_link_error(victim, "from rank 0", victim_status, what);
  for (int r = 0; r < 2; r++) CHECK(ncclCommAbort(comms[r]) == ncclSuccess, "abort after %s", what);
  CHECK(same(base, device_counts()), "verbs objects leaked after %s", what);
}

/* The sender still holds the old rkey: its next write is refused by the responder. */
static void deregister_fifo(struct dccl_ib_link *l, struct dccl_ib_link *writer) {
  ibv_dereg_mr(l->fifo_mr);
  l->fifo_mr = NULL; /* so close() does not deregister it again */
}

/* A QP in the error state flushes its posted receives, as when its process dies. */
static void qp_to_error(struct dccl_ib_link *l, struct dccl_ib_link *writer) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
  for (int i = 0; i < l->nqps; i++) ibv_modify_qp(l->qps[i].qp, &a, IBV_QP_STATE);
}

#define ZC_BYTES (1u << 20)

struct p2p_arg {
  ncclComm_t comm;
  unsigned char *buf;
  ncclResult_t res;
};
static void *send_thread(void *p) {
  struct p2p_arg *a = p;
  a->res = ncclSend(a->buf, ZC_BYTES, ncclUint8, 1, a->comm, NULL);
  return NULL;
}
static void *recv_thread(void *p) {
  struct p2p_arg *a = p;
  a->res = ncclRecv(a->buf, ZC_BYTES, ncclUint8, 0, a->comm, NULL);
  return NULL;
}

/* Rank 0 sends ZC_BYTES from `src` to rank 1, each rank from its own thread (a first send/recv connects its
 * link, which needs both ends at once); returns 1 when every received byte is `expect`. */
static int send_and_check(ncclComm_t comms[2], unsigned char *src, unsigned char *dst, unsigned char expect) {
  memset(dst, 0, ZC_BYTES);
  struct p2p_arg s = {comms[0], src, ncclSuccess}, r = {comms[1], dst, ncclSuccess};
  pthread_t ts, tr;
  pthread_create(&ts, NULL, send_thread, &s);
  pthread_create(&tr, NULL, recv_thread, &r);
  pthread_join(ts, NULL);
  pthread_join(tr, NULL);
  if (s.res != ncclSuccess || r.res != ncclSuccess) {
    printf("  send/recv failed: %s\n", ncclGetLastError(NULL));
    return 0;
  }
  for (size_t i = 0; i < ZC_BYTES; i++)
    if (dst[i] != expect) {
      printf("  byte %zu is 0x%02x, want 0x%02x\n", i, dst[i], expect);
      return 0;
    }
  return 1;
}

static void zero_copy(float *buf[2]) {
  ncclComm_t comms[2];
  if (make_comms(comms, buf) != 0) return;
  struct dccl_ib_link *ring_link = link_of(comms[0], 1, 1);
  struct dccl_ib_ctx *ic = ring_link ? ring_link->ic : NULL; /* the process's, shared by both communicators */
  unsigned char *src = mmap(NULL, ZC_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  unsigned char *dst = malloc(ZC_BYTES);
  void *handle = NULL;
  CHECK(src != MAP_FAILED && dst && ic, "setup");
  if (src == MAP_FAILED || !dst || !ic) return;
  CHECK(ncclCommRegister(comms[0], src, ZC_BYTES, &handle) == ncclSuccess, "register: %s", ncclGetLastError(NULL));
  memset(src, 0xa1, ZC_BYTES);
  uint64_t before = atomic_load(&ic->zero_copy_slots);
  CHECK(send_and_check(comms, src, dst, 0xa1), "send from a registered buffer delivered wrong bytes");
  uint64_t in_place = atomic_load(&ic->zero_copy_slots) - before;
  printf("  registered buffer: %llu slots sent in place\n", (unsigned long long)in_place);
  CHECK(in_place > 0, "a registered buffer was copied, not sent in place");
  CHECK(send_and_check(comms, src, dst, 0xa1), "second send (a cache hit) delivered wrong bytes");
  /* Free and reuse the range: new pages at the same address. A stale registration would send 0xa1. */
  munmap(src, ZC_BYTES);
  unsigned char *again = mmap(src, ZC_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  CHECK(again == src, "could not map the same range again");
  memset(again, 0x5e, ZC_BYTES);
  struct dccl_ib_regcache_stats st0, st1;
  dccl_ib_regcache_stats(ic->regcache, &st0);
  CHECK(send_and_check(comms, again, dst, 0x5e), "after free and reuse of the range the receiver got stale bytes");
  dccl_ib_regcache_stats(ic->regcache, &st1);
  printf("  after free and reuse: %llu stale registrations retired\n", (unsigned long long)(st1.stale - st0.stale));
  CHECK(st1.stale > st0.stale || st1.uncached > st0.uncached, "the cache did not notice the new pages");
  CHECK(ncclCommDeregister(comms[0], handle) == ncclSuccess, "deregister");
  before = atomic_load(&ic->zero_copy_slots);
  CHECK(send_and_check(comms, again, dst, 0x5e), "send from a deregistered buffer");
  CHECK(atomic_load(&ic->zero_copy_slots) == before, "a deregistered buffer was still sent in place");
  for (int r = 0; r < 2; r++) CHECK(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy");
  munmap(again, ZC_BYTES);
  free(dst);
}

/* The writer's QPs reconnected to a QP number nobody owns (as if the peer's QP vanished): nothing acknowledges
 * its writes, so its retries run out. A reset QP holds no work: everything posted counts as retired, keeping the
 * link's slot counters where they were (zeroing them moved the FIFO head back behind the tail, and when the cost
 * model's probe had passed a FIFO's worth of tokens the executor found no free slot, posted nothing, and both
 * ranks waited forever: the CI hang of stop 22). Under the context's lock, so the proxy is not inside the link. */
static void repoint_writer(struct dccl_ib_link *victim, struct dccl_ib_link *l) {
  pthread_mutex_lock(&l->ic->lock);
  for (int i = 0; i < l->nqps; i++) {
    struct dccl_ib_qp *q = &l->qps[i];
    struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};
    struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = (uint8_t)l->ic->port,
                               .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
    CHECK(ibv_modify_qp(q->qp, &reset, IBV_QP_STATE) == 0 &&
              ibv_modify_qp(q->qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
          "reset the writer's QP");
    q->wr_done = q->wr_posted;
    q->data_done = q->data_posted;
    q->since_signal = 0;
    q->marks_head = q->marks_tail;
    CHECK(dccl_ib_qp_connect(l, q, 0xabcde, l->remote.psn) == ncclSuccess, "reconnect the writer's QP");
  }
  l->completion_due_ns = 0;
  pthread_mutex_unlock(&l->ic->lock);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  setenv("DCCL_TRANSPORT", "ib", 1);
  /* 4 ms per try, 3 retries: the retry case fails at once (with 16 ms x 7, soft-RoCE under emulation did not
   * report it within 100 s). */
  setenv("DCCL_IB_TIMEOUT", "10", 0);
  setenv("DCCL_IB_RETRY_CNT", "3", 0);
  if (!getenv("DCCL_ROCE_VM") && !getenv("DCCL_IB_HCA")) printf("note: expects an RDMA device (scripts/roce-vm.sh)\n");
  float *buf[2] = {malloc(COUNT * sizeof(float)), malloc(COUNT * sizeof(float))};
  printf("leaks, destroy:\n");
  leaks("destroy", buf);
  printf("leaks, abort:\n");
  leaks("abort", buf);
  printf("zero-copy:\n");
  zero_copy(buf);
  printf("completion errors:\n");
  completion_error("write to a deregistered FIFO", deregister_fifo, "remote access error", NULL, buf);
  /* (Soft-RoCE keeps acknowledging nothing yet timing nothing out for writes to a QP in the error state: only
   * the flush is checked there; the retry case below writes to a QP number nobody owns.) */
  completion_error("receiver QP in the error state", qp_to_error, NULL, "Flushed", buf);
  /* Soft-RoCE under emulation at times reports nothing for those writes (about one run in three): then the link's
   * own deadline names the unanswered write (30 s). */
  completion_error("writer pointed at a QP nobody owns", repoint_writer,
                   "transport retry counter exceeded|has had no completion for", NULL, buf);
  free(buf[0]);
  free(buf[1]);
  printf("%s (%d failures)\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
