/* The shared-memory transport between two real processes: setup/connect through a blob exchange, 1000 slots of
 * patterned data, nothing left in /dev/shm, a killed or aborting peer reported fast with its rank, a FIFO that does
 * not fit reported as an error (not a SIGBUS), and stale segments of dead processes swept. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transport_harness.h"
#include "transports/registry.h"
#include "transports/shm/shm_private.h"
#include "transports/transport.h"
#include "util/error.h"
#include "util/params.h"

/* One rank of a fake two-rank communicator, holding one link. */
struct side {
  struct dccl_transport_ctx ctx; /* all a transport sees of its communicator */
  _Atomic int abort_flag;
  struct dccl_peer_info peers[2];
  struct dccl_conn conn;
};

static uint64_t random_u64(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v)) v = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
  return v;
}

static void side_init(struct side *s, int rank, int is_send, uint64_t nonce) {
  memset(s, 0, sizeof(*s));
  s->ctx.rank = rank;
  s->ctx.nranks = 2;
  s->ctx.peers = s->peers;
  s->ctx.abort_flag = &s->abort_flag;
  for (int r = 0; r < 2; r++) {
    s->peers[r].rank = r;
    s->peers[r].host_hash = s->peers[r].real_host_hash = 0x1234;
    s->peers[r].comm_nonce = nonce;
    snprintf(s->peers[r].hostname, sizeof(s->peers[r].hostname), "host%d", r);
  }
  s->peers[rank].pid = getpid();
  s->conn.transport = dccl_transport_find("shm");
  s->conn.ctx = &s->ctx;
  s->conn.peer = 1 - rank;
  s->conn.is_send = is_send;
  s->conn.lane = 0;
}

struct blob_msg {
  int pid;
  char blob[DCCL_CONN_INFO_BYTES];
};

/* setup, swap blobs (and pids) with the peer over `sock`, connect. */
static ncclResult_t link_up(struct side *s, int sock) {
  struct blob_msg mine, theirs;
  memset(&mine, 0, sizeof(mine));
  mine.pid = getpid();
  ncclResult_t res = s->conn.transport->setup(&s->conn, mine.blob);
  if (res != ncclSuccess) return res;
  if (write_all(sock, &mine, sizeof(mine)) || read_all(sock, &theirs, sizeof(theirs), 20)) return ncclSystemError;
  s->peers[s->conn.peer].pid = theirs.pid;
  return s->conn.transport->connect(&s->conn, theirs.blob);
}

/* How many /dev/shm names carry this nonce (the name holds it as 16 hex digits). */
static int shm_names_with(uint64_t nonce) {
  char key[32];
  snprintf(key, sizeof(key), "-%016" PRIx64 "-", nonce);
  DIR *d = opendir("/dev/shm");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, DCCL_SHM_PREFIX, strlen(DCCL_SHM_PREFIX)) == 0 && strstr(e->d_name, key)) n++;
  closedir(d);
  return n;
}

static unsigned char pattern(uint64_t seq, uint64_t j) {
  return (unsigned char)(seq * 131 + j * 7 + (j >> 9));
}

/* Slots of both protocols, mixed: the sender asks for LL on odd slots (given where the payload fits) and bulk on
 * even ones; the receiver reads each as it came. Two slots in three are small enough for LL. */
static int send_proto(uint64_t i) { return i % 2 ? DCCL_PROTO_LL : DCCL_PROTO_BULK; }
static uint64_t shm_slot_len(uint64_t i, uint64_t slot_bytes) {
  return slot_len(i, i % 3 ? DCCL_LL_MAX_BYTES : slot_bytes);
}

/* Sends n slots; returns failures. */
static int send_slots(struct dccl_conn *c, uint64_t n) {
  uint64_t slot_bytes = c->desc.slot_bytes;
  for (uint64_t i = 0; i < n; i++) {
    struct dccl_send_slot ss;
    uint64_t len = shm_slot_len(i, slot_bytes);
    double end = now_s() + 20;
    while (!dccl_conn_send_slot(c, len, send_proto(i), &ss)) {
      if (now_s() > end) {
        fprintf(stderr, "sender stuck at slot %" PRIu64 "\n", i);
        return 1;
      }
      sched_yield();
    }
    unsigned char *payload = ss.payload;
    for (uint64_t j = 0; j < len; j++) payload[j] = pattern(i, j);
    dccl_conn_send_post(c, &ss, len, i, (uint32_t)(i % 7));
  }
  return 0;
}

/* Receives and verifies n slots; returns failures. */
static int recv_slots(struct dccl_conn *c, uint64_t n) {
  uint64_t slot_bytes = c->desc.slot_bytes;
  int bad = 0;
  for (uint64_t i = 0; i < n; i++) {
    struct dccl_recv_slot rs;
    uint64_t len = shm_slot_len(i, slot_bytes);
    double end = now_s() + 20;
    while (!dccl_conn_recv_slot(c, &rs)) {
      if (now_s() > end) {
        fprintf(stderr, "receiver stuck at slot %" PRIu64 "\n", i);
        return bad + 1;
      }
      sched_yield();
    }
    const struct dccl_slot_header *h = &rs.h;
    if (h->seq != i || h->bytes != len || h->kind != i % 7 || h->abort != 0) {
      if (bad++ < 5)
        fprintf(stderr, "slot %" PRIu64 ": seq %" PRIu64 " bytes %" PRIu64 " kind %u (want %" PRIu64 ")\n", i, h->seq,
                h->bytes, h->kind, len);
    } else {
      const unsigned char *payload = rs.payload;
      for (uint64_t j = 0; j < len; j++)
        if (payload[j] != pattern(i, j)) {
          if (bad++ < 5) fprintf(stderr, "slot %" PRIu64 " byte %" PRIu64 " differs\n", i, j);
          break;
        }
    }
    dccl_conn_recv_done(c);
  }
  return bad;
}

/* --- tests --- */

static void test_can_connect(void) {
  struct dccl_peer_info a = {.real_host_hash = 1, .host_hash = 1}, b = {.real_host_hash = 1, .host_hash = 2},
                        c = {.real_host_hash = 2, .host_hash = 1};
  const struct dccl_transport *t = dccl_transport_find("shm");
  CHECK(t->can_connect(&a, &b, NULL, NULL) == 1, "same real host must allow shm");
  CHECK(t->can_connect(&a, &c, NULL, NULL) == 0, "different real hosts must refuse shm");
  CHECK(t->can_connect(&c, &a, NULL, NULL) == 0, "the answer must be symmetric");
  CHECK(!t->moves_bytes && t->host_local, "ops table shape");
}

static int make_segment(const char *name) {
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}
static int segment_exists(const char *name) {
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd < 0) return 0;
  close(fd);
  return 1;
}
static pid_t dead_pid(void) {
  pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, NULL, 0);
  return p;
}

/* First, in a fresh child: the first receive-side setup of a process sweeps segments of dead creators. */
static void test_sweep_on_first_setup(void) {
  uint64_t nonce = random_u64();
  char stale[96];
  snprintf(stale, sizeof(stale), "/" DCCL_SHM_PREFIX "%d-%016" PRIx64 "-stale", (int)dead_pid(), nonce);
  CHECK(make_segment(stale) == 0, "cannot create %s: %s", stale, strerror(errno));
  pid_t child = fork();
  if (child == 0) {
    struct side s;
    side_init(&s, 0, 0, nonce);
    char blob[DCCL_CONN_INFO_BYTES];
    ncclResult_t res = s.conn.transport->setup(&s.conn, blob);
    int bad = res != ncclSuccess;
    s.conn.transport->close(&s.conn);
    _exit(bad);
  }
  CHECK(child_failures(child) == 0, "receive setup in a fresh process failed");
  CHECK(!segment_exists(stale), "stale segment %s of a dead pid was not swept by the first setup", stale);
  shm_unlink(stale);
}

static void test_sweep_direct(void) {
  uint64_t nonce = random_u64();
  char stale[96], live[96];
  snprintf(stale, sizeof(stale), "/" DCCL_SHM_PREFIX "%d-%016" PRIx64 "-stale", (int)dead_pid(), nonce);
  snprintf(live, sizeof(live), "/" DCCL_SHM_PREFIX "%d-%016" PRIx64 "-live", (int)getpid(), nonce);
  CHECK(make_segment(stale) == 0 && make_segment(live) == 0, "cannot create test segments");
  CHECK(dccl_shm_sweep_stale() >= 1, "sweep reported nothing removed");
  CHECK(!segment_exists(stale), "segment of a dead pid survived the sweep");
  CHECK(segment_exists(live), "segment of a live pid was swept");
  shm_unlink(live);
  shm_unlink(stale);
}

/* Parent receives, child sends: 1000 slots, and /dev/shm is clean after connect and after close. */
static void test_transfer(void) {
  uint64_t nonce = random_u64();
  int sock;
  pid_t child = fork_linked(&sock);
  if (child < 0) return;
  if (child == 0) {
    struct side s;
    side_init(&s, 1, 1, nonce);
    int bad = link_up(&s, sock) != ncclSuccess;
    if (!bad) {
      bad += s.conn.transport->send_flushed(&s.conn) != 1;
      notify(sock); /* connected */
      bad += send_slots(&s.conn, 1000);
      bad += await(sock, 30) != 0; /* receiver done */
    }
    s.conn.transport->close(&s.conn);
    _exit(bad);
  }
  struct side s;
  side_init(&s, 0, 0, nonce);
  CHECK(shm_names_with(nonce) == 0, "a segment with a fresh nonce already exists");
  ncclResult_t res = link_up(&s, sock);
  CHECK(res == ncclSuccess, "receive side link_up: %d %s", res, dccl_last_error());
  if (res == ncclSuccess) {
    CHECK(dccl_conn_bound(&s.conn) && s.conn.desc.nslots == dccl_param_int(DCCL_PARAM_NSLOTS) &&
              s.conn.desc.slot_bytes == (uint64_t)dccl_param_int(DCCL_PARAM_CHUNK_SIZE),
          "FIFO geometry is not the parameters'");
    CHECK(s.conn.desc.protos == (DCCL_PROTO_BIT(DCCL_PROTO_BULK) | DCCL_PROTO_BIT(DCCL_PROTO_LL)) &&
              s.conn.desc.ll_bytes == DCCL_LL_MAX_BYTES,
          "shm must carry LL slots of %u bytes (protos %#x, %u bytes)", DCCL_LL_MAX_BYTES, s.conn.desc.protos,
          s.conn.desc.ll_bytes);
    CHECK(await(sock, 20) == 0, "sender never connected");
    CHECK(shm_names_with(nonce) == 0, "segment name still in /dev/shm after both sides connected");
    CHECK(s.conn.transport->check_peer(&s.conn) == ncclSuccess, "live peer reported dead: %s", dccl_last_error());
    int bad = recv_slots(&s.conn, 1000);
    CHECK(bad == 0, "%d of 1000 slots arrived wrong", bad);
    notify(sock);
  }
  s.conn.transport->close(&s.conn);
  CHECK(child_failures(child) == 0, "sender side failed");
  CHECK(shm_names_with(nonce) == 0, "segment left in /dev/shm after close");
  close(sock);
}

/* A receive side whose sender never comes: close still removes the name. */
static void test_close_without_sender(void) {
  uint64_t nonce = random_u64();
  struct side s;
  side_init(&s, 0, 0, nonce);
  char blob[DCCL_CONN_INFO_BYTES];
  CHECK(s.conn.transport->setup(&s.conn, blob) == ncclSuccess, "setup: %s", dccl_last_error());
  CHECK(shm_names_with(nonce) == 1, "receive setup should have made exactly one named segment");
  s.conn.transport->close(&s.conn);
  CHECK(shm_names_with(nonce) == 0, "close left the segment of a never-connected link");
  CHECK(s.conn.priv == NULL && !dccl_conn_bound(&s.conn), "close must clear the conn");
}

/* The peer is SIGKILLed after connecting: check_peer says so within 1 s, naming rank, host and pid. The victim is
 * not reaped first, so a zombie must count as dead. */
static void test_peer_killed(int victim_sends) {
  uint64_t nonce = random_u64();
  int sock;
  pid_t child = fork_linked(&sock);
  if (child < 0) return;
  if (child == 0) {
    struct side s;
    side_init(&s, 1, victim_sends, nonce);
    if (link_up(&s, sock) != ncclSuccess) _exit(1);
    notify(sock);
    for (;;) pause();
  }
  struct side s;
  side_init(&s, 0, !victim_sends, nonce);
  ncclResult_t res = link_up(&s, sock);
  CHECK(res == ncclSuccess, "link_up: %s", dccl_last_error());
  CHECK(await(sock, 20) == 0, "victim never connected");
  CHECK(s.conn.transport->check_peer(&s.conn) == ncclSuccess, "peer reported dead while alive");
  kill(child, SIGKILL);
  double t0 = now_s();
  while ((res = s.conn.transport->check_peer(&s.conn)) == ncclSuccess && now_s() - t0 < 2) usleep(1000);
  double took = now_s() - t0;
  CHECK(res == ncclRemoteError, "killed peer not reported (res %d)", res);
  CHECK(took < 1.0, "death noticed after %.3f s", took);
  char pidtxt[32];
  snprintf(pidtxt, sizeof(pidtxt), "pid %d", (int)child);
  const char *text = dccl_last_error();
  CHECK(strstr(text, "rank 1") && strstr(text, "host1") && strstr(text, pidtxt),
        "error text must name rank 1, host1 and %s: \"%s\"", pidtxt, text);
  s.conn.transport->close(&s.conn);
  waitpid(child, NULL, 0);
  CHECK(shm_names_with(nonce) == 0, "segment left behind after the peer was killed");
  close(sock);
}

/* A sender posts its last slots and exits at once (its operation done, the communicator destroyed): the receiver,
 * checking its peer while it has not read them yet, must still read them; once they are read, the exit counts. */
static void test_sender_exits_after_posting(void) {
  uint64_t nonce = random_u64();
  int sock;
  pid_t child = fork_linked(&sock);
  if (child < 0) return;
  if (child == 0) {
    struct side s;
    side_init(&s, 1, 1, nonce);
    if (link_up(&s, sock) != ncclSuccess) _exit(1);
    _exit(send_slots(&s.conn, 2) ? 1 : 0); /* no close: as a process that just ends */
  }
  struct side s;
  side_init(&s, 0, 0, nonce);
  CHECK(link_up(&s, sock) == ncclSuccess, "link_up: %s", dccl_last_error());
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0, "sender failed");
  CHECK(s.conn.transport->check_peer(&s.conn) == ncclSuccess, "a sender that ended with slots unread was reported "
        "dead before they were read: %s", dccl_last_error());
  CHECK(recv_slots(&s.conn, 2) == 0, "the slots a sender posted before it ended could not be read");
  CHECK(s.conn.transport->check_peer(&s.conn) == ncclRemoteError, "once its slots are read, the ended sender counts");
  s.conn.transport->close(&s.conn);
  close(sock);
}

/* The /proc fallback on its own: alive, zombie, and a pid whose start time changed (reused). */
static void test_proc_fallback(void) {
  char state;
  unsigned long long start;
  CHECK(dccl_shm_proc_stat(getpid(), &state, &start) == ncclSuccess && start > 0, "cannot read own /proc stat");
  CHECK(dccl_shm_proc_alive(getpid(), start) == 1, "own process reported dead");
  CHECK(dccl_shm_proc_alive(getpid(), start + 1) == 0, "a different start time (reused pid) must count as dead");
  pid_t z = fork();
  if (z == 0) _exit(0);
  unsigned long long zstart = 0;
  /* Wait until it is a zombie (not reaped). */
  double end = now_s() + 5;
  while (now_s() < end && !(dccl_shm_proc_stat(z, &state, &zstart) == ncclSuccess && state == 'Z')) usleep(1000);
  CHECK(state == 'Z', "child did not become a zombie");
  CHECK(dccl_shm_proc_alive(z, zstart) == 0, "a zombie must count as dead");
  struct dccl_shm_peer_watch w;
  dccl_shm_watch_start(&w, z);
  CHECK(dccl_shm_watch_alive(&w) == 0, "pidfd watch: a zombie must count as dead");
  dccl_shm_watch_stop(&w);
  waitpid(z, NULL, 0);
  CHECK(dccl_shm_proc_alive(z, zstart) == 0, "a reaped pid must count as dead");
}

/* One side aborts: the other's check_peer names the aborting rank; the aborting side's own stays quiet. */
static void test_abort(void) {
  uint64_t nonce = random_u64();
  int sock;
  pid_t child = fork_linked(&sock);
  if (child < 0) return;
  if (child == 0) {
    struct side s;
    side_init(&s, 1, 1, nonce);
    int bad = link_up(&s, sock) != ncclSuccess;
    if (!bad) {
      (void)dccl_error(ncclRemoteError, "the original reason");
      s.conn.transport->abort(&s.conn);
      bad += s.conn.transport->check_peer(&s.conn) != ncclRemoteError;
      bad += strcmp(dccl_last_error(), "the original reason") != 0; /* its own abort must not bury the reason */
      notify(sock);
      bad += await(sock, 20) != 0;
    }
    s.conn.transport->close(&s.conn);
    _exit(bad);
  }
  struct side s;
  side_init(&s, 0, 0, nonce);
  CHECK(link_up(&s, sock) == ncclSuccess, "link_up: %s", dccl_last_error());
  CHECK(await(sock, 20) == 0, "peer never aborted");
  ncclResult_t res = s.conn.transport->check_peer(&s.conn);
  CHECK(res == ncclRemoteError, "abort by the peer not reported (%d)", res);
  CHECK(strstr(dccl_last_error(), "rank 1 aborted") != NULL, "text must name rank 1: \"%s\"", dccl_last_error());
  /* A second abort (ours) must not overwrite the first rank's mark. */
  s.conn.transport->abort(&s.conn);
  CHECK(dccl_conn_peer_aborted(&s.conn) == 2, "the first aborting rank must stay recorded");
  notify(sock);
  s.conn.transport->close(&s.conn);
  CHECK(child_failures(child) == 0, "aborting side failed");
  close(sock);
}

/* A FIFO larger than /dev/shm: posix_fallocate refuses it, and the error names the size and /dev/shm. */
static void test_fallocate_too_big(void) {
  struct statvfs vfs;
  if (statvfs("/dev/shm", &vfs) != 0 || vfs.f_blocks == 0) {
    fprintf(stderr, "note: /dev/shm has no size limit here; the too-big check is not run (not counted)\n");
    return;
  }
  uint64_t too_big = (uint64_t)vfs.f_blocks * vfs.f_frsize + (64ull << 20);
  uint64_t nonce = random_u64();
  struct side s;
  side_init(&s, 0, 0, nonce);
  char blob[DCCL_CONN_INFO_BYTES];
  double t0 = now_s();
  ncclResult_t res = dccl_shm_setup_geometry(&s.conn, blob, 1, too_big);
  CHECK(res == ncclSystemError, "oversized segment gave %d, want ncclSystemError", res);
  CHECK(now_s() - t0 < 5, "failing took %.1f s", now_s() - t0);
  char size_txt[32];
  snprintf(size_txt, sizeof(size_txt), "%" PRIu64, dccl_fifo_bytes(1, too_big, DCCL_LL_MAX_BYTES));
  CHECK(strstr(dccl_last_error(), "/dev/shm") && strstr(dccl_last_error(), size_txt),
        "text must name /dev/shm and %s bytes: \"%s\"", size_txt, dccl_last_error());
  CHECK(s.conn.priv == NULL && !dccl_conn_bound(&s.conn), "failed setup must leave the conn empty");
  CHECK(shm_names_with(nonce) == 0, "failed setup left a segment");
  s.conn.transport->close(&s.conn); /* safe on a failed setup */
}

/* RLIMIT_FSIZE below the FIFO size: an error in words, not SIGXFSZ (left at its fatal default) or SIGBUS. */
static void test_rlimit_fsize(void) {
  uint64_t nonce = random_u64();
  pid_t child = fork();
  if (child == 0) {
    struct rlimit lim = {.rlim_cur = 1 << 20, .rlim_max = RLIM_INFINITY};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(50);
    struct side s;
    side_init(&s, 0, 0, nonce);
    char blob[DCCL_CONN_INFO_BYTES];
    ncclResult_t res = dccl_shm_setup_geometry(&s.conn, blob, 8, 4 << 20);
    int bad = res != ncclSystemError;
    bad += strstr(dccl_last_error(), "RLIMIT_FSIZE") == NULL;
    _exit(bad);
  }
  CHECK(child_failures(child) == 0, "RLIMIT_FSIZE case did not fail cleanly");
  CHECK(shm_names_with(nonce) == 0, "RLIMIT_FSIZE case left a segment");
}

static void test_bad_geometry(void) {
  struct side s;
  side_init(&s, 0, 0, random_u64());
  char blob[DCCL_CONN_INFO_BYTES];
  CHECK(dccl_shm_setup_geometry(&s.conn, blob, 0, 4096) == ncclInvalidArgument, "0 slots accepted");
  CHECK(dccl_shm_setup_geometry(&s.conn, blob, 4, 1ull << 60) == ncclInvalidArgument, "absurd slot size accepted");
}

int main(void) {
  setenv("DCCL_DEBUG", "NONE", 0); /* the failures provoked here would otherwise fill the log */
  test_sweep_on_first_setup();
  test_can_connect();
  test_sweep_direct();
  test_transfer();
  test_close_without_sender();
  test_peer_killed(1);
  test_peer_killed(0);
  test_sender_exits_after_posting();
  test_proc_fallback();
  test_abort();
  test_fallocate_too_big();
  test_rlimit_fsize();
  test_bad_geometry();
  printf("test_transport_shm: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
