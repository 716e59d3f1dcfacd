/* The unique id and the rendezvous thread behind it.
 *
 * The thread belongs to the process that called ncclGetUniqueId, which need not be a rank (a parent may fork the
 * ranks). It serves every connection from one poll() loop with nonblocking sockets, so a client that sends the
 * wrong secret, garbage or nothing at all is dropped on its own deadline and never delays the real ranks. Once
 * all ranks have registered it sends each the table of listener addresses and exits. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "util/error.h"
#include "util/params.h"

_Static_assert(sizeof(struct dccl_id_layout) <= NCCL_UNIQUE_ID_BYTES, "the id layout must fit in ncclUniqueId");

/* Unregistered connections allowed at once; more are refused so a flood cannot exhaust descriptors. */
#define RV_MAX_UNREGISTERED 1024

struct rv_client {
  int fd;
  int rank; /* -1 until registered */
  int64_t accepted_ns;
  size_t have;
  struct dccl_register_msg msg;
  struct sockaddr_storage addr;
};

struct rv_state {
  sem_t started; /* posted once the thread runs: create_id returns only then */
  int listen_fd;
  uint8_t secret[DCCL_SECRET_BYTES];
  int64_t deadline_ns;
  int nranks; /* 0 until the first rank tells */
  int nregistered, nunregistered;
  struct rv_client *clients;
  int nclients, cap;
  int *client_of_rank; /* index into clients, -1 if that rank has not registered */
};

static void rv_drop(struct rv_state *rv, int i) {
  struct rv_client *c = &rv->clients[i];
  if (c->rank >= 0) {
    rv->client_of_rank[c->rank] = -1;
    rv->nregistered--;
  } else {
    rv->nunregistered--;
  }
  close(c->fd);
  rv->clients[i] = rv->clients[--rv->nclients];
  if (i < rv->nclients && rv->clients[i].rank >= 0) rv->client_of_rank[rv->clients[i].rank] = i;
}

static void rv_accept_all(struct rv_state *rv) {
  for (;;) {
    int fd;
    struct sockaddr_storage peer;
    if (dccl_socket_accept(rv->listen_fd, &fd, &peer) != ncclSuccess || fd < 0) return;
    char buf[80];
    if (rv->nunregistered >= RV_MAX_UNREGISTERED) {
      DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: too many unregistered connections, refusing %s",
                dccl_socket_addr_str(&peer, buf, sizeof(buf)));
      close(fd);
      continue;
    }
    if (rv->nclients == rv->cap) {
      int cap = rv->cap ? 2 * rv->cap : 16;
      struct rv_client *grown = realloc(rv->clients, (size_t)cap * sizeof(*grown));
      if (!grown) {
        close(fd);
        return;
      }
      rv->clients = grown;
      rv->cap = cap;
    }
    struct rv_client *c = &rv->clients[rv->nclients++];
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    c->rank = -1;
    c->accepted_ns = dccl_now_ns();
    c->addr = peer;
    rv->nunregistered++;
  }
}

/* Validates a complete registration; returns 0 (and says why) if the client must be dropped. */
static int rv_register(struct rv_state *rv, int i) {
  struct rv_client *c = &rv->clients[i];
  const struct dccl_register_msg *m = &c->msg;
  char buf[80];
  const char *who = dccl_socket_addr_str(&c->addr, buf, sizeof(buf));
  struct sockaddr_storage ignored;
  if (m->magic != DCCL_BOOTSTRAP_MAGIC) {
    DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: dropping %s: not a DCCL bootstrap message", who);
    return 0;
  }
  if (!dccl_secret_equal(m->secret, rv->secret)) {
    DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: dropping %s: wrong secret (a different unique id?)", who);
    return 0;
  }
  if (m->nranks <= 0 || m->rank < 0 || m->rank >= m->nranks || (rv->nranks && m->nranks != rv->nranks)) {
    DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: dropping %s: rank %d of %d does not fit a job of %d ranks", who,
              m->rank, m->nranks, rv->nranks);
    return 0;
  }
  if (dccl_wire_addr_to_sockaddr(&m->listen_addr, &ignored) != ncclSuccess) {
    DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: dropping %s: bad listener address", who);
    return 0;
  }
  if (!rv->nranks) {
    rv->client_of_rank = malloc((size_t)m->nranks * sizeof(int));
    if (!rv->client_of_rank) return 0;
    for (int r = 0; r < m->nranks; r++) rv->client_of_rank[r] = -1;
    rv->nranks = m->nranks;
  }
  if (rv->client_of_rank[m->rank] >= 0) {
    DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: dropping %s: rank %d already registered", who, m->rank);
    return 0;
  }
  c->rank = m->rank;
  rv->client_of_rank[m->rank] = i;
  rv->nregistered++;
  rv->nunregistered--;
  DCCL_TRACE(DCCL_BOOTSTRAP, "bootstrap rendezvous: rank %d of %d registered from %s", m->rank, m->nranks, who);
  return 1;
}

/* Reads what a client has sent; returns 0 if the client must be dropped. */
static int rv_read(struct rv_state *rv, int i) {
  struct rv_client *c = &rv->clients[i];
  char buf[80];
  if (c->rank >= 0) {
    /* A registered rank sends nothing more: readable means it gave up (EOF) or misbehaves. */
    char byte;
    ssize_t n = recv(c->fd, &byte, 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 1;
    DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: rank %d (%s) left before the table was sent", c->rank,
              dccl_socket_addr_str(&c->addr, buf, sizeof(buf)));
    return 0;
  }
  ssize_t n = recv(c->fd, (char *)&c->msg + c->have, sizeof(c->msg) - c->have, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 1;
  if (n <= 0) {
    DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: dropping %s: closed after %zu of %zu registration bytes",
              dccl_socket_addr_str(&c->addr, buf, sizeof(buf)), c->have, sizeof(c->msg));
    return 0;
  }
  c->have += (size_t)n;
  if (c->have < sizeof(c->msg)) return 1;
  return rv_register(rv, i);
}

/* Every rank gets the header and the table; a rank that cannot take it is logged and skipped. */
static void rv_send_tables(struct rv_state *rv) {
  size_t table_bytes = (size_t)rv->nranks * sizeof(struct dccl_wire_addr);
  struct dccl_wire_addr *table = malloc(table_bytes);
  if (!table) {
    DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: out of memory for the table of %d ranks", rv->nranks);
    return;
  }
  for (int r = 0; r < rv->nranks; r++) table[r] = rv->clients[rv->client_of_rank[r]].msg.listen_addr;
  struct dccl_table_header header = {.magic = DCCL_BOOTSTRAP_MAGIC, .nranks = rv->nranks};
  int64_t deadline = dccl_now_ns() + (int64_t)DCCL_HANDSHAKE_TIMEOUT_MS * 1000000;
  for (int r = 0; r < rv->nranks; r++) {
    int fd = rv->clients[rv->client_of_rank[r]].fd;
    if (dccl_socket_send_wait(fd, &header, sizeof(header), NULL, deadline) != ncclSuccess ||
        dccl_socket_send_wait(fd, table, table_bytes, NULL, deadline) != ncclSuccess)
      DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: could not send the table to rank %d", r);
  }
  free(table);
}

static void *rv_thread_main(void *arg) {
  struct rv_state *rv = arg;
  /* Allocate before announcing the start: the caller may fork as soon as we post. Later allocations happen only
   * while serving connections. */
  int pfd_cap = 32;
  struct pollfd *pfds = malloc((size_t)pfd_cap * sizeof(*pfds));
  sem_post(&rv->started);
  if (!pfds) DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: out of memory");
  while (pfds) {
    int64_t now = dccl_now_ns();
    if (now >= rv->deadline_ns) {
      DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: timed out with %d of %d ranks registered", rv->nregistered,
                rv->nranks);
      break;
    }
    /* Drop clients that did not register in time. */
    for (int i = rv->nclients - 1; i >= 0; i--) {
      struct rv_client *c = &rv->clients[i];
      if (c->rank < 0 && now - c->accepted_ns > (int64_t)DCCL_HANDSHAKE_TIMEOUT_MS * 1000000) {
        char buf[80];
        DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: dropping %s: no registration within %d ms",
                  dccl_socket_addr_str(&c->addr, buf, sizeof(buf)), DCCL_HANDSHAKE_TIMEOUT_MS);
        rv_drop(rv, i);
      }
    }
    if (pfd_cap < rv->nclients + 1) {
      pfd_cap = 2 * (rv->nclients + 1);
      struct pollfd *grown = realloc(pfds, (size_t)pfd_cap * sizeof(*grown));
      if (!grown) {
        DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: out of memory");
        break;
      }
      pfds = grown;
    }
    pfds[0] = (struct pollfd){.fd = rv->listen_fd, .events = POLLIN};
    int nclients = rv->nclients;
    for (int i = 0; i < nclients; i++) pfds[i + 1] = (struct pollfd){.fd = rv->clients[i].fd, .events = POLLIN};
    int n = poll(pfds, (nfds_t)nclients + 1, 500);
    if (n < 0 && errno != EINTR) {
      DCCL_WARN(DCCL_BOOTSTRAP, "bootstrap rendezvous: poll failed: %s", strerror(errno));
      break;
    }
    if (n <= 0) continue;
    /* Clients first, backwards so dropping one (which moves the last into its place) skips nobody. */
    for (int i = nclients - 1; i >= 0; i--)
      if (pfds[i + 1].revents && !rv_read(rv, i)) rv_drop(rv, i);
    if (pfds[0].revents & POLLIN) rv_accept_all(rv);
    if (rv->nranks && rv->nregistered == rv->nranks) {
      rv_send_tables(rv);
      DCCL_INFO(DCCL_BOOTSTRAP, "bootstrap rendezvous: all %d ranks registered", rv->nranks);
      break;
    }
  }
  while (rv->nclients > 0) rv_drop(rv, rv->nclients - 1);
  close(rv->listen_fd);
  free(pfds);
  free(rv->clients);
  free(rv->client_of_rank);
  sem_destroy(&rv->started);
  free(rv);
  return NULL;
}

ncclResult_t dccl_bootstrap_create_id(ncclUniqueId *id) {
  if (!id) return dccl_error(ncclInvalidArgument, "ncclGetUniqueId: id is NULL");
  struct rv_state *rv = calloc(1, sizeof(*rv));
  if (!rv) return dccl_error(ncclSystemError, "out of memory");
  ncclResult_t res;
  struct sockaddr_storage addr;
  rv->listen_fd = -1;
  DCCLCHECKGOTO(dccl_random_bytes(rv->secret, sizeof(rv->secret)), res, fail);
  DCCLCHECKGOTO(dccl_socket_local_addr(&addr), res, fail);
  DCCLCHECKGOTO(dccl_socket_listen(&addr, &rv->listen_fd), res, fail);
  int64_t timeout_s = dccl_param_int(DCCL_PARAM_BOOTSTRAP_TIMEOUT);
  rv->deadline_ns = dccl_now_ns() + (timeout_s > 0 ? timeout_s : 300) * 1000000000ll;

  struct dccl_id_layout layout;
  memset(&layout, 0, sizeof(layout));
  layout.magic = DCCL_BOOTSTRAP_MAGIC;
  memcpy(layout.secret, rv->secret, sizeof(layout.secret));
  dccl_wire_addr_from_sockaddr(&layout.root, &addr);
  memset(id, 0, sizeof(*id));
  memcpy(id->internal, &layout, sizeof(layout));

  /* A caller may fork the ranks right after this returns; let the thread finish starting first, so the children
   * never inherit a lock that thread start-up holds (sanitizer allocators, for one, do not reset theirs). */
  sem_init(&rv->started, 0, 0);
  pthread_attr_t attr;
  pthread_t thread;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int err = pthread_create(&thread, &attr, rv_thread_main, rv);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    sem_destroy(&rv->started);
    res = dccl_error(ncclSystemError, "could not start the bootstrap rendezvous thread: %s", strerror(err));
    goto fail;
  }
  while (sem_wait(&rv->started) != 0 && errno == EINTR) {
  }
  char buf[80];
  DCCL_INFO(DCCL_BOOTSTRAP, "bootstrap rendezvous listening on %s", dccl_socket_addr_str(&addr, buf, sizeof(buf)));
  return ncclSuccess;
fail:
  if (rv->listen_fd >= 0) close(rv->listen_fd);
  free(rv);
  return res;
}

ncclResult_t dccl_bootstrap_check_id(const ncclUniqueId *id) {
  if (!id) return dccl_error(ncclInvalidArgument, "unique id is NULL");
  struct dccl_id_layout layout;
  memcpy(&layout, id->internal, sizeof(layout));
  if (layout.magic != DCCL_BOOTSTRAP_MAGIC)
    return dccl_error(ncclInvalidArgument, "unique id was not made by ncclGetUniqueId (bad magic)");
  struct sockaddr_storage addr;
  if (dccl_wire_addr_to_sockaddr(&layout.root, &addr) != ncclSuccess)
    return dccl_error(ncclInvalidArgument, "unique id holds no valid rendezvous address");
  return ncclSuccess;
}
