/* The TCP socket transport between two real processes: blob exchange and connect, 1000 slots of patterned data
 * over 1, 2 and 3 streams, loopback throughput for 64 MiB, a killed peer reported by progress within 1 s with its
 * rank and host, abort and clean close told apart, several links sorted by token whatever the accept order, and
 * foreign connections on the listener dropped without disturbing the real ones. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transport_harness.h"
#include "transports/link_pump.h"
#include "transports/net_socket/socket_private.h"
#include "transports/registry.h"
#include "transports/transport.h"
#include "util/error.h"
#include "util/net_addr.h"
#include "util/params.h"
#include "util/socket.h"

static const struct dccl_transport *T;

#define MAX_LANES 2
/* One rank of a fake two-rank communicator, with up to MAX_LANES links to the other rank. */
struct side {
  struct dccl_transport_ctx ctx; /* all a transport sees of its communicator */
  _Atomic int abort_flag;
  struct dccl_peer_info peers[2];
  struct dccl_conn conn[MAX_LANES];
};

static void side_init(struct side *s, int rank, int is_send) {
  memset(s, 0, sizeof(*s));
  s->ctx.rank = rank;
  s->ctx.nranks = 2;
  s->ctx.peers = s->peers;
  s->ctx.abort_flag = &s->abort_flag;
  for (int r = 0; r < 2; r++) {
    s->peers[r].rank = r;
    s->peers[r].host_hash = s->peers[r].real_host_hash = 100 + (uint64_t)r; /* "different hosts" */
    snprintf(s->peers[r].hostname, sizeof(s->peers[r].hostname), "host%d", r);
  }
  s->peers[rank].pid = getpid();
  for (int l = 0; l < MAX_LANES; l++) {
    s->conn[l].transport = T;
    s->conn[l].ctx = &s->ctx;
    s->conn[l].peer = 1 - rank;
    s->conn[l].is_send = is_send;
    s->conn[l].lane = l;
  }
}

static void side_free(struct side *s) {
  for (int l = 0; l < MAX_LANES; l++) T->close(&s->conn[l]);
  T->comm_free(s->ctx.transport_state[T->index], 0);
  s->ctx.transport_state[T->index] = NULL;
}

/* Geometry of a test link: 0 slots means "from the parameters, through the ops' setup". */
struct geometry {
  uint32_t nslots, nstreams;
  uint64_t slot_bytes;
};

static ncclResult_t setup_one(struct dccl_conn *c, const struct geometry *g, void *blob) {
  if (g->nslots == 0) return T->setup(c, blob);
  return dccl_socket_setup_geometry(c, blob, g->nslots, g->slot_bytes, g->nstreams);
}

/* Sets up lanes 0..nlanes-1, swaps blobs with the peer over `sock`, then connects them in `order`. */
static ncclResult_t link_up(struct side *s, int sock, const struct geometry *g, int nlanes, const int *order) {
  char mine[MAX_LANES][DCCL_CONN_INFO_BYTES], theirs[MAX_LANES][DCCL_CONN_INFO_BYTES];
  int pid = getpid(), peer_pid;
  for (int l = 0; l < nlanes; l++) {
    ncclResult_t res = setup_one(&s->conn[l], g, mine[l]);
    if (res != ncclSuccess) return res;
  }
  if (write_all(sock, &pid, sizeof(pid)) || write_all(sock, mine, sizeof(mine[0]) * (size_t)nlanes) ||
      read_all(sock, &peer_pid, sizeof(peer_pid), 20) || read_all(sock, theirs, sizeof(theirs[0]) * (size_t)nlanes, 20))
    return ncclSystemError;
  s->peers[1 - s->ctx.rank].pid = peer_pid;
  for (int k = 0; k < nlanes; k++) {
    int l = order ? order[k] : k;
    ncclResult_t res = T->connect(&s->conn[l], theirs[l]);
    if (res != ncclSuccess) return res;
  }
  return ncclSuccess;
}

static unsigned char pattern(uint64_t seq, uint64_t j, int lane) {
  return (unsigned char)(seq * 131 + j * 7 + (j >> 9) + (uint64_t)lane * 29);
}

/* Runs progress; a failure is reported and counted. Like the executor's waits it spins a little, then yields the
 * core (both ends share two cores in CI). */
static int pumped; /* a link pump progresses the links: the test threads only fill and drain the FIFOs */
static int pump_idle(struct dccl_conn *c, int *idle) {
  if (pumped) {
    sched_yield();
    return 0;
  }
  ncclResult_t res = T->progress(c);
  if (res != ncclSuccess) fprintf(stderr, "progress failed (%d): %s\n", res, dccl_last_error());
  if (idle && ++*idle > 64) sched_yield();
  return res != ncclSuccess;
}
static int pump(struct dccl_conn *c) {
  return pump_idle(c, NULL);
}

/* Posts slots first..first+n-1 (waiting for room as it goes); `full` fills every byte of slot_len bytes, else a
 * whole slot carries only its seq in the first 8 bytes. */
static int post_slots(struct dccl_conn *c, uint64_t first, uint64_t n, int full) {
  uint64_t slot_bytes = c->desc.slot_bytes;
  for (uint64_t i = first; i < first + n; i++) {
    struct dccl_send_slot ss;
    uint64_t len = full ? slot_len(i, slot_bytes) : slot_bytes;
    double end = now_s() + 30;
    int idle = 0;
    /* LL asked for, bulk given: sockets carry bulk slots only. */
    while (!dccl_conn_send_slot(c, len, DCCL_PROTO_LL, &ss)) {
      if (pump_idle(c, &idle)) return 1;
      if (now_s() > end) return fprintf(stderr, "sender stuck at slot %" PRIu64 "\n", i), 1;
    }
    unsigned char *payload = ss.payload;
    if (full)
      for (uint64_t j = 0; j < len; j++) payload[j] = pattern(i, j, c->lane);
    else
      memcpy(payload, &i, sizeof(i));
    dccl_conn_send_post(c, &ss, len, i, (uint32_t)(i % 7));
    if (pump(c)) return 1;
  }
  return 0;
}

/* Posts slots first..first+n-1 as post_slots does, then waits until they have all left. */
static int send_slots(struct dccl_conn *c, uint64_t first, uint64_t n, int full) {
  if (post_slots(c, first, n, full)) return 1;
  double end = now_s() + 30;
  int idle = 0;
  while (!T->send_flushed(c)) {
    if (pump_idle(c, &idle)) return 1;
    if (now_s() > end) return fprintf(stderr, "sender never flushed\n"), 1;
  }
  return 0;
}

static int recv_slots(struct dccl_conn *c, uint64_t first, uint64_t n, int full) {
  uint64_t slot_bytes = c->desc.slot_bytes;
  int bad = 0;
  for (uint64_t i = first; i < first + n; i++) {
    struct dccl_recv_slot rs;
    uint64_t len = full ? slot_len(i, slot_bytes) : slot_bytes;
    double end = now_s() + 30;
    int idle = 0;
    while (!dccl_conn_recv_slot(c, &rs)) {
      if (pump_idle(c, &idle)) return bad + 1;
      if (now_s() > end) return fprintf(stderr, "receiver stuck at slot %" PRIu64 "\n", i), bad + 1;
    }
    const struct dccl_slot_header *h = &rs.h;
    const unsigned char *payload = rs.payload;
    if (h->seq != i || h->bytes != len || h->kind != i % 7 || h->abort != 0) {
      if (bad++ < 5)
        fprintf(stderr,
                "lane %d slot %" PRIu64 ": seq %" PRIu64 " bytes %" PRIu64 " kind %u (want bytes %" PRIu64 ")\n",
                c->lane, i, h->seq, h->bytes, h->kind, len);
    } else if (full) {
      for (uint64_t j = 0; j < len; j++)
        if (payload[j] != pattern(i, j, c->lane)) {
          if (bad++ < 5) fprintf(stderr, "lane %d slot %" PRIu64 " byte %" PRIu64 " differs\n", c->lane, i, j);
          break;
        }
    } else {
      uint64_t seq;
      memcpy(&seq, payload, sizeof(seq));
      if (seq != i && bad++ < 5) fprintf(stderr, "slot %" PRIu64 " carries payload of slot %" PRIu64 "\n", i, seq);
    }
    dccl_conn_recv_done(c);
  }
  return bad;
}

/* --- tests --- */

static void test_can_connect(void) {
  struct dccl_peer_info a = {.real_host_hash = 1}, b = {.real_host_hash = 2};
  CHECK(T->can_connect(&a, &b, NULL, NULL) == 1 && T->can_connect(&a, &a, NULL, NULL) == 1, "sockets reach every peer");
}

/* Parent receives, child sends, `n` slots on each of `nlanes` links; the receiver connects in `order`. */
static void run_transfer(const char *what, const struct geometry *g, int nlanes, const int *recv_order, uint64_t n) {
  int sock;
  pid_t child = fork_linked(&sock);
  if (child < 0) return;
  if (child == 0) {
    struct side s;
    side_init(&s, 1, 1);
    int bad = link_up(&s, sock, g, nlanes, NULL) != ncclSuccess;
    if (bad) fprintf(stderr, "%s: send side connect: %s\n", what, dccl_last_error());
    for (int l = 0; l < nlanes && !bad; l++) bad += send_slots(&s.conn[l], 0, n, 1);
    bad += await(sock, 60) != 0;
    side_free(&s);
    _exit(bad);
  }
  struct side s;
  side_init(&s, 0, 0);
  ncclResult_t res = link_up(&s, sock, g, nlanes, recv_order);
  CHECK(res == ncclSuccess, "%s: receive side connect: %s", what, dccl_last_error());
  if (res == ncclSuccess) {
    uint32_t want_slots = g->nslots ? g->nslots : (uint32_t)dccl_param_int(DCCL_PARAM_NSLOTS);
    CHECK(s.conn[0].desc.nslots == want_slots, "%s: FIFO has %u slots, want %u", what, s.conn[0].desc.nslots,
          want_slots);
    CHECK(s.conn[0].desc.protos == DCCL_PROTO_BIT(DCCL_PROTO_BULK) && s.conn[0].desc.ll_bytes == 0,
          "%s: sockets must carry bulk slots only", what);
    struct dccl_socket_comm_state *st = s.ctx.transport_state[T->index];
    CHECK(st && st->nstash == 0 && st->ntokens == 0, "%s: stash or tokens left after every link connected", what);
    /* Lanes are sent one after the other, so the lane sent last is read last. */
    for (int l = 0; l < nlanes; l++) {
      int bad = recv_slots(&s.conn[l], 0, n, 1);
      CHECK(bad == 0, "%s: lane %d: %d of %" PRIu64 " slots arrived wrong", what, l, bad, n);
    }
    CHECK(T->check_peer(&s.conn[0]) == ncclSuccess, "%s: live peer reported gone: %s", what, dccl_last_error());
  }
  notify(sock);
  CHECK(child_failures(child) == 0, "%s: send side failed", what);
  side_free(&s);
  CHECK(s.ctx.transport_state[T->index] == NULL, "comm_free must clear the state");
  close(sock);
}

#define ROUNDS 3 /* timed 64 MiB rounds per throughput measurement */

/* 64 MiB through one link of 256 KiB slots over loopback, after 16 MiB to warm up, 3 times; prints GB/s. */
static void run_throughput(uint32_t nstreams) {
  const uint64_t slot_bytes = 256 << 10, total = 64ull << 20, n = total / slot_bytes, warm = n / 4;
  struct geometry g = {.nslots = 8, .slot_bytes = slot_bytes, .nstreams = nstreams};
  int sock;
  pid_t child = fork_linked(&sock);
  if (child < 0) return;
  if (child == 0) {
    struct side s;
    side_init(&s, 1, 1);
    int bad = link_up(&s, sock, &g, 1, NULL) != ncclSuccess;
    bad += await(sock, 20) != 0; /* go */
    if (!bad) bad += send_slots(&s.conn[0], 0, warm + n * ROUNDS, 0);
    bad += await(sock, 60) != 0;
    side_free(&s);
    _exit(bad);
  }
  struct side s;
  side_init(&s, 0, 0);
  ncclResult_t res = link_up(&s, sock, &g, 1, NULL);
  CHECK(res == ncclSuccess, "throughput: connect: %s", dccl_last_error());
  if (res == ncclSuccess) {
    /* Warm up (first-touch page faults, TCP window growth), then time 64 MiB, ROUNDS times. */
    notify(sock);
    int bad = recv_slots(&s.conn[0], 0, warm, 0);
    double best = 0, sum = 0;
    for (int r = 0; r < ROUNDS; r++) {
      double t0 = now_s();
      bad += recv_slots(&s.conn[0], warm + n * (uint64_t)r, n, 0);
      double gbps = (double)total / (now_s() - t0) / 1e9;
      best = gbps > best ? gbps : best;
      sum += gbps;
    }
    CHECK(bad == 0, "throughput: %d slots wrong", bad);
    printf("socket transport:    64 MiB in 256 KiB slots, %u stream(s): %.2f GB/s (best of %d), %.2f GB/s (mean)\n",
           nstreams, best, ROUNDS, sum / ROUNDS);
  }
  notify(sock);
  CHECK(child_failures(child) == 0, "throughput: send side failed");
  side_free(&s);
  close(sock);
}

/* Plain blocking loops, for the baseline below. */
static int raw_send(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}
static int raw_recv(int fd, char *p, size_t n) {
  while (n) {
    ssize_t k = recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* The yardstick for run_throughput: the same bytes through one plain blocking TCP connection over the same
 * interface, in 256 KiB send() and recv() calls; prints GB/s. */
static void run_raw_tcp_baseline(void) {
  const size_t chunk = 256 << 10, total = 64ull << 20, warm = total / 4;
  struct sockaddr_storage addr;
  int lfd = -1;
  if (dccl_socket_local_addr(&addr) != ncclSuccess || dccl_socket_listen(&addr, &lfd) != ncclSuccess) {
    CHECK(0, "baseline: no listener: %s", dccl_last_error());
    return;
  }
  char *buf = malloc(chunk);
  memset(buf, 1, chunk);
  pid_t child = fork();
  if (child == 0) {
    int fd;
    if (dccl_socket_connect(&addr, 10000, &fd) != ncclSuccess) _exit(1);
    for (size_t sent = 0; sent < warm + total * ROUNDS; sent += chunk)
      if (raw_send(fd, buf, chunk)) _exit(2);
    close(fd);
    _exit(0);
  }
  struct pollfd p = {.fd = lfd, .events = POLLIN};
  int fd = poll(&p, 1, 10000) == 1 ? accept(lfd, NULL, NULL) : -1;
  close(lfd);
  int ok = fd >= 0;
  for (size_t got = 0; ok && got < warm; got += chunk) ok = raw_recv(fd, buf, chunk) == 0;
  double best = 0, sum = 0;
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = now_s();
    for (size_t got = 0; ok && got < total; got += chunk) ok = raw_recv(fd, buf, chunk) == 0;
    double gbps = (double)total / (now_s() - t0) / 1e9;
    best = gbps > best ? gbps : best;
    sum += gbps;
  }
  CHECK(ok, "baseline transfer failed");
  if (ok)
    printf(
        "plain TCP baseline:  64 MiB in 256 KiB send/recv calls, 1 connection: %.2f GB/s (best of %d), %.2f GB/s "
        "(mean)\n",
        best, ROUNDS, sum / ROUNDS);
  if (fd >= 0) close(fd);
  free(buf);
  if (!ok) kill(child, SIGKILL);
  CHECK(child_failures(child) == 0 || !ok, "baseline sender failed");
}

/* The child is SIGKILLed mid-stream: the parent's progress reports it within 1 s, naming rank 1 and host1. */
static void test_peer_killed(int victim_sends) {
  struct geometry g = {.nslots = 4, .slot_bytes = 64 << 10, .nstreams = 2};
  int sock;
  pid_t child = fork_linked(&sock);
  if (child < 0) return;
  if (child == 0) {
    struct side s;
    side_init(&s, 1, victim_sends);
    if (link_up(&s, sock, &g, 1, NULL) != ncclSuccess) _exit(1);
    if (victim_sends) { /* some data, then silence: the receiver sees a healthy but idle link until the kill */
      if (send_slots(&s.conn[0], 0, 3, 1)) _exit(2);
    }
    notify(sock);
    for (;;) pause();
  }
  struct side s;
  side_init(&s, 0, !victim_sends);
  struct dccl_conn *c = &s.conn[0];
  ncclResult_t res = link_up(&s, sock, &g, 1, NULL);
  CHECK(res == ncclSuccess, "connect: %s", dccl_last_error());
  CHECK(await(sock, 20) == 0, "victim never got ready");
  if (res == ncclSuccess && victim_sends) {
    CHECK(recv_slots(c, 0, 3, 1) == 0, "slots before the kill arrived wrong");
  } else if (res == ncclSuccess) {
    /* Fill the FIFO and the socket buffers: the victim reads nothing. */
    for (int i = 0; i < 2000; i++) {
      struct dccl_send_slot ss;
      if (dccl_conn_send_slot(c, c->desc.slot_bytes, DCCL_PROTO_BULK, &ss))
        dccl_conn_send_post(c, &ss, c->desc.slot_bytes, (uint64_t)i, 0);
      if (T->progress(c) != ncclSuccess) break;
    }
  }
  CHECK(T->progress(c) == ncclSuccess && T->check_peer(c) == ncclSuccess, "link broken before the kill: %s",
        dccl_last_error());
  kill(child, SIGKILL);
  double t0 = now_s();
  while ((res = T->progress(c)) == ncclSuccess && now_s() - t0 < 2) {
    struct dccl_send_slot ss;
    if (victim_sends == 0 && dccl_conn_send_slot(c, 100, DCCL_PROTO_BULK, &ss)) dccl_conn_send_post(c, &ss, 100, 0, 0);
    usleep(100);
  }
  double took = now_s() - t0;
  CHECK(res == ncclRemoteError, "killed %s not reported by progress (res %d)", victim_sends ? "sender" : "receiver",
        res);
  CHECK(took < 1.0, "death noticed after %.3f s", took);
  const char *text = dccl_last_error();
  CHECK(strstr(text, "rank 1") && strstr(text, "host1") && strstr(text, "closed"),
        "error text must name rank 1 and host1: \"%s\"", text);
  CHECK(T->check_peer(c) == ncclRemoteError, "check_peer must also see the dead peer");
  waitpid(child, NULL, 0);
  side_free(&s);
  close(sock);
}

/* The sender aborts (the receiver's progress fails, naming it) or closes cleanly (progress stays quiet, since
 * nothing was pending; check_peer says the peer left, but not while the last slot, which came on one stream
 * before both goodbyes, still waits to be taken). */
static void test_abort_or_close(int abort_it) {
  struct geometry g = {.nslots = 4, .slot_bytes = 4096, .nstreams = 2};
  int sock;
  pid_t child = fork_linked(&sock);
  if (child < 0) return;
  if (child == 0) {
    struct side s;
    side_init(&s, 1, 1);
    int bad = link_up(&s, sock, &g, 1, NULL) != ncclSuccess;
    if (!bad) bad += send_slots(&s.conn[0], 0, 5, 1);
    if (!bad && abort_it) {
      (void)dccl_error(ncclRemoteError, "the original reason");
      T->abort(&s.conn[0]);
      bad += T->progress(&s.conn[0]) != ncclRemoteError;
      bad += strcmp(dccl_last_error(), "the original reason") != 0; /* its own abort must not bury the reason */
    }
    side_free(&s); /* clean close: says goodbye */
    notify(sock);
    _exit(bad);
  }
  struct side s;
  side_init(&s, 0, 0);
  struct dccl_conn *c = &s.conn[0];
  ncclResult_t res = link_up(&s, sock, &g, 1, NULL);
  CHECK(res == ncclSuccess, "connect: %s", dccl_last_error());
  CHECK(recv_slots(c, 0, abort_it ? 5 : 4, 1) == 0, "slots before the %s arrived wrong", abort_it ? "abort" : "close");
  CHECK(await(sock, 20) == 0, "peer never finished");
  CHECK(child_failures(child) == 0, "sending side failed");
  if (!abort_it) { /* slot 4 (stream 0) and both goodbyes arrive; the slot is there to take: no failure yet */
    for (double t1 = now_s(); now_s() - t1 < 0.1;) {
      CHECK(T->progress(c) == ncclSuccess, "progress before the last slot was taken: %s", dccl_last_error());
      usleep(1000);
    }
    CHECK(dccl_ld_acquire_u64(dccl_conn_tail(c)) == 5 && T->check_peer(c) == ncclSuccess,
          "a goodbye after a slot still to take: check_peer must not fail yet: \"%s\"", dccl_last_error());
    CHECK(recv_slots(c, 4, 1, 1) == 0, "the slot before the close arrived wrong");
  }
  double t0 = now_s();
  while ((res = T->progress(c)) == ncclSuccess && now_s() - t0 < 0.3) usleep(1000);
  if (abort_it) {
    CHECK(res == ncclRemoteError && strstr(dccl_last_error(), "rank 1"), "abort not reported by progress: %d \"%s\"",
          res, dccl_last_error());
  } else {
    CHECK(res == ncclSuccess, "a clean close must not fail progress: \"%s\"", dccl_last_error());
    res = T->check_peer(c);
    CHECK(res == ncclRemoteError && strstr(dccl_last_error(), "closed its socket link"),
          "check_peer must say the peer left: %d \"%s\"", res, dccl_last_error());
  }
  side_free(&s);
  close(sock);
}

/* Two links whose receive sides connect in the other order, while foreign connections hit the listener first: one
 * with a wrong token (dropped at once) and one that never finishes its handshake (stashed, closed by comm_free). */
static void test_stash_and_strangers(void) {
  struct geometry g = {.nslots = 4, .slot_bytes = 8192, .nstreams = 2};
  int sock;
  pid_t child = fork_linked(&sock);
  if (child < 0) return;
  if (child == 0) {
    struct side s;
    side_init(&s, 1, 1);
    int bad = link_up(&s, sock, &g, 2, NULL) != ncclSuccess;
    for (int l = 0; l < 2 && !bad; l++) bad += send_slots(&s.conn[l], 0, 50, 1);
    bad += await(sock, 30) != 0;
    side_free(&s);
    _exit(bad);
  }
  struct side s;
  side_init(&s, 0, 0);
  char blob[2][DCCL_CONN_INFO_BYTES];
  int strangers[2] = {-1, -1};
  /* Set up first (this makes the listener), let strangers in, then do the normal exchange with the peer. */
  ncclResult_t res = dccl_socket_setup_geometry(&s.conn[0], blob[0], g.nslots, g.slot_bytes, g.nstreams);
  res = res ? res : dccl_socket_setup_geometry(&s.conn[1], blob[1], g.nslots, g.slot_bytes, g.nstreams);
  CHECK(res == ncclSuccess, "setup: %s", dccl_last_error());
  struct dccl_socket_comm_state *st = s.ctx.transport_state[T->index];
  if (res == ncclSuccess) {
    for (int k = 0; k < 2; k++) {
      strangers[k] = socket(st->addr.ss_family, SOCK_STREAM, 0);
      socklen_t len = st->addr.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
      CHECK(connect(strangers[k], (struct sockaddr *)&st->addr, len) == 0, "stranger cannot connect: %s",
            strerror(errno));
    }
    struct dccl_socket_handshake fake = {
        .magic = DCCL_SOCKET_HANDSHAKE_MAGIC, .token = 12345, .stream = 0, .sender_rank = 1};
    CHECK(write(strangers[0], &fake, sizeof(fake)) == sizeof(fake), "stranger write");
    CHECK(write(strangers[1], &fake, 5) == 5, "stranger write");
  }
  /* The exchange link_up does, by hand, since setup is done. */
  int pid = getpid(), peer_pid = 0;
  char theirs[2][DCCL_CONN_INFO_BYTES];
  CHECK(write_all(sock, &pid, sizeof(pid)) == 0 && write_all(sock, blob, sizeof(blob)) == 0 &&
            read_all(sock, &peer_pid, sizeof(peer_pid), 20) == 0 && read_all(sock, theirs, sizeof(theirs), 20) == 0,
        "blob exchange");
  s.peers[1].pid = peer_pid;
  /* Lane 1 first: lane 0's streams arrive first and must wait in the stash. */
  res = T->connect(&s.conn[1], theirs[1]);
  CHECK(res == ncclSuccess, "lane 1 connect: %s", dccl_last_error());
  res = res ? res : T->connect(&s.conn[0], theirs[0]);
  CHECK(res == ncclSuccess, "lane 0 connect: %s", dccl_last_error());
  if (res == ncclSuccess) {
    for (int l = 0; l < 2; l++) CHECK(recv_slots(&s.conn[l], 0, 50, 1) == 0, "lane %d data wrong", l);
    CHECK(st->nstash == 1, "the silent stranger should still wait in the stash (%d stashed)", st->nstash);
  }
  char c;
  struct pollfd p = {.fd = strangers[0], .events = POLLIN};
  CHECK(poll(&p, 1, 1000) == 1 && recv(strangers[0], &c, 1, 0) == 0, "stranger with a wrong token was not closed");
  notify(sock);
  CHECK(child_failures(child) == 0, "sending side failed");
  side_free(&s);
  p.fd = strangers[1];
  CHECK(poll(&p, 1, 1000) == 1 && recv(strangers[1], &c, 1, 0) == 0, "comm_free did not close the stashed stranger");
  for (int k = 0; k < 2; k++) close(strangers[k]);
  close(sock);
}

/* Mismatched settings fail on both sides at once instead of hanging; an aborted communicator stops the accept wait. */
static void test_mismatch_and_abort_wait(void) {
  struct side snd, rcv;
  side_init(&snd, 1, 1);
  side_init(&rcv, 0, 0);
  char sblob[DCCL_CONN_INFO_BYTES], rblob[DCCL_CONN_INFO_BYTES];
  CHECK(dccl_socket_setup_geometry(&snd.conn[0], sblob, 4, 4096, 2) == ncclSuccess, "send setup");
  CHECK(dccl_socket_setup_geometry(&rcv.conn[0], rblob, 4, 4096, 3) == ncclSuccess, "recv setup");
  CHECK(T->connect(&snd.conn[0], rblob) == ncclInvalidUsage, "sender accepted a different stream count");
  CHECK(strstr(dccl_last_error(), "DCCL_SOCKET_NSTREAMS") != NULL, "text must say which setting: \"%s\"",
        dccl_last_error());
  CHECK(T->connect(&rcv.conn[0], sblob) == ncclInvalidUsage, "receiver accepted a different stream count");
  CHECK(T->connect(&rcv.conn[0], rblob) == ncclInternalError, "a receive side's blob accepted by a receive side");
  side_free(&snd);
  side_free(&rcv);

  side_init(&snd, 1, 1);
  side_init(&rcv, 0, 0);
  CHECK(dccl_socket_setup_geometry(&snd.conn[0], sblob, 4, 4096, 2) == ncclSuccess, "send setup");
  CHECK(dccl_socket_setup_geometry(&rcv.conn[0], rblob, 4, 4096, 2) == ncclSuccess, "recv setup");
  rcv.abort_flag = 1; /* the sender never connects; only the abort can end the wait */
  double t0 = now_s();
  ncclResult_t res = T->connect(&rcv.conn[0], sblob);
  CHECK(res == ncclRemoteError && now_s() - t0 < 2, "aborted accept wait: res %d after %.2f s", res, now_s() - t0);
  CHECK(T->progress(&rcv.conn[0]) == ncclSuccess && T->check_peer(&rcv.conn[0]) == ncclSuccess,
        "an unconnected link has nothing to report");
  side_free(&snd);
  side_free(&rcv);

  /* A receiver that failed never listens again: the sender's connect, refused, stops at the abort (it used to try
   * again for the whole DCCL_BOOTSTRAP_TIMEOUT). */
  side_init(&snd, 1, 1);
  side_init(&rcv, 0, 0);
  CHECK(dccl_socket_setup_geometry(&snd.conn[0], sblob, 4, 4096, 2) == ncclSuccess, "send setup");
  CHECK(dccl_socket_setup_geometry(&rcv.conn[0], rblob, 4, 4096, 2) == ncclSuccess, "recv setup");
  side_free(&rcv); /* its listener closes */
  snd.abort_flag = 1;
  t0 = now_s();
  res = T->connect(&snd.conn[0], rblob);
  CHECK(res == ncclRemoteError && now_s() - t0 < 2, "aborted connect to a closed listener: res %d after %.2f s", res,
        now_s() - t0);
  side_free(&snd);
  CHECK(dccl_socket_setup_geometry(&snd.conn[0], sblob, 4, 4096, 0) == ncclInvalidArgument, "0 streams accepted");
  CHECK(dccl_socket_setup_geometry(&snd.conn[0], sblob, 4, 4096, DCCL_SOCKET_MAX_STREAMS + 1) == ncclInvalidArgument,
        "too many streams accepted");
}

/* --- the link pump (transports/link_pump.h): links whose FIFOs kernels fill and drain, so no caller progresses
 * them --- */

struct pump_report {
  _Atomic int failures;
  ncclResult_t res;
  char text[256];
};
static void on_pump_failed(void *arg, ncclResult_t res) {
  struct pump_report *r = arg;
  r->res = res;
  snprintf(r->text, sizeof(r->text), "%s", dccl_last_error());
  atomic_fetch_add(&r->failures, 1);
}

/* "A kernel runs": the busy hook of the pending-sends case reads it. */
struct pump_report_busy {
  struct pump_report report;
  _Atomic int busy;
};
static int report_busy(void *arg) {
  return atomic_load(&((struct pump_report_busy *)arg)->busy);
}

/* A pump of one link that looks every 200 us; `replays`: as once a graph holds work (it polls while idle), else it
 * has a busy hook (r->busy) and sleeps when idle unless sends wait. */
static struct dccl_link_pump *pump_of(struct dccl_conn *c, struct pump_report_busy *r, int replays) {
  struct dccl_link_pump_hooks hooks = {.busy = replays ? NULL : report_busy, .failed = on_pump_failed, .arg = r};
  struct dccl_link_pump *p = NULL;
  CHECK(dccl_link_pump_create(&p, &hooks, 200, 0) == ncclSuccess, "pump: %s", dccl_last_error());
  CHECK(p && dccl_link_pump_add(p, c) == ncclSuccess, "pump add: %s", dccl_last_error());
  if (p && replays) dccl_link_pump_expect_replays(p); /* nothing kicks these pumps: they must look by themselves */
  return p;
}

/* A pump at each end moves 300 slots while this test's threads only fill and drain the FIFOs, as kernels do. The
 * sender pauses 100 ms before its last 100 slots: both pumps fall asleep (nothing says work is in flight) and must
 * look again by themselves. The sender frees its pump right after its last post: the free moves what is left
 * before it returns. Then the sender dies: the receiver's pump reports it once, naming rank 1. */
static void test_link_pump(void) {
  struct geometry g = {.nslots = 4, .slot_bytes = 32 << 10, .nstreams = 2};
  int sock;
  pid_t child = fork_linked(&sock);
  if (child < 0) return;
  pumped = 1;
  if (child == 0) {
    struct side s;
    side_init(&s, 1, 1);
    if (link_up(&s, sock, &g, 1, NULL) != ncclSuccess) _exit(1);
    struct pump_report_busy rb = {0};
    _Atomic int no_abort = 0;
    struct dccl_link_pump *p = pump_of(&s.conn[0], &rb, 1);
    int bad = send_slots(&s.conn[0], 0, 200, 1) != 0;
    usleep(100000);
    bad += post_slots(&s.conn[0], 200, 100, 1) != 0; /* posted only: no wait for them to leave */
    dccl_link_pump_free(p, 20, &no_abort);
    bad += !T->send_flushed(&s.conn[0]) || atomic_load(&rb.report.failures) != 0;
    notify(sock);
    (void)await(sock, 30); /* the receiver has checked everything: now die without a goodbye */
    _exit(bad ? 3 : (raise(SIGKILL), 4));
  }
  struct side s;
  side_init(&s, 0, 0);
  CHECK(link_up(&s, sock, &g, 1, NULL) == ncclSuccess, "pump: connect: %s", dccl_last_error());
  struct pump_report_busy rb = {0};
  struct pump_report *report = &rb.report;
  _Atomic int no_abort = 0;
  struct dccl_link_pump *p = pump_of(&s.conn[0], &rb, 1);
  int bad = recv_slots(&s.conn[0], 0, 200, 1);
  double paused = now_s();
  bad += recv_slots(&s.conn[0], 200, 1, 1);
  paused = now_s() - paused; /* the sender's 100 ms, and how long its sleeping pump took to look */
  bad += recv_slots(&s.conn[0], 201, 99, 1);
  CHECK(bad == 0, "pump: %d of 300 slots arrived wrong or never", bad);
  CHECK(paused < 0.5, "pump: slot 200 came %.3f s after slot 199 (a pause of 0.1 s; sleeps are 200 us)", paused);
  CHECK(await(sock, 30) == 0, "pump: the sender's free returned before its slots had left (or it failed)");
  notify(sock);
  double t0 = now_s();
  while (atomic_load(&report->failures) == 0 && now_s() - t0 < 5) usleep(1000);
  CHECK(atomic_load(&report->failures) == 1 && report->res == ncclRemoteError && strstr(report->text, "rank 1"),
        "pump: the dead sender was reported %d times (%d: %s)", atomic_load(&report->failures), report->res,
        report->text);
  CHECK(now_s() - t0 < 2, "pump: the death was reported after %.2f s", now_s() - t0);
  dccl_link_pump_free(p, 20, &no_abort); /* a failed pump flushes nothing: returns at once */
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "pump: the sender failed (status %d)", status);
  pumped = 0;
  side_free(&s);
  close(sock);
}

/* A kernel that ends while its last slots still wait for room in the socket: its pump, told of no work in flight
 * and of no graph, must keep looking until they have left (nothing else wakes it). The sender posts 8 slots of
 * 4 MiB, which its FIFO, the sockets (at most 4 MiB each way) and the receiver's FIFO hold, and ends; the receiver
 * drains nothing for 100 ms, then all: the last slot must come long before the second a sleeping pump takes. */
static void test_link_pump_pending_sends(void) {
  struct geometry g = {.nslots = 4, .slot_bytes = 4 << 20, .nstreams = 1};
  int sock;
  pid_t child = fork_linked(&sock);
  if (child < 0) return;
  pumped = 1;
  if (child == 0) {
    struct side s;
    side_init(&s, 1, 1);
    if (link_up(&s, sock, &g, 1, NULL) != ncclSuccess) _exit(1);
    struct pump_report_busy rb = {.busy = 1};
    _Atomic int no_abort = 0;
    struct dccl_link_pump *p = pump_of(&s.conn[0], &rb, 0);
    int bad = post_slots(&s.conn[0], 0, 8, 0); /* whole slots, and no wait for them to leave */
    atomic_store(&rb.busy, 0);                 /* "the kernel ended" */
    notify(sock);
    bad += await(sock, 30) != 0; /* the receiver has them all */
    dccl_link_pump_free(p, 20, &no_abort);
    side_free(&s);
    _exit(bad);
  }
  struct side s;
  side_init(&s, 0, 0);
  CHECK(link_up(&s, sock, &g, 1, NULL) == ncclSuccess, "pending sends: connect: %s", dccl_last_error());
  struct pump_report_busy rb = {.busy = 1};
  _Atomic int no_abort = 0;
  struct dccl_link_pump *p = pump_of(&s.conn[0], &rb, 0);
  CHECK(await(sock, 30) == 0, "pending sends: the sender could not post its 8 slots");
  usleep(100000); /* both pumps fall idle: the sender's with slots its socket has no room for */
  double t0 = now_s();
  int bad = recv_slots(&s.conn[0], 0, 8, 0);
  double took = now_s() - t0;
  CHECK(bad == 0, "pending sends: %d of 8 slots wrong", bad);
  CHECK(took < 0.5, "pending sends: the last slots took %.3f s after the receiver drained (the sender's pump slept)",
        took);
  notify(sock);
  CHECK(child_failures(child) == 0, "pending sends: the sender failed");
  dccl_link_pump_free(p, 20, &no_abort);
  pumped = 0;
  side_free(&s);
  close(sock);
}

int main(void) {
  setenv("DCCL_DEBUG", "NONE", 0); /* the failures provoked here would otherwise fill the log */
  T = dccl_transport_find("socket");
  signal(SIGPIPE, SIG_DFL);        /* a write to a dead peer must not raise it (MSG_NOSIGNAL) */
  test_can_connect();
  struct geometry from_params = {0, 0, 0};
  run_transfer("parameters (8 x 256 KiB, 2 streams)", &from_params, 1, NULL, 1000);
  struct geometry one = {.nslots = 8, .slot_bytes = 64 << 10, .nstreams = 1};
  run_transfer("1 stream", &one, 1, NULL, 1000);
  struct geometry three = {.nslots = 4, .slot_bytes = 4096, .nstreams = 3};
  run_transfer("3 streams, 4 x 4 KiB", &three, 1, NULL, 1000);
  struct geometry odd = {.nslots = 3, .slot_bytes = 1000, .nstreams = 2};
  run_transfer("2 streams, 3 x 1000 B", &odd, 1, NULL, 1000);
  test_stash_and_strangers();
  test_peer_killed(1);
  test_peer_killed(0);
  test_abort_or_close(1);
  test_abort_or_close(0);
  test_mismatch_and_abort_wait();
  test_link_pump();
  test_link_pump_pending_sends();
  run_raw_tcp_baseline();
  run_throughput(1);
  run_throughput(2);
  run_throughput(4);
  printf("test_transport_socket: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
