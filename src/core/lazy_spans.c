/* Reserved ranges mirrored for buffers mapped on first use (core/lazy_spans.h). */
#include "core/lazy_spans.h"

#include <stdlib.h>
#include <unistd.h>

#include "collectives/device/dev_exec.h"
#include "util/error.h"
#include "util/log.h"

struct span {
  int rank, refs;
  uint64_t start, bytes; /* the owner's range */
  uint64_t local;        /* its mirror here; 0 for this rank's own */
  uint64_t touched;      /* the meeting that last listed a part of it */
  int nparts, cap;
  struct dccl_peer_mem_part *parts; /* listed: sent by the owner (mapped in the mirror where there is one) */
  struct span *next;
};

struct dccl_lazy_spans {
  struct span *list;
};

static struct span *find(const struct dccl_lazy_spans *s, int rank, uint64_t start, uint64_t bytes) {
  for (struct span *sp = s ? s->list : NULL; sp; sp = sp->next)
    if (sp->rank == rank && sp->start == start && sp->bytes == bytes) return sp;
  return NULL;
}

static int same_part(const struct dccl_peer_mem_part *a, const struct dccl_peer_mem_part *b) {
  return a->at == b->at && a->bytes == b->bytes && a->id == b->id;
}

static int listed(const struct span *sp, const struct dccl_peer_mem_part *p) {
  for (int i = 0; sp && i < sp->nparts; i++)
    if (same_part(&sp->parts[i], p)) return 1;
  return 0;
}

int dccl_lazy_spans_plan(const struct dccl_lazy_spans *s, int rank, const struct dccl_peer_mem_export *e,
                         const struct dccl_peer_mem_parts *parts, struct dccl_span_part **need, int n) {
  const struct span *sp = find(s, rank, e->base, e->bytes);
  for (uint32_t i = 0; i < parts->n; i++) {
    const struct dccl_peer_mem_part *p = &parts->part[i];
    int planned = listed(sp, p);
    for (int k = 0; k < n && !planned; k++)
      planned = (*need)[k].rank == rank && (*need)[k].start == e->base && same_part(&(*need)[k].part, p);
    if (planned) continue;
    struct dccl_span_part *grown = realloc(*need, (size_t)(n + 1) * sizeof(**need));
    if (!grown) return -1;
    *need = grown;
    grown[n++] = (struct dccl_span_part){rank, e->base, e->bytes, *p};
  }
  return n;
}

/* Rank r's part as a descriptor from the exchange, taken; -1 where none (or only a stand-in) came. */
static int take_fd(int r, uint64_t id, int *fds, const struct dccl_fd_note *notes, int nfds) {
  for (int k = 0; k < nfds; k++)
    if (notes[k].rank == r && notes[k].tag == id && fds[k] >= 0) {
      int fd = fds[k];
      fds[k] = -1;
      if (notes[k].ok) return fd;
      close(fd); /* a stand-in: the owner could not export it */
      return -1;
    }
  return -1;
}

/* Lists part p of `sp`, unmapping (after the kernels, once per meeting: *waited) the listed parts it replaces. */
static ncclResult_t list_part(struct dccl_comm *comm, struct span *sp, const struct dccl_peer_mem_part *p,
                              int *waited) {
  for (int i = 0; i < sp->nparts;) {
    struct dccl_peer_mem_part *old = &sp->parts[i];
    if (old->at >= p->at + p->bytes || p->at >= old->at + old->bytes) {
      i++;
      continue;
    }
    if (sp->local) {
      if (!*waited) dccl_dev_comm_wait(&comm->coll);
      *waited = 1;
      dccl_peer_mem_mirror_unmap(sp->local, old);
    }
    *old = sp->parts[--sp->nparts];
  }
  if (sp->nparts == sp->cap) {
    int cap = sp->cap ? 2 * sp->cap : 16;
    struct dccl_peer_mem_part *grown = realloc(sp->parts, (size_t)cap * sizeof(*grown));
    if (!grown) return dccl_error(ncclSystemError, "out of memory");
    sp->parts = grown, sp->cap = cap;
  }
  sp->parts[sp->nparts++] = *p;
  return ncclSuccess;
}

ncclResult_t dccl_lazy_spans_take(struct dccl_comm *comm, struct dccl_lazy_spans **s, const struct dccl_span_part *need,
                                  int n, int *fds, const struct dccl_fd_note *notes, int nfds, uint64_t meeting,
                                  int *mapped) {
  if (!*s && n && !(*s = calloc(1, sizeof(**s)))) return dccl_error(ncclSystemError, "out of memory");
  int waited = 0;
  for (int k = 0; k < n; k++) {
    const struct dccl_span_part *q = &need[k];
    struct span *sp = find(*s, q->rank, q->start, q->bytes);
    if (!sp) {
      if (!(sp = calloc(1, sizeof(*sp)))) return dccl_error(ncclSystemError, "out of memory");
      *sp = (struct span){.rank = q->rank, .start = q->start, .bytes = q->bytes, .next = (*s)->list};
      (*s)->list = sp;
    }
    sp->touched = meeting;
    DCCLCHECK(list_part(comm, sp, &q->part, &waited));
    if (q->rank == comm->rank) continue;
    int fd = take_fd(q->rank, q->part.id, fds, notes, nfds);
    ncclResult_t res = ncclInvalidUsage;
    if (sp->local || dccl_peer_mem_mirror_reserve(sp->start, sp->bytes, &sp->local) == ncclSuccess)
      res = dccl_peer_mem_mirror_map(sp->local, &q->part, fd, comm->cuda_device);
    else if (fd >= 0)
      close(fd);
    if (res != ncclSuccess) {
      DCCL_INFO(DCCL_COLL, "rank %d: part %#llx+%llu of rank %d's range %#llx not mapped: %s", comm->rank,
                (unsigned long long)q->part.at, (unsigned long long)q->part.bytes, q->rank,
                (unsigned long long)q->start, dccl_last_error());
      sp->nparts--; /* listed last: not mapped, so nothing to unmap */
      *mapped = 0;
    }
  }
  return ncclSuccess;
}

uint64_t dccl_lazy_spans_hold(struct dccl_lazy_spans *s, int r, const struct dccl_peer_mem_export *e) {
  struct span *sp = find(s, r, e->base, e->bytes);
  if (!sp) return 0;
  sp->refs++;
  return sp->local;
}

void dccl_lazy_spans_let_go(struct dccl_lazy_spans *s, int r, const struct dccl_peer_mem_export *e) {
  struct span *sp = find(s, r, e->base, e->bytes);
  if (sp && sp->refs > 0) sp->refs--;
}

int dccl_lazy_spans_touched(const struct dccl_lazy_spans *s, int r, const struct dccl_peer_mem_export *e,
                            uint64_t meeting) {
  const struct span *sp = find(s, r, e->base, e->bytes);
  return sp && sp->touched == meeting;
}

void dccl_lazy_spans_sweep(struct dccl_lazy_spans **s, int all) {
  if (!*s) return;
  for (struct span **link = &(*s)->list; *link;) {
    struct span *sp = *link;
    if (sp->refs > 0 && !all) {
      link = &sp->next;
      continue;
    }
    for (int i = 0; sp->local && i < sp->nparts; i++) dccl_peer_mem_mirror_unmap(sp->local, &sp->parts[i]);
    dccl_peer_mem_mirror_free(sp->local, sp->bytes);
    *link = sp->next;
    free(sp->parts);
    free(sp);
  }
  if (all) {
    free(*s);
    *s = NULL;
  }
}
