/* Buffers outside windows, mapped on first use (DCCL_LAZY_MAP_BYTES), for the direct collectives of ranks that
 * live one per process on one GPU (DCCL_DIRECT_WINDOWS): PyTorch's unregistered tensors. At such a call the ranks
 * meet (on a shared-memory board, core/comm_board.h, else over the bootstrap; every rank makes the same calls in the
 * same order, so all reach the meeting): each says
 * which allocation holds each of its buffers (a legacy IPC handle and the allocation's buffer id); the set of one
 * allocation per rank is an implicit window, kept in a row of the windows' device table, so later calls on the same
 * allocations find it. A new set takes a free row, or the least recently used one's, once the communicator's
 * kernels are done; every rank maps the others' allocations (each once, however many rows name it) and all say
 * whether they could. Every rank holds the same rows, since all see the same meetings. A set naming an allocation
 * whose address another allocation of the same rank now covers (freed and allocated again) is dropped, and its
 * mappings closed once nothing names them, so freed memory is not kept alive. cuMem allocations travel as file
 * descriptors; a buffer in a range reserved for several (PyTorch's expandable segments) names the range, which
 * every peer mirrors, mapping the parts calls use (core/lazy_spans.h). Where some rank cannot take part (its
 * buffers are memory no peer can map, or it is capturing a graph) every rank takes the FIFO algorithms. */
#ifndef DCCL_CORE_COMM_LAZY_MAP_H_
#define DCCL_CORE_COMM_LAZY_MAP_H_

#include "collectives/op.h"
#include "core/comm.h"

/* At creation, every rank: where calls may meet (the communicator's terms), the state and the meetings' board are
 * made (collective). Errors: the bootstrap's. */
ncclResult_t dccl_lazy_map_init(struct dccl_comm *comm);

/* 1 when `op` (device buffers, not in windows) meets the other ranks at its call: from DCCL_LAZY_MAP_BYTES, or at
 * any size where its buffers are registered (ncclCommRegister). The same answer on every rank. */
int dccl_lazy_map_applies(struct dccl_comm *comm, const struct dccl_op *op);

/* The meeting: on success op->send_win / recv_win name rows every rank mapped (the direct algorithms may run), or
 * stay as they were (every rank takes the FIFO algorithms). Errors: the bootstrap's (a peer gone or late). */
ncclResult_t dccl_lazy_map_call(struct dccl_comm *comm, struct dccl_op *op);

/* 1 when row `index` of the windows' table holds an implicit window (ncclCommWindowRegister skips it). */
int dccl_lazy_map_row_taken(const struct dccl_comm *comm, int index);

/* Closes every mapping (the communicator's kernels are done) and frees the state. */
void dccl_lazy_map_free(struct dccl_comm *comm);

#endif
