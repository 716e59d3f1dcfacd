/* The TCP bootstrap with real processes: a parent makes the id (and so hosts the rendezvous thread) and forks
 * the ranks, as a launcher would. Covers init, all-gather, tagged point-to-point out of order, barrier, split,
 * the liveness monitor (clean exit and SIGKILL), abort, and clients that present the wrong secret or nothing. */
#define _GNU_SOURCE /* pthread_tryjoin_np */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_internal.h"
#include "util/error.h"

static int passed, failed;

static void report(const char *name, int ok) {
  printf("%s: %s\n", ok ? "PASS" : "FAIL", name);
  fflush(stdout);
  if (ok)
    passed++;
  else
    failed++;
}

static double now_s(void) {
  return (double)dccl_now_ns() / 1e9;
}

/* Inside a rank (a process or a thread): a failed check returns its line number, which ends the rank. */
#define RANK_CHECK(cond)                                                                          \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      fprintf(stderr, "[pid %d] %s:%d: check failed: %s\n", getpid(), __FILE__, __LINE__, #cond); \
      return __LINE__;                                                                            \
    }                                                                                             \
  } while (0)
#define RANK_OK(call)                                                                                       \
  do {                                                                                                      \
    ncclResult_t r_ = (call);                                                                               \
    if (r_ != ncclSuccess) {                                                                                \
      fprintf(stderr, "[pid %d] %s:%d: %s returned %d: %s\n", getpid(), __FILE__, __LINE__, #call, (int)r_, \
              dccl_last_error());                                                                           \
      return __LINE__;                                                                                      \
    }                                                                                                       \
  } while (0)
#define RANK_RUN(call)       \
  do {                       \
    int line_ = (call);      \
    if (line_) return line_; \
  } while (0)

typedef int (*rank_fn)(const ncclUniqueId *id, int rank, int nranks, void *arg);

/* Forks the ranks. They start together once all are forked, so no fork happens while the rendezvous thread is
 * mid-way through serving a rank (a sanitizer's allocator lock held then would be inherited locked). */
static void spawn_ranks(pid_t *pids, int n, rank_fn fn, const ncclUniqueId *id, void *arg) {
  int go[2];
  if (pipe(go) != 0) {
    perror("pipe");
    exit(2);
  }
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      char c;
      close(go[1]);
      while (read(go[0], &c, 1) < 0 && errno == EINTR) {
      }
      close(go[0]);
      _exit(fn(id, r, n, arg) ? 1 : 0);
    }
  }
  close(go[0]);
  close(go[1]);
}

/* Waits for all; kills what is left at the timeout. statuses[r] gets the wait status. Returns 1 if all ended. */
static int wait_ranks(pid_t *pids, int n, double timeout_s, int *statuses) {
  double end = now_s() + timeout_s;
  int left = n;
  for (int r = 0; r < n; r++) statuses[r] = -1;
  while (left > 0 && now_s() < end) {
    for (int r = 0; r < n; r++) {
      if (statuses[r] != -1 || pids[r] <= 0) continue;
      int st;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        statuses[r] = st;
        left--;
      }
    }
    if (left) usleep(5000);
  }
  for (int r = 0; r < n; r++) {
    if (statuses[r] != -1) continue;
    fprintf(stderr, "rank %d (pid %d) did not finish in %.0f s; killing it\n", r, pids[r], timeout_s);
    kill(pids[r], SIGKILL);
    waitpid(pids[r], &statuses[r], 0);
    statuses[r] = -1;
  }
  return left == 0;
}

static int all_exited_zero(const int *statuses, int n) {
  for (int r = 0; r < n; r++) {
    if (statuses[r] == -1 || !WIFEXITED(statuses[r]) || WEXITSTATUS(statuses[r]) != 0) {
      fprintf(stderr, "rank %d: status 0x%x\n", r, statuses[r]);
      return 0;
    }
  }
  return 1;
}

static void count_death(void *arg, int dead_rank) {
  (void)dead_rank;
  atomic_fetch_add((_Atomic int *)arg, 1);
}

/* ---- The full sequence on N ranks ---- */

struct p2p_payload {
  int from, to;
  uint32_t tag;
  int seq;
};

static int check_payload(const struct p2p_payload *p, int from, int to, uint32_t tag, int seq) {
  RANK_CHECK(p->from == from && p->to == to && p->tag == tag && p->seq == seq);
  return 0;
}

static int exercise_p2p(struct dccl_bootstrap *b) {
  int rank = dccl_bootstrap_rank(b), n = dccl_bootstrap_nranks(b);
  /* To every peer (self included): tag 1 twice, tag 2, then a larger tag-3 message. */
  char big[3000];
  for (int peer = 0; peer < n; peer++) {
    struct p2p_payload m = {rank, peer, 1, 0};
    RANK_OK(dccl_bootstrap_send(b, peer, 1, &m, sizeof(m)));
    m.tag = 2;
    RANK_OK(dccl_bootstrap_send(b, peer, 2, &m, sizeof(m)));
    m.tag = 1;
    m.seq = 1;
    RANK_OK(dccl_bootstrap_send(b, peer, 1, &m, sizeof(m)));
    for (size_t i = 0; i < sizeof(big); i++) big[i] = (char)(rank * 31 + peer * 7 + (int)i);
    RANK_OK(dccl_bootstrap_send(b, peer, 3, big, sizeof(big)));
  }
  /* Received in another order, and from peers in reverse order. */
  for (int k = 0; k < n; k++) {
    int peer = n - 1 - k;
    char got_big[sizeof(big)];
    RANK_OK(dccl_bootstrap_recv(b, peer, 3, got_big, sizeof(got_big)));
    for (size_t i = 0; i < sizeof(got_big); i++) RANK_CHECK(got_big[i] == (char)(peer * 31 + rank * 7 + (int)i));
    struct p2p_payload m;
    RANK_OK(dccl_bootstrap_recv(b, peer, 2, &m, sizeof(m)));
    RANK_RUN(check_payload(&m, peer, rank, 2, 0));
    RANK_OK(dccl_bootstrap_recv(b, peer, 1, &m, sizeof(m)));
    RANK_RUN(check_payload(&m, peer, rank, 1, 0));
    RANK_OK(dccl_bootstrap_recv(b, peer, 1, &m, sizeof(m)));
    RANK_RUN(check_payload(&m, peer, rank, 1, 1));
  }
  return 0;
}

static int exercise_allgather(struct dccl_bootstrap *b, int salt, size_t block) {
  int rank = dccl_bootstrap_rank(b), n = dccl_bootstrap_nranks(b);
  unsigned char *data = calloc((size_t)n, block);
  RANK_CHECK(data);
  for (size_t i = 0; i < block; i++) data[(size_t)rank * block + i] = (unsigned char)(rank * 13 + salt + i * 3);
  ncclResult_t res = dccl_bootstrap_allgather(b, data, block);
  int bad = 0;
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < block; i++) bad += data[(size_t)r * block + i] != (unsigned char)(r * 13 + salt + i * 3);
  free(data);
  RANK_OK(res);
  RANK_CHECK(bad == 0);
  return 0;
}

/* The stall hooks' tick: asks to be called again after 20 ms four times, then not until woken. */
static int count_ticks(void *arg) {
  _Atomic int *ticks = arg;
  return atomic_fetch_add(ticks, 1) + 1 < 5 ? 20 : -1;
}

static int wait_ticks(_Atomic int *ticks, int want, int64_t limit_ms) {
  for (int64_t ms = 0; atomic_load(ticks) < want && ms < limit_ms; ms++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return atomic_load(ticks);
}

/* The monitor calls tick at its start, again after the milliseconds tick returns, never after -1 until woken. */
static int exercise_tick(struct dccl_bootstrap *b, _Atomic int *ticks) {
  RANK_CHECK(wait_ticks(ticks, 5, 2000) == 5);
  struct timespec ts = {0, 150000000};
  nanosleep(&ts, NULL);
  RANK_CHECK(atomic_load(ticks) == 5); /* -1: the thread sleeps */
  dccl_bootstrap_wake_monitor(b);
  RANK_CHECK(wait_ticks(ticks, 6, 2000) >= 6);
  return 0;
}

/* arg: NULL, or an abort flag a watchdog sets (ranks run as threads). */
static int rank_full(const ncclUniqueId *id, int rank, int n, void *arg) {
  struct dccl_bootstrap *b;
  _Atomic int deaths = 0;
  RANK_OK(dccl_bootstrap_init(id, rank, n, (_Atomic int *)arg, &b));
  RANK_CHECK(dccl_bootstrap_rank(b) == rank && dccl_bootstrap_nranks(b) == n);
  _Atomic int ticks = 0;
  dccl_bootstrap_set_stall_hooks(b, &(struct dccl_stall_hooks){.tick = count_ticks, .arg = &ticks});
  RANK_OK(dccl_bootstrap_monitor_start(b, count_death, &deaths));
  RANK_RUN(exercise_tick(b, &ticks));
  RANK_RUN(exercise_allgather(b, 1, 8));
  /* On 3 ranks, blocks larger than what the sockets can hold (16 MiB even after receive-buffer autotuning): every
   * rank is mid-send to the next while its previous is mid-send to it, so receiving must never wait for one
   * sender to finish a frame (that closes a cycle of waits). Small elsewhere, to keep the test fast. */
  RANK_RUN(exercise_allgather(b, 2, n == 3 ? 16u << 20 : 64u << 10));
  RANK_RUN(exercise_p2p(b));
  RANK_OK(dccl_bootstrap_barrier(b));

  /* Split into two halves (one group if n == 1); each half all-gathers and sends around its ring. */
  int lo = n / 2, in_lo = rank < lo;
  int first = in_lo ? 0 : lo, count = in_lo ? lo : n - lo;
  int members[8];
  for (int i = 0; i < count; i++) members[i] = first + i;
  struct dccl_bootstrap *sub;
  _Atomic int sub_deaths = 0;
  RANK_OK(dccl_bootstrap_split(b, rank - first, count, members, &sub));
  RANK_CHECK(dccl_bootstrap_rank(sub) == rank - first && dccl_bootstrap_nranks(sub) == count);
  RANK_OK(dccl_bootstrap_monitor_start(sub, count_death, &sub_deaths));
  int *parents = calloc((size_t)count, sizeof(int));
  parents[rank - first] = rank;
  RANK_OK(dccl_bootstrap_allgather(sub, parents, sizeof(int)));
  for (int i = 0; i < count; i++) RANK_CHECK(parents[i] == first + i);
  free(parents);
  int me = rank - first, next = (me + 1) % count, prev = (me + count - 1) % count, got = -1;
  RANK_OK(dccl_bootstrap_send(sub, next, 77, &rank, sizeof(rank)));
  RANK_OK(dccl_bootstrap_recv(sub, prev, 77, &got, sizeof(got)));
  RANK_CHECK(got == first + prev);
  RANK_RUN(exercise_p2p(sub));
  RANK_OK(dccl_bootstrap_barrier(sub));
  dccl_bootstrap_say_goodbye(sub);
  dccl_bootstrap_close(sub);

  /* The parent still works after the split, and a message size mismatch is an error, not a crash. */
  RANK_RUN(exercise_allgather(b, 3, 16));
  if (n > 1) {
    int peer = (rank + 1) % n, from = (rank + n - 1) % n;
    char small[4] = {0};
    long long wrong;
    RANK_OK(dccl_bootstrap_send(b, peer, 9, small, sizeof(small)));
    RANK_CHECK(dccl_bootstrap_recv(b, from, 9, &wrong, sizeof(wrong)) == ncclInvalidUsage);
  }
  RANK_OK(dccl_bootstrap_barrier(b));
  dccl_bootstrap_say_goodbye(b);
  dccl_bootstrap_close(b);
  RANK_CHECK(atomic_load(&deaths) == 0 && atomic_load(&sub_deaths) == 0);
  return 0;
}

static void test_full(int n) {
  ncclUniqueId id;
  char name[64];
  snprintf(name, sizeof(name), "full sequence on %d ranks", n);
  if (dccl_bootstrap_create_id(&id) != ncclSuccess || dccl_bootstrap_check_id(&id) != ncclSuccess) {
    report(name, 0);
    return;
  }
  pid_t pids[8];
  int st[8];
  spawn_ranks(pids, n, rank_full, &id, NULL);
  int ok = wait_ranks(pids, n, 60, st) && all_exited_zero(st, n);
  report(name, ok);
}

/* ---- Ranks as threads: two jobs at once in one process ---- */

struct thread_rank {
  const ncclUniqueId *id;
  int rank, nranks;
  _Atomic int *abort_flag;
  int result;
  pthread_t thread;
};

static void *thread_rank_main(void *p) {
  struct thread_rank *t = p;
  t->result = rank_full(t->id, t->rank, t->nranks, (void *)t->abort_flag);
  return NULL;
}

static void test_threads(void) {
  enum { JOB_A = 3, JOB_B = 2 };
  ncclUniqueId ids[2];
  _Atomic int abort_flag = 0;
  int ok = dccl_bootstrap_create_id(&ids[0]) == ncclSuccess && dccl_bootstrap_create_id(&ids[1]) == ncclSuccess;
  struct thread_rank ranks[JOB_A + JOB_B];
  int started = 0;
  for (int i = 0; ok && i < JOB_A + JOB_B; i++, started++) {
    int job = i < JOB_A ? 0 : 1;
    ranks[i] = (struct thread_rank){&ids[job], job ? i - JOB_A : i, job ? JOB_B : JOB_A, &abort_flag, -1, 0};
    ok = pthread_create(&ranks[i].thread, NULL, thread_rank_main, &ranks[i]) == 0;
  }
  /* Watchdog: a hang becomes a failure (every wait polls the abort flag) instead of a stuck test. */
  double end = now_s() + 60;
  for (int i = 0; i < started; i++) {
    while (pthread_tryjoin_np(ranks[i].thread, NULL) != 0) {
      if (now_s() > end && !atomic_load(&abort_flag)) {
        fprintf(stderr, "thread ranks still running after 60 s; aborting them\n");
        atomic_store(&abort_flag, 1);
      }
      usleep(2000);
    }
    ok = ok && ranks[i].result == 0;
  }
  report("two jobs of 3 and 2 ranks as threads of one process", ok && !atomic_load(&abort_flag));
}

/* ---- Bad clients ---- */

static int connect_to(const struct sockaddr_storage *addr) {
  int fd = -1;
  if (dccl_socket_connect(addr, 2000, &fd) != ncclSuccess) return -1;
  return fd;
}

/* 1: EOF seen within timeout_s; 0 otherwise. */
static int sees_eof(int fd, double timeout_s) {
  double end = now_s() + timeout_s;
  while (now_s() < end) {
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return 1;
    usleep(10000);
  }
  return 0;
}

/* Ranks that also face bogus connections on rank 0's own listener. */
static int rank_with_intruders(const ncclUniqueId *id, int rank, int n, void *arg) {
  struct dccl_bootstrap *b;
  double start = now_s();
  RANK_OK(dccl_bootstrap_init(id, rank, n, NULL, &b));
  int silent = -1, wrong = -1;
  if (rank == 1) {
    silent = connect_to(&b->peer_addrs[0]);
    wrong = connect_to(&b->peer_addrs[0]);
    RANK_CHECK(silent >= 0 && wrong >= 0);
    struct dccl_peer_hello hello = {.magic = DCCL_BOOTSTRAP_MAGIC, .rank = 1, .kind = DCCL_CONN_P2P};
    memset(hello.secret, 0x5a, sizeof(hello.secret));
    RANK_OK(dccl_socket_send_all(wrong, &hello, sizeof(hello)));
  }
  RANK_OK(dccl_bootstrap_barrier(b));
  RANK_RUN(exercise_allgather(b, 5, 64));
  RANK_RUN(exercise_p2p(b));
  RANK_OK(dccl_bootstrap_barrier(b));
  if (rank == 1) {
    RANK_CHECK(sees_eof(wrong, 2.0)); /* rank 0 dropped the intruder */
    close(silent);
    close(wrong);
  }
  /* Nothing waited out a handshake deadline for the intruders. */
  RANK_CHECK(now_s() - start < DCCL_HANDSHAKE_TIMEOUT_MS / 1000.0 - 1.0);
  dccl_bootstrap_say_goodbye(b);
  dccl_bootstrap_close(b);
  return 0;
}

static void test_intruders(void) {
  ncclUniqueId id;
  if (dccl_bootstrap_create_id(&id) != ncclSuccess) {
    report("bogus clients do not disturb the rendezvous", 0);
    return;
  }
  struct dccl_id_layout layout;
  memcpy(&layout, id.internal, sizeof(layout));
  struct sockaddr_storage root;
  int ok = dccl_wire_addr_to_sockaddr(&layout.root, &root) == ncclSuccess;
  /* Before the ranks: one with the wrong secret, one silent, one with garbage, one that leaves half-way. */
  int wrong = connect_to(&root), silent = connect_to(&root), garbage = connect_to(&root), partial = connect_to(&root);
  ok = ok && wrong >= 0 && silent >= 0 && garbage >= 0 && partial >= 0;
  if (ok) {
    struct dccl_register_msg reg = {.magic = DCCL_BOOTSTRAP_MAGIC, .nranks = 3, .rank = 0};
    memset(reg.secret, 0xa5, sizeof(reg.secret));
    reg.listen_addr = layout.root;
    char junk[sizeof(reg)];
    memset(junk, 'x', sizeof(junk));
    ok = dccl_socket_send_all(wrong, &reg, sizeof(reg)) == ncclSuccess &&
         dccl_socket_send_all(garbage, junk, sizeof(junk)) == ncclSuccess &&
         dccl_socket_send_all(partial, junk, 7) == ncclSuccess;
    close(partial);
  }
  pid_t pids[3];
  int st[3];
  double start = now_s();
  spawn_ranks(pids, 3, rank_with_intruders, &id, NULL);
  int done = wait_ranks(pids, 3, 30, st);
  double took = now_s() - start;
  ok = ok && done && all_exited_zero(st, 3);
  /* The ranks finished well before the silent client's deadline could have expired. */
  ok = ok && took < DCCL_HANDSHAKE_TIMEOUT_MS / 1000.0 - 1.0;
  /* The rendezvous closed the bad ones (their server ends were also held by the forked ranks until now). */
  ok = ok && sees_eof(wrong, 2.0) && sees_eof(garbage, 2.0);
  if (wrong >= 0) close(wrong);
  if (silent >= 0) close(silent);
  if (garbage >= 0) close(garbage);
  printf("  ranks finished in %.2f s beside 4 bogus clients\n", took);
  report("bogus clients do not disturb the rendezvous", ok);
}

/* ---- Abort ---- */

struct delayed_flag {
  _Atomic int *flag;
  int delay_ms;
};

static void *set_flag_later(void *arg) {
  struct delayed_flag *d = arg;
  usleep((useconds_t)d->delay_ms * 1000);
  atomic_store(d->flag, 1);
  return NULL;
}

static int abort_child(void) {
  ncclUniqueId id;
  struct dccl_bootstrap *b = NULL;
  _Atomic int flag = 1;
  /* Already set: returns at once. */
  RANK_OK(dccl_bootstrap_create_id(&id));
  double t0 = now_s();
  RANK_CHECK(dccl_bootstrap_init(&id, 0, 2, &flag, &b) == ncclRemoteError && b == NULL);
  RANK_CHECK(now_s() - t0 < 0.5);

  /* Set while init waits for a rank that never comes. */
  flag = 0;
  RANK_OK(dccl_bootstrap_create_id(&id));
  struct delayed_flag d = {&flag, 300};
  pthread_t th;
  pthread_create(&th, NULL, set_flag_later, &d);
  t0 = now_s();
  RANK_CHECK(dccl_bootstrap_init(&id, 0, 2, &flag, &b) == ncclRemoteError && b == NULL);
  double took = now_s() - t0;
  pthread_join(th, NULL);
  RANK_CHECK(took >= 0.25 && took < 1.0);

  /* Set while a recv waits for a message nobody sends. */
  flag = 0;
  RANK_OK(dccl_bootstrap_create_id(&id));
  RANK_OK(dccl_bootstrap_init(&id, 0, 1, &flag, &b));
  pthread_create(&th, NULL, set_flag_later, &d);
  int x;
  t0 = now_s();
  RANK_CHECK(dccl_bootstrap_recv(b, 0, 5, &x, sizeof(x)) == ncclRemoteError);
  took = now_s() - t0;
  pthread_join(th, NULL);
  RANK_CHECK(took >= 0.25 && took < 1.0);
  dccl_bootstrap_close(b);

  /* Garbage ids are refused. */
  memset(&id, 0, sizeof(id));
  RANK_CHECK(dccl_bootstrap_check_id(&id) == ncclInvalidArgument);
  RANK_CHECK(dccl_bootstrap_init(&id, 0, 1, NULL, &b) == ncclInvalidArgument);
  return 0;
}

static void test_abort(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) _exit(abort_child());
  int st;
  int ok = wait_ranks(&pid, 1, 20, &st) && all_exited_zero(&st, 1);
  report("abort flag stops init and recv promptly; bad ids refused", ok);
}

/* ---- Death detection ---- */

struct death_record {
  _Atomic int dead_rank;
  _Atomic int64_t seen_ns;
};

struct death_test {
  int victim;
  int ready_fd;                 /* write end: each rank writes a byte once its monitor runs */
  struct death_record *records; /* shared memory, one per rank */
};

static void record_death(void *arg, int dead_rank) {
  struct death_record *rec = arg;
  atomic_store(&rec->seen_ns, dccl_now_ns());
  atomic_store(&rec->dead_rank, dead_rank);
}

static int rank_death(const ncclUniqueId *id, int rank, int n, void *arg) {
  struct death_test *t = arg;
  struct dccl_bootstrap *b;
  struct death_record *rec = &t->records[rank];
  RANK_OK(dccl_bootstrap_init(id, rank, n, NULL, &b));
  RANK_OK(dccl_bootstrap_monitor_start(b, record_death, rec));
  RANK_OK(dccl_bootstrap_barrier(b));
  char c = 1;
  RANK_CHECK(write(t->ready_fd, &c, 1) == 1);
  if (rank == t->victim) {
    for (;;) pause(); /* until SIGKILL */
  }
  double end = now_s() + 5;
  while (atomic_load(&rec->dead_rank) < 0 && now_s() < end) usleep(2000);
  RANK_CHECK(atomic_load(&rec->dead_rank) == t->victim);
  dccl_bootstrap_close(b);
  return 0;
}

static void test_death(int victim) {
  char name[80];
  snprintf(name, sizeof(name), "SIGKILL of rank %d is reported to the others within 2 s", victim);
  const int n = 3;
  struct death_record *records =
      mmap(NULL, sizeof(*records) * n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int pipefd[2];
  ncclUniqueId id;
  if (records == MAP_FAILED || pipe(pipefd) != 0 || dccl_bootstrap_create_id(&id) != ncclSuccess) {
    report(name, 0);
    return;
  }
  for (int r = 0; r < n; r++) {
    atomic_store(&records[r].dead_rank, -1);
    atomic_store(&records[r].seen_ns, 0);
  }
  struct death_test t = {.victim = victim, .ready_fd = pipefd[1], .records = records};
  pid_t pids[3];
  int st[3];
  spawn_ranks(pids, n, rank_death, &id, &t);
  close(pipefd[1]);
  int ready = 0;
  char c;
  while (ready < n && read(pipefd[0], &c, 1) == 1) ready++;
  close(pipefd[0]);
  int64_t killed_ns = dccl_now_ns();
  if (ready == n) kill(pids[victim], SIGKILL);
  int ok = ready == n && wait_ranks(pids, n, 20, st);
  for (int r = 0; r < n && ok; r++) {
    if (r == victim) {
      ok = WIFSIGNALED(st[r]) && WTERMSIG(st[r]) == SIGKILL;
      continue;
    }
    ok = WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0 && atomic_load(&records[r].dead_rank) == victim;
    double delay = (double)(atomic_load(&records[r].seen_ns) - killed_ns) / 1e9;
    printf("  rank %d learned of rank %d's death after %.3f s\n", r, victim, delay);
    ok = ok && delay < 2.0;
  }
  munmap(records, sizeof(*records) * n);
  report(name, ok);
}

int main(int argc, char **argv) {
  /* "threads": only the test without fork (ThreadSanitizer cannot follow a multithreaded process into fork). */
  if (argc > 1 && strcmp(argv[1], "threads") == 0) {
    test_threads();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
  }
  int sizes[] = {1, 2, 3, 5};
  for (int i = 0; i < 4; i++) test_full(sizes[i]);
  test_threads();
  test_intruders();
  test_abort();
  test_death(2);
  test_death(0);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
