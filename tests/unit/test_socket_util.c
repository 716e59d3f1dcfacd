/* Socket helpers: interface selection under DCCL_SOCKET_IFNAME / DCCL_SOCKET_FAMILY (each case in a forked child,
 * since parameters are read once per process), and listen/connect/send/recv with EOF, abort and timeouts. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_internal.h"
#include "util/log.h"

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

static int is_loopback_addr(const struct sockaddr_storage *a) {
  if (a->ss_family == AF_INET) return ((ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr)) >> 24) == 127;
  if (a->ss_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr);
  return 0;
}

static int same_ip(const struct sockaddr *a, const struct sockaddr_storage *b) {
  if (a->sa_family != b->ss_family) return 0;
  if (a->sa_family == AF_INET)
    return memcmp(&((const struct sockaddr_in *)a)->sin_addr, &((const struct sockaddr_in *)b)->sin_addr, 4) == 0;
  return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
}

/* What the machine offers, to know what each setting must produce. */
struct host_ifs {
  int lo_has_v6;
  int has_other; /* an up, non-loopback, non-docker/virbr interface with an IP address */
};

static struct host_ifs survey(void) {
  struct host_ifs h = {0, 0};
  struct ifaddrs *list;
  if (getifaddrs(&list) != 0) return h;
  for (struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) continue;
    int fam = ifa->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (ifa->ifa_flags & IFF_LOOPBACK) {
      if (fam == AF_INET6) h.lo_has_v6 = 1;
    } else if (strncmp(ifa->ifa_name, "docker", 6) && strncmp(ifa->ifa_name, "virbr", 5)) {
      h.has_other = 1;
    }
  }
  freeifaddrs(list);
  return h;
}

/* The name of the interface that owns addr's IP, or "" if none does. */
static void owner_of(const struct sockaddr_storage *addr, char *name, size_t len) {
  name[0] = '\0';
  struct ifaddrs *list;
  if (getifaddrs(&list) != 0) return;
  for (struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next)
    if (ifa->ifa_addr && same_ip(ifa->ifa_addr, addr)) {
      snprintf(name, len, "%s", ifa->ifa_name);
      break;
    }
  freeifaddrs(list);
}

enum expect { EXPECT_LOOPBACK_V4, EXPECT_LOOPBACK_V6, EXPECT_NON_LOOPBACK, EXPECT_FAILURE };

/* Runs dccl_socket_local_addr in a child with the given settings (NULL: unset) and checks the outcome. */
static int local_addr_case(const char *ifname, const char *family, enum expect want) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    unsetenv("NCCL_SOCKET_IFNAME");
    unsetenv("NCCL_SOCKET_FAMILY");
    if (ifname)
      setenv("DCCL_SOCKET_IFNAME", ifname, 1);
    else
      unsetenv("DCCL_SOCKET_IFNAME");
    if (family)
      setenv("DCCL_SOCKET_FAMILY", family, 1);
    else
      unsetenv("DCCL_SOCKET_FAMILY");
    struct sockaddr_storage a;
    memset(&a, 0xee, sizeof(a));
    ncclResult_t res = dccl_socket_local_addr(&a);
    if (want == EXPECT_FAILURE) _exit(res != ncclSuccess ? 0 : 1);
    if (res != ncclSuccess) _exit(2);
    char buf[80], owner[IF_NAMESIZE + 1];
    owner_of(&a, owner, sizeof(owner));
    printf("  IFNAME=%s FAMILY=%s -> %s (%s)\n", ifname ? ifname : "(unset)", family ? family : "(unset)",
           dccl_socket_addr_str(&a, buf, sizeof(buf)), owner);
    fflush(stdout);
    int port = a.ss_family == AF_INET ? ((struct sockaddr_in *)&a)->sin_port : ((struct sockaddr_in6 *)&a)->sin6_port;
    if (port != 0) _exit(3);
    switch (want) {
      case EXPECT_LOOPBACK_V4:
        _exit(a.ss_family == AF_INET && is_loopback_addr(&a) ? 0 : 4);
      case EXPECT_LOOPBACK_V6:
        _exit(a.ss_family == AF_INET6 && is_loopback_addr(&a) ? 0 : 5);
      default:
        _exit(!is_loopback_addr(&a) && owner[0] && strcmp(owner, "lo") && strncmp(owner, "docker", 6) ? 0 : 6);
    }
  }
  int st;
  if (waitpid(pid, &st, 0) != pid) return 0;
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "  case IFNAME=%s FAMILY=%s: child status 0x%x\n", ifname ? ifname : "(unset)",
            family ? family : "(unset)", st);
    return 0;
  }
  return 1;
}

static void test_interface_selection(void) {
  struct host_ifs h = survey();
  enum expect automatic = h.has_other ? EXPECT_NON_LOOPBACK : EXPECT_LOOPBACK_V4;
  report("DCCL_SOCKET_IFNAME=lo picks loopback", local_addr_case("lo", NULL, EXPECT_LOOPBACK_V4));
  report("DCCL_SOCKET_IFNAME==lo (exact) picks loopback", local_addr_case("=lo", NULL, EXPECT_LOOPBACK_V4));
  report("DCCL_SOCKET_IFNAME==l (exact) matches nothing", local_addr_case("=l", NULL, EXPECT_FAILURE));
  report("unknown interface name fails cleanly", local_addr_case("nosuchif0,nosuchif1", NULL, EXPECT_FAILURE));
  report("IFNAME=lo FAMILY=AF_INET6 picks ::1 (or fails if lo has no IPv6)",
         local_addr_case("lo", "AF_INET6", h.lo_has_v6 ? EXPECT_LOOPBACK_V6 : EXPECT_FAILURE));
  report("IFNAME=lo FAMILY=AF_INET picks 127.x", local_addr_case("lo", "AF_INET", EXPECT_LOOPBACK_V4));
  report("bad DCCL_SOCKET_FAMILY is refused", local_addr_case("lo", "AF_BOGUS", EXPECT_FAILURE));
  report("automatic choice skips loopback when something else is up", local_addr_case(NULL, NULL, automatic));
  report("^lo excludes loopback", local_addr_case("^lo", NULL, automatic));
  report("a list whose second entry matches", local_addr_case("nosuchif0,lo", NULL, EXPECT_LOOPBACK_V4));
}

/* ---- Moving bytes ---- */

static struct sockaddr_storage loopback_v4(uint16_t port) {
  struct sockaddr_storage a;
  memset(&a, 0, sizeof(a));
  struct sockaddr_in *in = (struct sockaddr_in *)&a;
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

/* A connected pair over a fresh loopback listener. */
static int make_pair(int *client, int *server) {
  struct sockaddr_storage a = loopback_v4(0);
  int lfd;
  if (dccl_socket_listen(&a, &lfd) != ncclSuccess) return 0;
  if (((struct sockaddr_in *)&a)->sin_port == 0) return 0;
  if (dccl_socket_connect(&a, 2000, client) != ncclSuccess) return 0;
  struct sockaddr_storage peer;
  *server = -1;
  double end = now_s() + 2;
  while (*server < 0 && now_s() < end) {
    if (dccl_socket_accept(lfd, server, &peer) != ncclSuccess) break;
    if (*server < 0) usleep(1000);
  }
  close(lfd);
  return *server >= 0;
}

struct sender_arg {
  int fd;
  const unsigned char *data;
  size_t size;
  ncclResult_t res;
};

static void *sender_main(void *p) {
  struct sender_arg *s = p;
  s->res = dccl_socket_send_all(s->fd, s->data, s->size);
  return NULL;
}

static void test_roundtrip(void) {
  int c, s;
  int ok = make_pair(&c, &s);
  /* 8 MiB: far more than the socket buffers, so both sides really loop. */
  size_t size = 8u << 20;
  unsigned char *out = malloc(size), *in = calloc(1, size);
  for (size_t i = 0; i < size; i++) out[i] = (unsigned char)(i * 7 + (i >> 13));
  struct sender_arg arg = {c, out, size, ncclInternalError};
  pthread_t th;
  if (ok) {
    pthread_create(&th, NULL, sender_main, &arg);
    _Atomic int never = 0;
    ok = dccl_socket_recv_all(s, in, size, &never) == ncclSuccess;
    pthread_join(th, NULL);
    ok = ok && arg.res == ncclSuccess && memcmp(in, out, size) == 0;
  }
  report("send_all/recv_all move 8 MiB intact", ok);

  /* EOF mid-message is ncclRemoteError, not a hang or success. */
  int eof_ok = 0;
  if (ok) {
    dccl_socket_send_all(c, out, 100);
    close(c);
    eof_ok = dccl_socket_recv_all(s, in, 200, NULL) == ncclRemoteError;
  }
  report("recv_all on EOF returns ncclRemoteError", eof_ok);
  /* Sending to a closed peer fails (no SIGPIPE kills us). */
  int pipe_ok = 0;
  if (ok) {
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < 100 && r == ncclSuccess; i++) r = dccl_socket_send_all(s, out, 65536);
    pipe_ok = r == ncclRemoteError;
  }
  report("send_all to a closed peer returns ncclRemoteError", pipe_ok);
  if (s >= 0) close(s);
  free(out);
  free(in);
}

static void test_abort_and_timeouts(void) {
  int c, s;
  int ok = make_pair(&c, &s);
  _Atomic int flag = 1;
  char buf[16];
  double t0 = now_s();
  ok = ok && dccl_socket_recv_all(s, buf, sizeof(buf), &flag) == ncclRemoteError && now_s() - t0 < 0.5;
  /* A deadline ends a wait for bytes that never come. */
  t0 = now_s();
  ok = ok && dccl_socket_recv_wait(s, buf, sizeof(buf), NULL, dccl_now_ns() + 200000000) == ncclRemoteError;
  double took = now_s() - t0;
  ok = ok && took >= 0.15 && took < 1.0;
  report("recv gives up on abort flag and on deadline", ok);
  close(c);
  close(s);

  /* Connecting to a port nobody listens on gives up at the timeout. */
  struct sockaddr_storage a = loopback_v4(0);
  int lfd, fd = -1;
  ok = dccl_socket_listen(&a, &lfd) == ncclSuccess;
  close(lfd); /* now the port is free and refuses */
  t0 = now_s();
  ok = ok && dccl_socket_connect(&a, 300, &fd) != ncclSuccess;
  took = now_s() - t0;
  ok = ok && fd < 0 && took >= 0.25 && took < 1.5;
  report("connect to a closed port fails after its timeout", ok);
}

static void test_addr_str(void) {
  char buf[80];
  struct sockaddr_storage a = loopback_v4(5678);
  int ok = strcmp(dccl_socket_addr_str(&a, buf, sizeof(buf)), "127.0.0.1:5678") == 0;
  struct sockaddr_storage b;
  memset(&b, 0, sizeof(b));
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&b;
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(80);
  in6->sin6_addr = in6addr_loopback;
  ok = ok && strcmp(dccl_socket_addr_str(&b, buf, sizeof(buf)), "[::1]:80") == 0;
  /* Wire form round trip. */
  struct dccl_wire_addr w;
  struct sockaddr_storage back;
  dccl_wire_addr_from_sockaddr(&w, &b);
  ok = ok && dccl_wire_addr_to_sockaddr(&w, &back) == ncclSuccess && same_ip((struct sockaddr *)&back, &b) &&
       ((struct sockaddr_in6 *)&back)->sin6_port == htons(80);
  w.family = 12345;
  ok = ok && dccl_wire_addr_to_sockaddr(&w, &back) == ncclInvalidArgument;
  report("address strings and wire form", ok);
}

int main(void) {
  /* Interface cases first: each runs in a fresh child before this process reads any parameter. */
  test_interface_selection();
  test_roundtrip();
  test_abort_and_timeouts();
  test_addr_str();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
