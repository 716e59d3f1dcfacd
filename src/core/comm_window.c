/* Windows (ncclCommWindowRegister / ncclCommWindowDeregister): a registration every rank makes together, so that
 * each rank can map every other rank's range and kernels can read and write it in place. DCCL maps windows where
 * the direct all-reduce can use them: every rank's GPU side on one GPU, in processes of their own
 * (DCCL_DIRECT_WINDOWS; within one process every buffer is an address already). Window i is slot i on every rank,
 * since every rank registers and deregisters in the same order; the direct kernels find rank r's buffer through
 * row i of the device table (struct dccl_win_peer), and the owner names i on its board. A window whose range some
 * rank cannot share (host memory, a stream-ordered pool) is registered without mappings on every rank, and calls
 * in it take the FIFO algorithms. Elsewhere a window is a registered range (ncclCommRegister), nothing more. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/device/dev_exec.h"
#include "core/comm.h"
#include "core/comm_lazy_map.h"
#include "core/group.h"
#include "util/cuda_driver.h"
#include "util/cuda_peer_mem.h"
#include "util/error.h"
#include "util/fd_pass.h"
#include "util/log.h"

struct dccl_window {
  const char *buff;
  size_t size;
  void *reg;                      /* its ncclCommRegister handle */
  int mapped;                     /* row `index` of the device table holds every rank's range */
  struct dccl_peer_mem_map *maps; /* by rank: other processes' allocations mapped here */
  struct dccl_window *next;       /* the communicator's windows, mapped or not */
};

/* What each rank says about its range. */
struct win_hello {
  int32_t index;  /* the slot this rank chose */
  int32_t status; /* HELLO_* */
  int32_t pid, pad;
  uint64_t buff, size;
  struct dccl_peer_mem_export mem;
  char fd_socket[DCCL_FD_NAME_BYTES]; /* where peers send this rank file descriptors */
};
enum { HELLO_MAPPABLE = 0, HELLO_UNMAPPABLE = 1, HELLO_FAILED = 2 };

static int other_process(const struct dccl_comm *comm, const struct win_hello *h) {
  return h->pid != comm->peers[comm->rank].pid;
}

static int free_slot(const struct dccl_comm *comm) {
  for (int i = 0; i < DCCL_MAX_WINDOWS; i++)
    if (!comm->windows[i] && !dccl_lazy_map_row_taken(comm, i)) return i;
  return -1;
}

/* Sends this rank's descriptor to every rank of another process that must map it, and receives theirs into fds[]
 * (by rank; -1 where none comes). */
static ncclResult_t swap_fds(struct dccl_comm *comm, int sock, const struct win_hello *all, int my_fd, int *fds) {
  int n = comm->nranks, me = comm->rank, expected = 0, nout = 0;
  struct dccl_fd_letter *out = calloc((size_t)n, sizeof(*out));
  struct dccl_fd_note *notes = calloc((size_t)n, sizeof(*notes));
  int *got = malloc((size_t)n * sizeof(int));
  ncclResult_t res = out && notes && got ? ncclSuccess : dccl_error(ncclSystemError, "out of memory");
  for (int s = 1; s < n && res == ncclSuccess; s++) {
    int r = (me + s) % n;
    if (!other_process(comm, &all[r])) continue;
    expected += all[r].mem.kind == DCCL_PEER_MEM_FD;
    if (my_fd >= 0) out[nout++] = (struct dccl_fd_letter){all[r].fd_socket, my_fd, {me, 1, (uint64_t)all[me].index}};
  }
  if (res == ncclSuccess)
    res = dccl_comm_failure_over(comm, dccl_fd_exchange(sock, out, nout, expected, got, notes,
                                                        dccl_fd_exchange_timeout_ms(), &comm->abort_flag,
                                                        "ncclCommWindowRegister"));
  for (int k = 0; res == ncclSuccess && k < expected; k++) {
    int from = notes[k].rank;
    if (from < 0 || from >= n || notes[k].tag != (uint64_t)all[me].index || fds[from] >= 0) {
      res = dccl_error(ncclInternalError, "a window's file descriptor came from rank %d for window %llu", from,
                       (unsigned long long)notes[k].tag);
      while (k < expected) close(got[k++]);
    } else {
      fds[from] = got[k];
    }
  }
  free(out);
  free(notes);
  free(got);
  return res;
}

/* Maps every other rank's range and writes the window's row of the device table. */
static ncclResult_t map_window(struct dccl_comm *comm, struct dccl_window *w, const struct win_hello *all,
                               const int *fds) {
  int n = comm->nranks;
  struct dccl_win_peer *row = calloc((size_t)n, sizeof(*row));
  w->maps = calloc((size_t)n, sizeof(*w->maps));
  if (!row || !w->maps) {
    free(row);
    return dccl_error(ncclSystemError, "out of memory");
  }
  ncclResult_t res = ncclSuccess;
  for (int r = 0; r < n && res == ncclSuccess; r++) {
    if (r == comm->rank || !other_process(comm, &all[r])) continue; /* {0, 0}: the owner's address is ours */
    res = dccl_peer_mem_import(&all[r].mem, fds[r], comm->cuda_device, &w->maps[r]);
    row[r] = (struct dccl_win_peer){all[r].mem.base, w->maps[r].base};
  }
  if (res == ncclSuccess) res = dccl_dev_comm_set_window(&comm->coll, all[comm->rank].index, row);
  free(row);
  return res;
}

static void unmap_window(struct dccl_comm *comm, struct dccl_window *w) {
  for (int r = 0; w->maps && r < comm->nranks; r++) dccl_peer_mem_close(&w->maps[r]);
  free(w->maps);
  w->maps = NULL;
  w->mapped = 0;
}

/* This rank's side: which slot, and how peers map its range (or why they cannot). */
static void say_hello(struct dccl_comm *comm, const void *buff, size_t size, struct win_hello *me, int *fd) {
  memset(me, 0, sizeof(*me));
  me->index = free_slot(comm);
  me->pid = comm->peers[comm->rank].pid;
  me->buff = (uint64_t)(uintptr_t)buff;
  me->size = size;
  if (!size || !dccl_cuda_is_device_ptr(buff)) {
    me->status = HELLO_UNMAPPABLE; /* host memory: nothing for a kernel to map */
    return;
  }
  if (dccl_peer_mem_export(buff, size, &me->mem, fd) != ncclSuccess) {
    DCCL_INFO(DCCL_INIT, "window %p (%zu bytes) is not mapped for the other processes: %s", buff, size,
              dccl_last_error());
    me->status = HELLO_UNMAPPABLE;
  }
}

/* Closes and frees what one registration's exchange opened, passing `res` on. */
static ncclResult_t release_exchange(int *fds, int n, int my_fd, int sock, struct win_hello *all, int32_t *oks,
                                     ncclResult_t res) {
  for (int r = 0; fds && r < n; r++)
    if (fds[r] >= 0) close(fds[r]);
  if (my_fd >= 0) close(my_fd);
  dccl_fd_socket_close(sock);
  free(fds);
  free(all);
  free(oks);
  return res;
}

/* The collective part, where the direct all-reduce can use windows: every rank learns every range, and if all can
 * be shared, maps them. *index: the window's slot, or -1 when it is not mapped. */
static ncclResult_t register_everywhere(struct dccl_comm *comm, const void *buff, size_t size,
                                        struct dccl_window *w, int *index) {
  int n = comm->nranks, my_fd = -1, sock = -1;
  *index = -1;
  struct win_hello *all = calloc((size_t)n, sizeof(*all));
  int *fds = malloc((size_t)n * sizeof(int));
  int32_t *oks = calloc((size_t)n, sizeof(int32_t));
  for (int r = 0; fds && r < n; r++) fds[r] = -1;
  if (!all || !fds || !oks)
    return release_exchange(fds, n, my_fd, sock, all, oks, dccl_error(ncclSystemError, "out of memory"));
  struct win_hello *me = &all[comm->rank];
  say_hello(comm, buff, size, me, &my_fd);
  if (dccl_fd_socket_open((uint64_t)(uintptr_t)comm, &sock, me->fd_socket) != ncclSuccess) me->status = HELLO_FAILED;
  ncclResult_t res = dccl_bootstrap_allgather(comm->bootstrap, all, sizeof(*all));
  int status = HELLO_MAPPABLE, failed = -1;
  for (int r = 0; r < n && res == ncclSuccess; r++) {
    if (all[r].status > status) status = all[r].status;
    if (all[r].status == HELLO_FAILED && failed < 0) failed = r;
    if (all[r].index != me->index)
      res = dccl_error(ncclInvalidUsage,
                       "ncclCommWindowRegister: rank %d would make this window number %d, rank %d number %d (every "
                       "rank must register and deregister windows in the same order)",
                       comm->rank, me->index, r, all[r].index);
  }
  if (res == ncclSuccess && failed >= 0)
    res = dccl_error(ncclSystemError, "ncclCommWindowRegister: rank %d could not open a Unix socket", failed);
  if (res == ncclSuccess && status == HELLO_MAPPABLE && me->index < 0)
    DCCL_INFO(DCCL_INIT, "window %p is not mapped: all %d window slots are taken", buff, DCCL_MAX_WINDOWS);
  if (res == ncclSuccess && status == HELLO_MAPPABLE && me->index >= 0) {
    res = swap_fds(comm, sock, all, my_fd, fds);
    if (res == ncclSuccess) res = map_window(comm, w, all, fds);
    /* Every rank mapped, or none uses the window: the kernels of a rank that did would wait for one that did not. */
    oks[comm->rank] = res == ncclSuccess;
    char why[256];
    snprintf(why, sizeof(why), "%s", res == ncclSuccess ? "" : dccl_last_error());
    ncclResult_t gathered = dccl_bootstrap_allgather(comm->bootstrap, oks, sizeof(int32_t));
    for (int r = 0; r < n && gathered == ncclSuccess && res == ncclSuccess; r++)
      if (!oks[r])
        res = dccl_error(ncclSystemError, "ncclCommWindowRegister: rank %d could not map the window (its log says "
                                          "why)", r);
    if (gathered != ncclSuccess) res = gathered;
    else if (!oks[comm->rank]) res = dccl_error(ncclSystemError, "ncclCommWindowRegister: %s", why);
    if (res == ncclSuccess) {
      w->mapped = 1;
      *index = me->index;
    } else {
      unmap_window(comm, w);
    }
  }
  return release_exchange(fds, n, my_fd, sock, all, oks, res);
}

/* The driver calls run in the communicator's GPU context; the caller's is given back after. */
static void *enter(struct dccl_comm *comm) {
  void *saved = dccl_cuda_get_current();
  dccl_cuda_set_current(comm->cu_ctx);
  return saved;
}
static void leave(void *saved) {
  if (saved) dccl_cuda_set_current(saved);
}

static int ranks_in_this_process(const struct dccl_comm *comm) {
  int k = 0;
  for (int r = 0; r < comm->nranks; r++) k += comm->peers[r].pid == comm->peers[comm->rank].pid;
  return k;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags) {
  DCCLCHECK(dccl_comm_check(comm, "ncclCommWindowRegister"));
  if (!win) return dccl_error(ncclInvalidArgument, "ncclCommWindowRegister: win is NULL");
  *win = NULL;
  if (winFlags & ~NCCL_WIN_COLL_SYMMETRIC)
    return dccl_error(ncclInvalidArgument, "ncclCommWindowRegister: unknown flags 0x%x", (unsigned)winFlags);
  int collective = comm->coll.direct_ok == DCCL_DIRECT_WINDOWS;
  /* One thread driving several ranks in a group would wait in the first rank's exchange for the second's. */
  if (collective && dccl_group_depth() > 0 && ranks_in_this_process(comm) > 1)
    return dccl_error(ncclInvalidUsage,
                      "ncclCommWindowRegister: rank %d shares its process with other ranks of the communicator, whose "
                      "windows are exchanged at once: register outside ncclGroupStart/ncclGroupEnd",
                      comm->rank);
  struct dccl_window *w = calloc(1, sizeof(*w));
  if (!w) return dccl_error(ncclSystemError, "out of memory");
  w->buff = buff;
  w->size = size;
  ncclResult_t res = ncclCommRegister(comm, buff, size, &w->reg);
  int index = -1;
  if (res == ncclSuccess && collective) {
    void *saved = enter(comm);
    res = register_everywhere(comm, buff, size, w, &index);
    leave(saved);
  }
  if (res != ncclSuccess) {
    if (w->reg) (void)ncclCommDeregister(comm, w->reg);
    free(w);
    return res;
  }
  if (index >= 0) {
    comm->windows[index] = w;
    DCCL_INFO(DCCL_INIT, "window %d: %p, %zu bytes, mapped for every rank", index, buff, size);
  }
  w->next = comm->window_list;
  comm->window_list = w;
  *win = (ncclWindow_t)w;
  return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  DCCLCHECK(dccl_comm_check(comm, "ncclCommWindowDeregister"));
  if (!win) return dccl_error(ncclInvalidArgument, "ncclCommWindowDeregister: win is NULL");
  struct dccl_window *w = (struct dccl_window *)win, **link = &comm->window_list;
  while (*link && *link != w) link = &(*link)->next;
  if (!*link)
    return dccl_error(ncclInvalidArgument, "ncclCommWindowDeregister: %p is not a window of this communicator", win);
  int index = -1;
  for (int i = 0; i < DCCL_MAX_WINDOWS; i++)
    if (comm->windows[i] == w) index = i;
  if (index >= 0) {
    /* Peers read and write this rank's range through their mappings, and it theirs: no rank unmaps while a
     * kernel of any rank may still use the window. */
    dccl_dev_comm_wait(&comm->coll);
    DCCLCHECK(dccl_bootstrap_barrier(comm->bootstrap));
    void *saved = enter(comm);
    unmap_window(comm, w);
    leave(saved);
    comm->windows[index] = NULL;
  }
  *link = w->next;
  ncclResult_t res = ncclCommDeregister(comm, w->reg);
  free(w);
  return res;
}

int dccl_comm_window_of(const struct dccl_comm *comm, const void *ptr, size_t bytes) {
  uintptr_t a = (uintptr_t)ptr;
  for (int i = 0; i < DCCL_MAX_WINDOWS; i++) {
    const struct dccl_window *w = comm->windows[i];
    if (w && a >= (uintptr_t)w->buff && a + bytes <= (uintptr_t)w->buff + w->size) return i;
  }
  return -1;
}

void dccl_comm_free_windows(struct dccl_comm *comm) {
  void *saved = enter(comm);
  while (comm->window_list) {
    struct dccl_window *w = comm->window_list;
    comm->window_list = w->next;
    unmap_window(comm, w);
    free(w); /* its registration goes with the others' */
  }
  memset(comm->windows, 0, sizeof(comm->windows));
  leave(saved);
}
