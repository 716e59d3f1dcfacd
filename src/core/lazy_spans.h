/* Reserved ranges of cuMem allocations (PyTorch's expandable segments, where a buffer may span several
 * allocations) mirrored for the buffers mapped on first use (core/comm_lazy_map.h). Every rank lists, for every
 * rank's range some row names, the parts whose descriptors its owner has sent: all ranks see the same meetings, so
 * all keep the same lists, and an owner sends only the parts of a call's buffers that no list holds. A peer's range
 * is mirrored here (its size of address space reserved once, each part mapped at its offset from the range's start),
 * so one row serves every buffer of the range and the kernels translate as for any row; this rank's own ranges are
 * only listed. A part replaced in its place (another buffer id, or other bounds) is unmapped once the
 * communicator's kernels are done, and the new one mapped. A range lives while rows name it. */
#ifndef DCCL_CORE_LAZY_SPANS_H_
#define DCCL_CORE_LAZY_SPANS_H_

#include "core/comm.h"
#include "util/cuda_peer_mem.h"
#include "util/fd_pass.h"

struct dccl_lazy_spans;

/* A part a rank's buffer lies in that no list holds: its owner sends it (the descriptor's tag: its buffer id). */
struct dccl_span_part {
  int rank;
  uint64_t start, bytes; /* the owner's reserved range */
  struct dccl_peer_mem_part part;
};

/* Appends to *need (n long) the parts of rank `rank`'s buffer in range `e` (`parts`) that no list holds and *need
 * does not hold yet: the new length, or -1 out of memory. The same on every rank. */
int dccl_lazy_spans_plan(const struct dccl_lazy_spans *s, int rank, const struct dccl_peer_mem_export *e,
                         const struct dccl_peer_mem_parts *parts, struct dccl_span_part **need, int n);

/* Lists the planned parts (every rank alike: made where missing, the range marked touched at `meeting`) and maps
 * the peers' ones into their mirrors: rank r's part by the descriptor whose note says rank r, ok, and the part's
 * buffer id (taken from fds[], set to -1). 1 when every one was mapped; 0 leaves the lists as every rank has them
 * (the caller drops what the meeting touched). Errors: out of memory only. */
ncclResult_t dccl_lazy_spans_take(struct dccl_comm *comm, struct dccl_lazy_spans **s, const struct dccl_span_part *need,
                                  int n, int *fds, const struct dccl_fd_note *notes, int nfds, uint64_t meeting,
                                  int *mapped);

/* A row names rank r's range `e` (hold: its mirror here, 0 for this rank's own or a range not listed) or stops
 * naming it (let_go). */
uint64_t dccl_lazy_spans_hold(struct dccl_lazy_spans *s, int r, const struct dccl_peer_mem_export *e);
void dccl_lazy_spans_let_go(struct dccl_lazy_spans *s, int r, const struct dccl_peer_mem_export *e);
/* Whether rank r's range `e` got parts at meeting `meeting`. */
int dccl_lazy_spans_touched(const struct dccl_lazy_spans *s, int r, const struct dccl_peer_mem_export *e,
                            uint64_t meeting);
/* Frees the ranges no row names (`all`: every range, with the state), their mirrors unmapped: no kernel may still
 * use them. */
void dccl_lazy_spans_sweep(struct dccl_lazy_spans **s, int all);

#endif
