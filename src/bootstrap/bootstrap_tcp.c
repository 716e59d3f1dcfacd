/* The rank side of the TCP bootstrap: joining through the rendezvous, all-gather, barrier, split and close.
 * Point-to-point messages are in bootstrap_p2p.c, the rendezvous in bootstrap_root.c, liveness in
 * bootstrap_monitor.c. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "util/error.h"
#include "util/params.h"

int dccl_bootstrap_rank(const struct dccl_bootstrap *b) {
  return b->rank;
}
int dccl_bootstrap_nranks(const struct dccl_bootstrap *b) {
  return b->nranks;
}

void dccl_bootstrap_set_abort_flag(struct dccl_bootstrap *b, _Atomic int *abort_flag) {
  b->abort_flag = abort_flag;
}

int64_t dccl_bootstrap_creation_deadline(void) {
  int64_t s = dccl_param_int(DCCL_PARAM_BOOTSTRAP_TIMEOUT);
  return dccl_deadline_after_s(s > 0 ? s : 300);
}

int64_t dccl_bootstrap_op_deadline(const struct dccl_bootstrap *b) {
  return b->op_timeout_ns ? dccl_now_ns() + b->op_timeout_ns : 0;
}

/* An empty bootstrap for `rank` of `nranks`: no sockets yet, every fd -1. */
static ncclResult_t bootstrap_alloc(int rank, int nranks, _Atomic int *abort_flag, struct dccl_bootstrap **out) {
  struct dccl_bootstrap *b = calloc(1, sizeof(*b));
  if (!b) return dccl_error(ncclSystemError, "out of memory");
  b->rank = rank;
  b->nranks = nranks;
  b->creator_pid = getpid();
  b->abort_flag = abort_flag;
  b->listen_fd = -1;
  b->stop_fd = -1;
  b->ask_fd = -1;
  b->wake_fd = -1;
  b->nmonitor = rank == 0 ? nranks : 1;
  int64_t timeout_s = dccl_param_int(DCCL_PARAM_TIMEOUT);
  b->op_timeout_ns = timeout_s > 0 ? timeout_s * 1000000000ll : 0;
  pthread_mutex_init(&b->monitor_send_lock, NULL);
  b->peer_addrs = calloc((size_t)nranks, sizeof(*b->peer_addrs));
  b->send_fds = malloc((size_t)nranks * sizeof(int));
  b->recv_fds = malloc((size_t)nranks * sizeof(int));
  b->peer_closed = calloc((size_t)nranks, 1);
  b->incoming = calloc((size_t)nranks, sizeof(*b->incoming));
  b->monitor_fds = malloc((size_t)b->nmonitor * sizeof(int));
  if (!b->peer_addrs || !b->send_fds || !b->recv_fds || !b->peer_closed || !b->incoming || !b->monitor_fds) {
    free(b->incoming);
    free(b->peer_addrs);
    free(b->send_fds);
    free(b->recv_fds);
    free(b->peer_closed);
    free(b->monitor_fds);
    pthread_mutex_destroy(&b->monitor_send_lock);
    free(b);
    return dccl_error(ncclSystemError, "out of memory");
  }
  for (int r = 0; r < nranks; r++) b->send_fds[r] = b->recv_fds[r] = -1;
  for (int i = 0; i < b->nmonitor; i++) b->monitor_fds[i] = -1;
  *out = b;
  return ncclSuccess;
}

/* ---- Collectives ---- */

/* Ring all-gather among `members` (parent ranks; NULL: all ranks), `me` being this rank's index there. */
static ncclResult_t ring_allgather(struct dccl_bootstrap *b, const int *members, int nmembers, int me, uint32_t tag,
                                   void *data, size_t size, int64_t deadline_ns) {
  int next = (me + 1) % nmembers, prev = (me + nmembers - 1) % nmembers;
  int next_rank = members ? members[next] : next, prev_rank = members ? members[prev] : prev;
  char *blocks = data;
  for (int step = 0; step < nmembers - 1; step++) {
    int send_block = (me - step + nmembers) % nmembers;
    int recv_block = (me - step - 1 + nmembers) % nmembers;
    DCCLCHECK(dccl_bootstrap_send_msg(b, next_rank, DCCL_CHANNEL_INTERNAL, tag, blocks + (size_t)send_block * size,
                                      size, deadline_ns));
    DCCLCHECK(dccl_bootstrap_recv_msg(b, prev_rank, DCCL_CHANNEL_INTERNAL, tag, blocks + (size_t)recv_block * size,
                                      size, deadline_ns));
  }
  return ncclSuccess;
}

ncclResult_t dccl_bootstrap_allgather(struct dccl_bootstrap *b, void *data, size_t size) {
  if (!data && size) return dccl_error(ncclInvalidArgument, "bootstrap allgather: data is NULL");
  return ring_allgather(b, NULL, b->nranks, b->rank, DCCL_TAG_ALLGATHER, data, size, dccl_bootstrap_op_deadline(b));
}

ncclResult_t dccl_bootstrap_barrier(struct dccl_bootstrap *b) {
  char *bytes = calloc((size_t)b->nranks, 1);
  if (!bytes) return dccl_error(ncclSystemError, "out of memory");
  ncclResult_t res = dccl_bootstrap_allgather(b, bytes, 1);
  free(bytes);
  return res;
}

/* ---- Creation ---- */

ncclResult_t dccl_bootstrap_connect_monitor(struct dccl_bootstrap *b, int64_t deadline_ns) {
  if (b->nranks == 1) return ncclSuccess;
  if (b->rank != 0) return dccl_bootstrap_connect_peer(b, 0, DCCL_CONN_MONITOR, deadline_ns, &b->monitor_fds[0]);
  for (;;) {
    int missing = -1;
    for (int r = 1; r < b->nranks && missing < 0; r++)
      if (b->monitor_fds[r] < 0) missing = r;
    if (missing < 0) return ncclSuccess;
    int state = dccl_wait_state(b->abort_flag, deadline_ns);
    if (state != DCCL_WAIT_OK)
      return dccl_error(ncclRemoteError, "bootstrap rank 0: %s waiting for rank %d to connect",
                        state == DCCL_WAIT_ABORTED ? "aborted" : "timed out", missing);
    DCCLCHECK(dccl_bootstrap_progress(b, -1, NULL, deadline_ns));
  }
}

/* Opens this rank's listener on the same interface as `like` (any port). */
static ncclResult_t open_listener(struct dccl_bootstrap *b, const struct sockaddr_storage *like) {
  b->listen_addr = *like;
  if (like->ss_family == AF_INET)
    ((struct sockaddr_in *)&b->listen_addr)->sin_port = 0;
  else
    ((struct sockaddr_in6 *)&b->listen_addr)->sin6_port = 0;
  return dccl_socket_listen(&b->listen_addr, &b->listen_fd);
}

/* Registers with the rendezvous and reads back every rank's listener address. */
static ncclResult_t join_rendezvous(struct dccl_bootstrap *b, const struct dccl_id_layout *id, int64_t deadline) {
  struct sockaddr_storage root;
  DCCLCHECK(dccl_wire_addr_to_sockaddr(&id->root, &root));
  int fd;
  DCCLCHECK(dccl_socket_connect_wait(&root, deadline, b->abort_flag, &fd));
  struct dccl_register_msg reg = {.magic = DCCL_BOOTSTRAP_MAGIC, .nranks = b->nranks, .rank = b->rank};
  memcpy(reg.secret, id->secret, sizeof(reg.secret));
  dccl_wire_addr_from_sockaddr(&reg.listen_addr, &b->listen_addr);
  struct dccl_table_header header;
  struct dccl_wire_addr *table = malloc((size_t)b->nranks * sizeof(*table));
  ncclResult_t res = table ? ncclSuccess : dccl_error(ncclSystemError, "out of memory");
  if (res == ncclSuccess) res = dccl_socket_send_wait(fd, &reg, sizeof(reg), b->abort_flag, deadline);
  if (res == ncclSuccess) res = dccl_socket_recv_wait(fd, &header, sizeof(header), b->abort_flag, deadline);
  if (res == ncclSuccess && (header.magic != DCCL_BOOTSTRAP_MAGIC || header.nranks != b->nranks))
    res = dccl_error(ncclInternalError, "bootstrap rank %d: the rendezvous sent a bad table header", b->rank);
  if (res == ncclSuccess)
    res = dccl_socket_recv_wait(fd, table, (size_t)b->nranks * sizeof(*table), b->abort_flag, deadline);
  for (int r = 0; r < b->nranks && res == ncclSuccess; r++)
    res = dccl_wire_addr_to_sockaddr(&table[r], &b->peer_addrs[r]);
  close(fd);
  free(table);
  return res;
}

ncclResult_t dccl_bootstrap_init(const ncclUniqueId *id, int rank, int nranks, _Atomic int *abort_flag,
                                 struct dccl_bootstrap **out) {
  if (!out) return dccl_error(ncclInvalidArgument, "bootstrap init: out is NULL");
  *out = NULL;
  DCCLCHECK(dccl_bootstrap_check_id(id));
  if (nranks <= 0 || rank < 0 || rank >= nranks)
    return dccl_error(ncclInvalidArgument, "bootstrap init: rank %d of %d ranks is out of range", rank, nranks);
  int64_t deadline = dccl_bootstrap_creation_deadline();
  if (dccl_wait_state(abort_flag, 0) == DCCL_WAIT_ABORTED)
    return dccl_error(ncclRemoteError, "bootstrap init: aborted before joining");
  struct dccl_id_layout layout;
  memcpy(&layout, id->internal, sizeof(layout));
  struct dccl_bootstrap *b;
  DCCLCHECK(bootstrap_alloc(rank, nranks, abort_flag, &b));
  memcpy(b->secret, layout.secret, sizeof(b->secret));
  ncclResult_t res;
  struct sockaddr_storage local;
  DCCLCHECKGOTO(dccl_socket_local_addr(&local), res, fail);
  DCCLCHECKGOTO(open_listener(b, &local), res, fail);
  DCCLCHECKGOTO(join_rendezvous(b, &layout, deadline), res, fail);
  DCCLCHECKGOTO(dccl_bootstrap_connect_monitor(b, deadline), res, fail);
  char buf[80];
  DCCL_INFO(DCCL_BOOTSTRAP | DCCL_INIT, "bootstrap: rank %d of %d joined, listening on %s", rank, nranks,
            dccl_socket_addr_str(&b->listen_addr, buf, sizeof(buf)));
  *out = b;
  return ncclSuccess;
fail:
  dccl_bootstrap_close(b);
  return res;
}

ncclResult_t dccl_bootstrap_split(struct dccl_bootstrap *parent, int new_rank, int new_nranks, const int *members,
                                  struct dccl_bootstrap **out) {
  if (!parent || !members || !out) return dccl_error(ncclInvalidArgument, "bootstrap split: NULL argument");
  *out = NULL;
  if (new_nranks <= 0 || new_rank < 0 || new_rank >= new_nranks || new_nranks > parent->nranks)
    return dccl_error(ncclInvalidArgument, "bootstrap split: rank %d of %d is out of range", new_rank, new_nranks);
  if (members[new_rank] != parent->rank)
    return dccl_error(ncclInvalidArgument, "bootstrap split: members[%d] is %d, not this rank (%d)", new_rank,
                      members[new_rank], parent->rank);
  for (int i = 0; i < new_nranks; i++) {
    if (members[i] < 0 || members[i] >= parent->nranks)
      return dccl_error(ncclInvalidArgument, "bootstrap split: member %d is not a parent rank", members[i]);
    for (int j = 0; j < i; j++)
      if (members[j] == members[i])
        return dccl_error(ncclInvalidArgument, "bootstrap split: rank %d is listed twice", members[i]);
  }
  int64_t deadline = dccl_bootstrap_creation_deadline();
  struct dccl_bootstrap *b;
  DCCLCHECK(bootstrap_alloc(new_rank, new_nranks, parent->abort_flag, &b));
  ncclResult_t res;
  struct dccl_wire_addr *addrs = calloc((size_t)new_nranks, sizeof(*addrs));
  if (!addrs) {
    res = dccl_error(ncclSystemError, "out of memory");
    goto fail;
  }
  DCCLCHECKGOTO(open_listener(b, &parent->listen_addr), res, fail);
  /* The first member chooses the secret and hands it to the others over the parent's authenticated links. */
  if (new_rank == 0) {
    DCCLCHECKGOTO(dccl_random_bytes(b->secret, sizeof(b->secret)), res, fail);
    for (int i = 1; i < new_nranks; i++)
      DCCLCHECKGOTO(dccl_bootstrap_send_msg(parent, members[i], DCCL_CHANNEL_INTERNAL, DCCL_TAG_SPLIT_SECRET, b->secret,
                                            sizeof(b->secret), deadline),
                    res, fail);
  } else {
    DCCLCHECKGOTO(dccl_bootstrap_recv_msg(parent, members[0], DCCL_CHANNEL_INTERNAL, DCCL_TAG_SPLIT_SECRET, b->secret,
                                          sizeof(b->secret), deadline),
                  res, fail);
  }
  dccl_wire_addr_from_sockaddr(&addrs[new_rank], &b->listen_addr);
  DCCLCHECKGOTO(
      ring_allgather(parent, members, new_nranks, new_rank, DCCL_TAG_SPLIT_ADDR, addrs, sizeof(*addrs), deadline), res,
      fail);
  for (int i = 0; i < new_nranks; i++)
    DCCLCHECKGOTO(dccl_wire_addr_to_sockaddr(&addrs[i], &b->peer_addrs[i]), res, fail);
  DCCLCHECKGOTO(dccl_bootstrap_connect_monitor(b, deadline), res, fail);
  free(addrs);
  /* The parent may be closed before the child: do not keep a pointer into it. */
  b->abort_flag = NULL;
  *out = b;
  return ncclSuccess;
fail:
  free(addrs);
  dccl_bootstrap_close(b);
  return res;
}

/* ---- Closing ---- */

static void close_fd(int *fd) {
  /* Plain close only: a forked child running this must not tear down connections its parent still uses. */
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

void dccl_bootstrap_close(struct dccl_bootstrap *b) {
  if (!b) return;
  dccl_bootstrap_stop_monitor(b);
  close_fd(&b->listen_fd);
  for (int r = 0; r < b->nranks; r++) {
    if (b->send_fds) close_fd(&b->send_fds[r]);
    if (b->recv_fds) close_fd(&b->recv_fds[r]);
  }
  for (int i = 0; b->monitor_fds && i < b->nmonitor; i++) close_fd(&b->monitor_fds[i]);
  for (int i = 0; i < b->npending; i++) close(b->pending[i].fd);
  close_fd(&b->stop_fd);
  close_fd(&b->ask_fd);
  close_fd(&b->wake_fd);
  for (int r = 0; b->incoming && r < b->nranks; r++) {
    if (b->incoming[r].msg) free(b->incoming[r].msg->data);
    free(b->incoming[r].msg);
  }
  free(b->incoming);
  while (b->stash_head) {
    struct dccl_stashed_msg *m = b->stash_head;
    b->stash_head = m->next;
    free(m->data);
    free(m);
  }
  pthread_mutex_destroy(&b->monitor_send_lock);
  free(b->pending);
  free(b->scratch_pfds);
  free(b->scratch_peers);
  free(b->peer_addrs);
  free(b->send_fds);
  free(b->recv_fds);
  free(b->peer_closed);
  free(b->monitor_fds);
  free(b);
}
