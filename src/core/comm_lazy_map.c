/* Buffers outside windows, mapped on first use (core/comm_lazy_map.h). */
#include "core/comm_lazy_map.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "collectives/device/dev_exec.h"
#include "core/comm_board.h"
#include "core/group.h"
#include "core/lazy_spans.h"
#include "util/cuda_driver.h"
#include "util/cuda_peer_mem.h"
#include "util/error.h"
#include "util/fd_pass.h"
#include "util/log.h"
#include "util/params.h"

#define LAZY_ROWS 32 /* of the DCCL_MAX_WINDOWS rows of the device table: the rest stay for ncclCommWindowRegister */
/* Parts of reserved ranges a meeting exchanges at once: each batch's descriptors are mapped and closed before the
 * next, so a rank never holds more than this many received at a time (8 ranks x 2 buffers x 64 parts would near
 * the usual limit of 1024 open descriptors). */
#define LAZY_PARTS_PER_EXCHANGE 256

/* An implicit window: one allocation per rank (kind 0 where the buffer is unused on that rank) in row `index`. */
struct lazy_row {
  int index; /* -1: free */
  uint64_t used_at; /* the meeting that last used it: the least recent is replaced */
  struct dccl_peer_mem_export *allocs; /* by rank */
};

/* Another process's allocation mapped here, once however many rows name it. */
struct lazy_import {
  int rank, refs;
  uint64_t id;
  struct dccl_peer_mem_map map;
  struct lazy_import *next;
};

struct dccl_lazy_map {
  struct dccl_shm_board *board; /* NULL: the ranks meet over the bootstrap */
  uint64_t min_bytes;           /* DCCL_LAZY_MAP_BYTES */
  uint64_t meetings;
  /* Rows used from this meeting on may serve operations of an open group, not launched yet: not replaced. */
  uint64_t protect_from;
  int in_group;
  struct lazy_row rows[LAZY_ROWS];
  struct lazy_import *imports;
  /* cuMem allocations travel as file descriptors: this rank's socket, every rank's socket name (NULL where some
   * rank could not open one: cuMem memory then takes the FIFO algorithms). */
  int sock;
  char (*fd_names)[DCCL_FD_NAME_BYTES];
  struct dccl_lazy_spans *spans; /* reserved ranges of several allocations, mirrored (core/lazy_spans.h) */
};

/* The descriptors a meeting brought, each of rank notes[k].rank's allocation with buffer id notes[k].tag (fd -1
 * once mapped). */
struct lazy_fds {
  int n, *fd;
  struct dccl_fd_note *notes;
};

/* What a rank says at a meeting: whether it can take part, the rows its open group uses (bit i: rows[i]; no rank
 * replaces a row any rank still needs, so all keep the same rows), and the allocations holding its buffers. */
struct lazy_say {
  int32_t ok;
  uint32_t busy;
  struct dccl_peer_mem_export buf[2]; /* send, recv */
};
/* The parts a rank's buffers of the SPAN kind lie in: gathered after the says, only where some buffer is a span (the
 * common meeting stays small). */
struct lazy_parts {
  struct dccl_peer_mem_parts buf[2];
};

/* A meeting's allgather for `op`: on the board where there is one (a few us), else over the bootstrap (tens). */
static ncclResult_t gather(struct dccl_comm *comm, const struct dccl_op *op, void *all, size_t size) {
  if (!comm->lazy->board) return dccl_bootstrap_allgather(comm->bootstrap, all, size);
  struct dccl_slot_header call = dccl_op_call_header(op);
  return dccl_comm_board_allgather(comm, comm->lazy->board, all, size, &call);
}

static int one_rank_per_process(const struct dccl_comm *comm) {
  for (int a = 0; a < comm->nranks; a++)
    for (int b = a + 1; b < comm->nranks; b++)
      if (comm->peers[a].pid == comm->peers[b].pid && comm->peers[a].real_host_hash == comm->peers[b].real_host_hash)
        return 0;
  return 1;
}

/* Both buffers (those the call uses) lie in ranges this rank registered with ncclCommRegister. */
static int registered(struct dccl_comm *comm, const struct dccl_op *op) {
  int n = comm->nranks;
  return (op->send_win == DCCL_WINDOW_UNUSED || dccl_comm_is_registered(comm, op->sendbuff, dccl_op_in_bytes(op, n))) &&
         (op->recv_win == DCCL_WINDOW_UNUSED || dccl_comm_is_registered(comm, op->recvbuff, dccl_op_out_bytes(op, n)));
}

/* The size DCCL_LAZY_MAP_BYTES names: the call's larger buffer (an all-gather's output, a reduce-scatter's input;
 * counting a rank's block instead kept 4 ranks' 256 KiB all-gather on the ring, 2.5x the direct path's time). */
static size_t call_bytes(const struct dccl_op *op, int nranks) {
  size_t in = dccl_op_in_bytes(op, nranks), out = dccl_op_out_bytes(op, nranks);
  return in > out ? in : out;
}

int dccl_lazy_map_applies(struct dccl_comm *comm, const struct dccl_op *op) {
  /* Every call passes here: the communicator's terms were settled at creation (comm->lazy exists), so host buffers
   * and other communicators leave at once. Every term is the same on every rank: the call, the communicator, the
   * environment, and whether the buffers are registered (NCCL's rule: where one rank passes registered buffers,
   * every rank does; the stall report names a rank that does not). */
  if (!op->on_device || !comm->lazy) return 0;
  const char *forced = dccl_param_str(DCCL_PARAM_ALGO);
  return !dccl_dev_ce_on(&comm->coll) && op->kind != DCCL_OP_SEND && op->kind != DCCL_OP_RECV &&
         !dccl_op_in_windows(op) && (!*forced || !strcasecmp(forced, "direct")) &&
         (!op->redop.has_pre || op->redop.called == ncclAvg) &&
         (call_bytes(op, comm->nranks) >= comm->lazy->min_bytes || registered(comm, op));
}

int dccl_lazy_map_row_taken(const struct dccl_comm *comm, int index) {
  for (int i = 0; comm->lazy && i < LAZY_ROWS; i++)
    if (comm->lazy->rows[i].index == index) return 1;
  return 0;
}

/* The allocation holding [buf, +bytes): 1 with it described (kind 0 for an unused buffer), 0 where other processes
 * cannot map it (dccl_peer_mem_describe; cuMem memory also needs every rank's descriptor socket). Asked at every
 * call, so it records and logs nothing: such memory just takes the FIFO algorithms. */
static int describe(const struct dccl_lazy_map *lm, const void *buf, size_t bytes, int unused,
                    struct dccl_peer_mem_export *e, struct dccl_peer_mem_parts *parts) {
  memset(e, 0, sizeof(*e));
  parts->n = 0;
  return unused || (dccl_peer_mem_describe(buf, bytes, e, parts) &&
                    (e->kind == DCCL_PEER_MEM_LEGACY || lm->fd_names));
}

static int same_alloc(const struct dccl_peer_mem_export *a, const struct dccl_peer_mem_export *b) {
  return a->kind == b->kind && a->base == b->base && a->id == b->id;
}

static int overlap(const struct dccl_peer_mem_export *a, const struct dccl_peer_mem_export *b) {
  return a->kind && b->kind && a->base < b->base + b->bytes && b->base < a->base + a->bytes;
}

static void release_import(struct dccl_lazy_map *lm, int rank, uint64_t id) {
  for (struct lazy_import **link = &lm->imports; *link; link = &(*link)->next) {
    struct lazy_import *im = *link;
    if (im->rank != rank || im->id != id) continue;
    if (--im->refs == 0) {
      dccl_peer_mem_close(&im->map);
      *link = im->next;
      free(im);
    }
    return;
  }
}

/* Frees a row: no kernel may still read it (the communicator's are waited for), then its mappings are let go. */
static void drop_row(struct dccl_comm *comm, struct lazy_row *row) {
  if (row->index < 0) return;
  dccl_dev_comm_wait(&comm->coll);
  for (int r = 0; r < comm->nranks; r++)
    if (row->allocs[r].kind == DCCL_PEER_MEM_SPAN)
      dccl_lazy_spans_let_go(comm->lazy->spans, r, &row->allocs[r]);
    else if (r != comm->rank && row->allocs[r].kind)
      release_import(comm->lazy, r, row->allocs[r].id);
  free(row->allocs);
  row->allocs = NULL;
  row->index = -1;
}

/* Rank r's allocation as mapped here (imported on first use; a cuMem allocation by its descriptor in `fds`, which
 * the import takes): its base in this process, or 0. */
static uint64_t import(struct dccl_comm *comm, int r, const struct dccl_peer_mem_export *e, struct lazy_fds *fds) {
  struct dccl_lazy_map *lm = comm->lazy;
  if (e->kind == DCCL_PEER_MEM_SPAN) { /* its parts were mapped into the mirror before the rows were made */
    uint64_t local = dccl_lazy_spans_hold(lm->spans, r, e);
    if (!local) dccl_lazy_spans_let_go(lm->spans, r, e);
    return local;
  }
  for (struct lazy_import *im = lm->imports; im; im = im->next)
    if (im->rank == r && im->id == e->id) {
      im->refs++;
      return im->map.base;
    }
  int fd = -1;
  for (int k = 0; e->kind == DCCL_PEER_MEM_FD && k < fds->n && fd < 0; k++)
    if (fds->notes[k].rank == r && fds->notes[k].tag == e->id && fds->notes[k].ok && fds->fd[k] >= 0) {
      fd = fds->fd[k];
      fds->fd[k] = -1;
    }
  if (e->kind == DCCL_PEER_MEM_FD && fd < 0) {
    DCCL_INFO(DCCL_COLL, "rank %d: rank %d's cuMem allocation %#llx not mapped: no file descriptor came for it",
              comm->rank, r, (unsigned long long)e->base);
    return 0;
  }
  struct lazy_import *im = calloc(1, sizeof(*im));
  if (!im) {
    if (fd >= 0) close(fd);
    return 0;
  }
  if (dccl_peer_mem_import(e, fd, comm->cuda_device, &im->map) != ncclSuccess) {
    DCCL_INFO(DCCL_COLL, "rank %d: rank %d's allocation %#llx not mapped: %s", comm->rank, r,
              (unsigned long long)e->base, dccl_last_error());
    free(im);
    return 0;
  }
  im->rank = r;
  im->id = e->id;
  im->refs = 1;
  im->next = lm->imports;
  lm->imports = im;
  return im->map.base;
}

/* A table row no window uses (explicit or implicit), or -1. */
static int free_index(const struct dccl_comm *comm) {
  for (int i = 0; i < DCCL_MAX_WINDOWS; i++)
    if (!comm->windows[i] && !dccl_lazy_map_row_taken(comm, i)) return i;
  return -1;
}

/* The row holding the ranks' allocations of one buffer role (`which`: send 0, recv 1), made if there is none; -1
 * when no row could be had. *made: it is new (its mappings are this rank's to report). `keep`: a row this call
 * already uses, never replaced for the other role. */
static struct lazy_row *row_for(struct dccl_comm *comm, const struct lazy_say *all, int which, uint32_t busy,
                                const struct lazy_row *keep, struct lazy_fds *fds, int *made, int *mapped) {
  struct dccl_lazy_map *lm = comm->lazy;
  int n = comm->nranks;
  struct lazy_row *lru = NULL, *empty = NULL;
  for (int i = 0; i < LAZY_ROWS; i++) {
    struct lazy_row *row = &lm->rows[i];
    if (row->index < 0) {
      if (!empty) empty = row;
      continue;
    }
    int r = 0;
    while (r < n && same_alloc(&row->allocs[r], &all[r].buf[which])) r++;
    if (r == n) return row;
    if (row != keep && !(busy >> i & 1) && (!lru || row->used_at < lru->used_at)) lru = row;
  }
  int index = free_index(comm);
  struct lazy_row *row = empty && index >= 0 ? empty : lru;
  if (!row) return NULL;
  if (row == lru) {
    index = row->index;
    drop_row(comm, row);
  }
  *made = 1; /* from here every rank reports (so all meet again, even where this rank runs out of memory) */
  row->allocs = calloc((size_t)n, sizeof(*row->allocs));
  struct dccl_win_peer *entries = calloc((size_t)n, sizeof(*entries));
  if (!row->allocs || !entries) {
    free(row->allocs);
    free(entries);
    row->allocs = NULL;
    return NULL;
  }
  row->index = index;
  for (int r = 0; r < n; r++) {
    row->allocs[r] = all[r].buf[which];
    if (r == comm->rank && row->allocs[r].kind == DCCL_PEER_MEM_SPAN) /* listed while a row names it */
      dccl_lazy_spans_hold(lm->spans, r, &row->allocs[r]);
    if (r == comm->rank || !row->allocs[r].kind) continue; /* {0, 0}: an address as it is, or never read */
    uint64_t local = import(comm, r, &row->allocs[r], fds);
    if (!local) {
      *mapped = 0;
      row->allocs[r].kind = 0; /* nothing to release for it */
    }
    entries[r] = (struct dccl_win_peer){row->allocs[r].base, local};
  }
  if (*mapped && dccl_dev_comm_set_window(&comm->coll, index, entries) != ncclSuccess) *mapped = 0;
  free(entries);
  return row;
}

/* Rows naming an allocation of rank r that another allocation said here now overlaps (freed, allocated again). */
static void drop_stale_rows(struct dccl_comm *comm, const struct lazy_say *all) {
  for (int i = 0; i < LAZY_ROWS; i++) {
    struct lazy_row *row = &comm->lazy->rows[i];
    for (int r = 0; row->index >= 0 && r < comm->nranks; r++)
      for (int b = 0; b < 2; b++)
        if (overlap(&row->allocs[r], &all[r].buf[b]) && !same_alloc(&row->allocs[r], &all[r].buf[b])) {
          drop_row(comm, row);
          break;
        }
  }
}

/* Rows naming a range that got parts at this meeting: dropped where some rank could not map its parts. */
static void drop_touched_rows(struct dccl_comm *comm) {
  struct dccl_lazy_map *lm = comm->lazy;
  for (int i = 0; i < LAZY_ROWS; i++)
    for (int r = 0; lm->rows[i].index >= 0 && r < comm->nranks; r++)
      if (lm->rows[i].allocs[r].kind == DCCL_PEER_MEM_SPAN &&
          dccl_lazy_spans_touched(lm->spans, r, &lm->rows[i].allocs[r], lm->meetings)) {
        drop_row(comm, &lm->rows[i]);
        break;
      }
}

/* Whether a row names rank r's allocation `e`: then every other rank holds it mapped. */
static int named(const struct dccl_lazy_map *lm, int r, const struct dccl_peer_mem_export *e) {
  for (int i = 0; i < LAZY_ROWS; i++)
    if (lm->rows[i].index >= 0 && same_alloc(&lm->rows[i].allocs[r], e)) return 1;
  return 0;
}

/* This rank's descriptors for a meeting: each goes to every other rank. */
struct lazy_out {
  int n, *fd;
  struct dccl_fd_note *note;
};

/* Adds a descriptor `fd` for `tag`, or where fd < 0 (this rank could not export it) a stand-in with ok 0, so no
 * receiver waits for nothing (/dev/null is no allocation). */
static ncclResult_t add_out(struct lazy_out *o, int me, int fd, uint64_t tag, uint64_t base) {
  int ok = fd >= 0;
  if (!ok) {
    DCCL_INFO(DCCL_COLL, "rank %d: its cuMem allocation %#llx is not exported: %s", me, (unsigned long long)base,
              dccl_last_error());
    if ((fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
      return dccl_error(ncclSystemError, "open(/dev/null) failed");
  }
  o->fd[o->n] = fd;
  o->note[o->n++] = (struct dccl_fd_note){me, ok, tag};
  return ncclSuccess;
}

/* A cuMem allocation no row names yet (in the says `all`, where not NULL) goes from its owner to every other rank
 * as a file descriptor, and so does each part of reserved ranges in `need` (dccl_lazy_spans_plan). Every rank lists
 * the same ones: all see the same says and hold the same rows and lists. */
static ncclResult_t swap_fds(struct dccl_comm *comm, const struct lazy_say *all, const struct dccl_span_part *need,
                             int nneed, struct lazy_fds *got) {
  struct dccl_lazy_map *lm = comm->lazy;
  int n = comm->nranks, me = comm->rank;
  struct lazy_out mine = {0, calloc((size_t)nneed + 3, sizeof(int)), calloc((size_t)nneed + 3, sizeof(*mine.note))};
  ncclResult_t res = mine.fd && mine.note ? ncclSuccess : dccl_error(ncclSystemError, "out of memory");
  got->n = 0;
  for (int r = 0; all && r < n && res == ncclSuccess; r++)
    for (int b = 0; b < 2 && res == ncclSuccess; b++) {
      const struct dccl_peer_mem_export *e = &all[r].buf[b];
      if (e->kind != DCCL_PEER_MEM_FD || named(lm, r, e) || (b == 1 && same_alloc(&all[r].buf[0], e))) continue;
      if (r != me) {
        got->n++;
        continue;
      }
      struct dccl_peer_mem_export again = {0};
      int fd = -1;
      if (dccl_peer_mem_export((const void *)(uintptr_t)e->base, e->bytes, &again, &fd) == ncclSuccess &&
          (again.kind != DCCL_PEER_MEM_FD || again.id != e->id) && fd >= 0) {
        close(fd);
        fd = -1;
      }
      res = add_out(&mine, me, fd, e->id, e->base);
    }
  for (int k = 0; k < nneed && res == ncclSuccess; k++) {
    const struct dccl_span_part *q = &need[k];
    if (q->rank != me) {
      got->n++;
      continue;
    }
    int fd = -1;
    (void)dccl_peer_mem_export_part(q->start + q->part.at, q->part.id, &fd);
    res = add_out(&mine, me, fd, q->part.id, q->start + q->part.at);
  }
  int nout = mine.n * (n - 1), k = 0;
  struct dccl_fd_letter *out = res == ncclSuccess && (got->n || nout) ? calloc((size_t)nout + 1, sizeof(*out)) : NULL;
  if (res == ncclSuccess && (got->n || nout)) {
    got->fd = calloc((size_t)got->n + 1, sizeof(int));
    got->notes = calloc((size_t)got->n + 1, sizeof(*got->notes));
    if (!out || !got->fd || !got->notes) res = dccl_error(ncclSystemError, "out of memory");
    for (int i = 0; i < mine.n && res == ncclSuccess; i++)
      for (int s = 1; s < n; s++)
        out[k++] = (struct dccl_fd_letter){lm->fd_names[(me + s) % n], mine.fd[i], mine.note[i]};
    if (res == ncclSuccess)
      res = dccl_comm_failure_over(comm, dccl_fd_exchange(lm->sock, out, k, got->n, got->fd, got->notes,
                                                          dccl_fd_exchange_timeout_ms(), &comm->abort_flag,
                                                          "buffers mapped on first use"));
  }
  if (res != ncclSuccess) got->n = 0;
  for (int i = 0; i < mine.n; i++) close(mine.fd[i]);
  free(mine.fd);
  free(mine.note);
  free(out);
  return res;
}

/* Closes the descriptors no mapping took. */
static void drop_fds(struct lazy_fds *got) {
  for (int k = 0; k < got->n; k++)
    if (got->fd[k] >= 0) close(got->fd[k]);
  free(got->fd);
  free(got->notes);
  memset(got, 0, sizeof(*got));
}

/* The meeting proper, in the communicator's context. */
static ncclResult_t meet(struct dccl_comm *comm, struct dccl_op *op, struct lazy_say *all,
                         struct lazy_parts *parts) {
  struct dccl_lazy_map *lm = comm->lazy;
  int n = comm->nranks, me = comm->rank;
  size_t in = dccl_op_in_bytes(op, n), out = dccl_op_out_bytes(op, n);
  struct lazy_say *mine = &all[me];
  mine->ok = !dccl_cuda_stream_capturing(op->stream) &&
             describe(lm, op->sendbuff, in, op->send_win == DCCL_WINDOW_UNUSED, &mine->buf[0], &parts[me].buf[0]) &&
             describe(lm, op->recvbuff, out, op->recv_win == DCCL_WINDOW_UNUSED, &mine->buf[1], &parts[me].buf[1]);
  for (int i = 0; i < LAZY_ROWS; i++)
    if (lm->rows[i].index >= 0 && lm->rows[i].used_at >= lm->protect_from) mine->busy |= 1u << i;
  DCCLCHECK(gather(comm, op, all, sizeof(*all)));
  lm->meetings++;
  uint32_t busy = 0;
  for (int r = 0; r < n; r++) {
    if (!all[r].ok) return ncclSuccess; /* FIFO algorithms, on every rank */
    busy |= all[r].busy;
  }
  int spans = 0;
  for (int r = 0; r < n; r++)
    spans |= all[r].buf[0].kind == DCCL_PEER_MEM_SPAN || all[r].buf[1].kind == DCCL_PEER_MEM_SPAN;
  if (spans) DCCLCHECK(gather(comm, op, parts, sizeof(*parts)));
  drop_stale_rows(comm, all);
  struct dccl_span_part *need = NULL;
  int nneed = 0;
  for (int r = 0; r < n && nneed >= 0; r++)
    for (int b = 0; b < 2 && nneed >= 0; b++)
      if (all[r].buf[b].kind == DCCL_PEER_MEM_SPAN)
        nneed = dccl_lazy_spans_plan(lm->spans, r, &all[r].buf[b], &parts[r].buf[b], &need, nneed);
  if (nneed < 0) {
    free(need);
    return dccl_error(ncclSystemError, "out of memory");
  }
  int made = nneed > 0, mapped = 1; /* parts mapped into mirrors: every rank says whether it could */
  ncclResult_t res = ncclSuccess;
  for (int from = 0; res == ncclSuccess && from < nneed; from += LAZY_PARTS_PER_EXCHANGE) {
    int count = nneed - from < LAZY_PARTS_PER_EXCHANGE ? nneed - from : LAZY_PARTS_PER_EXCHANGE;
    struct lazy_fds batch = {0};
    res = swap_fds(comm, NULL, need + from, count, &batch);
    if (res == ncclSuccess)
      res = dccl_lazy_spans_take(comm, &lm->spans, need + from, count, batch.fd, batch.notes, batch.n, lm->meetings,
                                 &mapped);
    drop_fds(&batch);
  }
  free(need);
  struct lazy_fds fds = {0}; /* the allocations' descriptors, which the rows import */
  if (res == ncclSuccess) res = swap_fds(comm, all, NULL, 0, &fds);
  if (res != ncclSuccess) {
    drop_fds(&fds);
    return res;
  }
  struct lazy_row *send = row_for(comm, all, 0, busy, NULL, &fds, &made, &mapped);
  struct lazy_row *recv = send ? row_for(comm, all, 1, busy, send, &fds, &made, &mapped) : NULL;
  drop_fds(&fds);
  int32_t *oks = NULL;
  if (made) { /* every rank made the same rows: each says whether it mapped them */
    oks = calloc((size_t)n, sizeof(*oks));
    if (!oks) return dccl_error(ncclSystemError, "out of memory");
    oks[me] = send && recv && mapped;
    res = gather(comm, op, oks, sizeof(*oks));
    for (int r = 0; r < n && res == ncclSuccess; r++) mapped &= oks[r] != 0;
    free(oks);
    DCCLCHECK(res);
    if (!mapped) { /* some rank could not: every rank lets these rows go, and those of ranges given parts now */
      if (send) drop_row(comm, send);
      if (recv && recv != send) drop_row(comm, recv);
      drop_touched_rows(comm);
      dccl_lazy_spans_sweep(&lm->spans, 0);
      return ncclSuccess;
    }
    DCCL_INFO(DCCL_COLL, "rank %d: %s #%llu: every rank's buffers mapped on first use (rows %d and %d of the windows' "
              "table)", me, dccl_op_name(op->kind), (unsigned long long)op->seq, send->index, recv->index);
  }
  dccl_lazy_spans_sweep(&lm->spans, 0); /* ranges listed now that no row took */
  if (!send || !recv) return ncclSuccess;
  send->used_at = recv->used_at = lm->meetings;
  if (op->send_win != DCCL_WINDOW_UNUSED) op->send_win = send->index;
  if (op->recv_win != DCCL_WINDOW_UNUSED) op->recv_win = recv->index;
  return ncclSuccess;
}

/* Every rank's descriptor socket, named to all (collective). A rank that cannot open one says so with an empty name,
 * and no rank sends descriptors. */
static ncclResult_t open_fd_sockets(struct dccl_comm *comm) {
  struct dccl_lazy_map *lm = comm->lazy;
  char (*names)[DCCL_FD_NAME_BYTES] = calloc((size_t)comm->nranks, DCCL_FD_NAME_BYTES);
  if (!names) return dccl_error(ncclSystemError, "out of memory");
  if (dccl_fd_socket_open((uint64_t)(uintptr_t)comm, &lm->sock, names[comm->rank]) != ncclSuccess) {
    DCCL_INFO(DCCL_INIT, "rank %d: no descriptor socket (%s): cuMem buffers are not mapped on first use", comm->rank,
              dccl_last_error());
    lm->sock = -1;
    memset(names[comm->rank], 0, DCCL_FD_NAME_BYTES);
  }
  ncclResult_t res = dccl_bootstrap_allgather(comm->bootstrap, names, DCCL_FD_NAME_BYTES);
  int all_open = res == ncclSuccess;
  for (int r = 0; r < comm->nranks && all_open; r++) all_open = names[r][1] != 0; /* abstract: a leading NUL */
  if (all_open) lm->fd_names = names;
  else free(names);
  return res;
}

ncclResult_t dccl_lazy_map_init(struct dccl_comm *comm) {
  /* The terms that do not depend on the call, the same on every rank. A blocking meeting would break a nonblocking
   * communicator's promise; deterministic mode takes no FIFO fallback it could not check. */
  int64_t min = dccl_param_int(DCCL_PARAM_LAZY_MAP_BYTES);
  if (comm->coll.direct_ok != DCCL_DIRECT_WINDOWS || min < 0 || comm->nonblocking || comm->coll.deterministic ||
      comm->nranks > DCCL_CONN_SLOTS || !one_rank_per_process(comm))
    return ncclSuccess;
  comm->lazy = calloc(1, sizeof(*comm->lazy));
  if (!comm->lazy) return dccl_error(ncclSystemError, "out of memory");
  struct dccl_lazy_map *lm = comm->lazy;
  lm->min_bytes = (uint64_t)min;
  lm->sock = -1;
  for (int i = 0; i < LAZY_ROWS; i++) lm->rows[i].index = -1;
  DCCLCHECK(dccl_comm_board_open(comm, sizeof(struct lazy_parts) > sizeof(struct lazy_say) ? sizeof(struct lazy_parts)
                                                                                          : sizeof(struct lazy_say),
                                  &lm->board));
  return open_fd_sockets(comm);
}

ncclResult_t dccl_lazy_map_call(struct dccl_comm *comm, struct dccl_op *op) {
  struct lazy_say *all = calloc((size_t)comm->nranks, sizeof(*all));
  struct lazy_parts *parts = calloc((size_t)comm->nranks, sizeof(*parts));
  if (!all || !parts) {
    free(all);
    free(parts);
    return dccl_error(ncclSystemError, "out of memory");
  }
  /* Outside a group each call launched its kernels already; a group's calls launch at its end. */
  struct dccl_lazy_map *lm = comm->lazy;
  int depth = dccl_group_depth();
  if (depth == 0 || !lm->in_group) lm->protect_from = lm->meetings + 1; /* this meeting's number */
  lm->in_group = depth > 0;
  void *saved = dccl_cuda_get_current();
  dccl_cuda_set_current(comm->cu_ctx);
  ncclResult_t res = meet(comm, op, all, parts);
  if (saved) dccl_cuda_set_current(saved);
  free(all);
  free(parts);
  return res;
}

void dccl_lazy_map_free(struct dccl_comm *comm) {
  struct dccl_lazy_map *lm = comm->lazy;
  if (!lm) return;
  void *saved = dccl_cuda_get_current();
  dccl_cuda_set_current(comm->cu_ctx);
  for (int i = 0; i < LAZY_ROWS; i++) free(lm->rows[i].allocs);
  dccl_shm_board_close(lm->board);
  dccl_fd_socket_close(lm->sock);
  free(lm->fd_names);
  dccl_lazy_spans_sweep(&lm->spans, 1);
  while (lm->imports) {
    struct lazy_import *im = lm->imports;
    lm->imports = im->next;
    dccl_peer_mem_close(&im->map);
    free(im);
  }
  if (saved) dccl_cuda_set_current(saved);
  free(lm);
  comm->lazy = NULL;
}
