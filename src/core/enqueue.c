/* The collective and point-to-point API: check the arguments, build an op, hand it to the group. */
#include <stdint.h>
#include <stdlib.h>

#include "collectives/device/dev_exec.h"
#include "collectives/op.h"
#include "core/comm.h"
#include "core/comm_lazy_map.h"
#include "core/group.h"
#include "core/redop.h"
#include "util/cuda_driver.h"
#include "util/error.h"
#include "util/params.h"

/* The checks every call shares; fills esize. */
/* per_rank: the buffers hold nranks blocks of count elements. */
static ncclResult_t check_common(struct dccl_comm *comm, const char *call, ncclDataType_t type, size_t count,
                                 int per_rank, size_t *esize) {
  DCCLCHECK(dccl_comm_check(comm, call));
  size_t multiple = per_rank ? (size_t)comm->nranks : 1;
  if (comm->abort_flag) { /* a revoke sets it too: one load on the call's path for both */
    if (atomic_load(&comm->revoked))
      return dccl_error(ncclInvalidUsage,
                        "%s: the communicator was revoked: only ncclCommDestroy, ncclCommSplit, ncclCommShrink, "
                        "ncclCommAbort and queries work on it",
                        call);
    int code = atomic_load(&comm->async_error);
    return dccl_error(code != ncclSuccess ? (ncclResult_t)code : ncclRemoteError, "%s: the communicator has failed: %s",
                      call, comm->error_text);
  }
  if (comm->finalized) return dccl_error(ncclInvalidUsage, "%s: the communicator was finalized", call);
  if (atomic_load_explicit(&comm->init_state, memory_order_acquire) != DCCL_INIT_READY)
    return dccl_error(ncclInvalidUsage,
                      "%s: the communicator is still being created (nonblocking): wait until ncclCommGetAsyncError "
                      "returns ncclSuccess",
                      call);
  if (atomic_load_explicit(&comm->splits_running, memory_order_relaxed) > 0)
    return dccl_error(ncclInvalidUsage,
                      "%s: a nonblocking ncclCommSplit/ncclCommShrink of this communicator is still running: wait "
                      "until ncclCommGetAsyncError returns ncclSuccess",
                      call);
  *esize = dccl_type_size(type);
  if (*esize == 0) return dccl_error(ncclInvalidArgument, "%s: unknown datatype %d", call, (int)type);
  if (count > SIZE_MAX / *esize / multiple)
    return dccl_error(ncclInvalidArgument, "%s: count %zu of %s overflows the address space", call, count,
                      dccl_type_name(type));
  return ncclSuccess;
}

static ncclResult_t check_root(const struct dccl_comm *comm, const char *call, int root) {
  if (root < 0 || root >= comm->nranks)
    return dccl_error(ncclInvalidArgument, "%s: root %d is outside 0..%d", call, root, comm->nranks - 1);
  return ncclSuccess;
}

/* What a call learns from its buffers: every buffer of one call is host memory, or every one is device memory. */
struct call {
  const char *name;
  cudaStream_t stream;
  int on_device, known;
  const void *asked; /* the buffer the driver was last asked about: an in-place call's second is not asked again */
};

static ncclResult_t check_buffer(struct call *c, const char *which, const void *buf, size_t count) {
  if (!buf && count > 0) return dccl_error(ncclInvalidArgument, "%s: %s is NULL with count %zu", c->name, which, count);
  if (!buf || count == 0 || (c->known && buf == c->asked)) return ncclSuccess;
  c->asked = buf;
  int dev = dccl_cuda_is_device_ptr(buf);
  if (c->known && dev != c->on_device)
    return dccl_error(ncclInvalidUsage, "%s: %s %p is %s memory, the other buffer %s memory: pass both in one kind",
                      c->name, which, buf, dev ? "GPU" : "host", dev ? "host" : "GPU");
  c->on_device = dev;
  c->known = 1;
  return ncclSuccess;
}

/* A call of zero elements names no buffer, so it would run as a host operation, which a captured stream refuses.
 * It reads and writes nothing: under capture every rank (all pass zero) records nothing, as NCCL does, and its
 * link need not exist (nccl-tests -G captures its zero-byte sizes). */
static int empty_and_captured(const struct call *c) {
  return !c->known && dccl_cuda_stream_capturing(c->stream);
}

/* Host buffers wait for the stream's work (which may produce the input); device buffers are ordered on it. */
static ncclResult_t check_stream(struct dccl_comm *comm, struct call *c) {
  if (!c->on_device) {
    /* A host operation follows the communicator's device operations, whatever their streams (the links and the
     * ranks' order are shared). */
    dccl_dev_comm_wait(&comm->coll);
    return dccl_cuda_host_op_on_stream(c->stream, c->name);
  }
  if (!comm->coll.dev)
    return dccl_error(ncclInvalidUsage,
                      "%s: GPU buffers, but rank %d's communicator has no usable CUDA device (create it with the GPU "
                      "current: cudaSetDevice before ncclCommInitRank)",
                      c->name, comm->rank);
  return ncclSuccess;
}

/* Whether an output of this size should bypass the caches (see collectives/copy_stream.c). */
static int stream_output(const struct dccl_comm *comm, int kind, size_t bytes) {
  int64_t limit = dccl_param_int(DCCL_PARAM_STREAM_BYTES);
  if (kind == DCCL_OP_ALLGATHER) bytes *= (size_t)comm->nranks;
  return limit >= 0 && bytes >= (uint64_t)limit;
}

/* The windows holding a collective's buffers, for the direct algorithms between processes. A buffer the call does
 * not use on this rank (a broadcast's input off the root, a reduce's output) counts as in one. */
static void find_windows(struct dccl_comm *comm, struct dccl_op *op) {
  if (op->kind == DCCL_OP_SEND || op->kind == DCCL_OP_RECV) return;
  size_t in = dccl_op_in_bytes(op, comm->nranks), out = dccl_op_out_bytes(op, comm->nranks);
  int root = comm->rank == op->root;
  op->send_win = op->kind == DCCL_OP_BROADCAST && !root ? DCCL_WINDOW_UNUSED
                                                        : dccl_comm_window_of(comm, op->sendbuff, in);
  op->recv_win = op->kind == DCCL_OP_REDUCE && !root ? DCCL_WINDOW_UNUSED
                                                     : dccl_comm_window_of(comm, op->recvbuff, out);
}

static ncclResult_t submit(struct dccl_comm *comm, const struct call *c, int kind, const void *sendbuff, void *recvbuff,
                           size_t count, ncclDataType_t type, size_t esize, const struct dccl_redop *redop, int root,
                           int peer) {
  if (empty_and_captured(c)) return ncclSuccess;
  /* A mismatch verdict asks the ranks to drain: the failed collective (a slow rank's) joins them here. */
  if (atomic_load_explicit(&comm->drain_pending, memory_order_relaxed)) DCCLCHECK(dccl_drain_at_entry(comm, kind));
  DCCLCHECK(check_stream(comm, (struct call *)c));
  if (redop && redop->pre_dev && c->known && !c->on_device)
    return dccl_error(ncclInvalidUsage,
                      "%s: the operator's scalar lives in GPU memory (ncclScalarDevice), which only a kernel reads: "
                      "host buffers need a ncclScalarHostImmediate scalar",
                      c->name);
  struct dccl_op *op = dccl_op_get(&comm->coll);
  if (!op) return dccl_error(ncclSystemError, "%s: out of memory", dccl_op_name(kind));
  op->kind = kind;
  op->on_device = c->on_device;
  op->stream = c->stream;
  op->sendbuff = sendbuff;
  op->recvbuff = recvbuff;
  op->count = count;
  op->type = type;
  op->esize = esize;
  if (redop) op->redop = *redop; else dccl_redop_builtin(&op->redop, ncclSum, type, 1);
  op->root = root;
  op->peer = peer;
  if (c->on_device && comm->coll.direct_ok == DCCL_DIRECT_WINDOWS) find_windows(comm, op);
  if (kind == DCCL_OP_SEND) op->seq = comm->p2p_send_seq[peer]++;
  else if (kind == DCCL_OP_RECV) op->seq = comm->p2p_recv_seq[peer]++;
  else op->seq = comm->coll_seq++;
  /* Buffers outside windows between processes: mapped at the call where DCCL_LAZY_MAP_BYTES asks (the ranks meet). */
  if (dccl_lazy_map_applies(comm, op)) {
    ncclResult_t met = dccl_lazy_map_call(comm, op);
    if (met != ncclSuccess) {
      dccl_op_put(op);
      return met;
    }
  }
  ncclResult_t res = ncclSuccess;
  if (c->on_device && dccl_dev_ce_takes(&comm->coll, op)) { /* copy engines: no channels, no links */
    op->algo = DCCL_ALGO_CE;
    op->nchannels = 0;
  } else if (!dccl_plan_cache_get(op)) {
    res = dccl_op_plan(op);
  }
  op->stream_out = stream_output(comm, kind, count * esize);
  if (res != ncclSuccess) {
    dccl_op_put(op);
    return res;
  }
  DCCL_TRACE(DCCL_COLL, "%s #%llu count %zu type %s root %d peer %d algo %s", dccl_op_name(kind),
             (unsigned long long)op->seq, count, dccl_type_name(type), root, peer, dccl_algo_name(op->algo));
  return dccl_group_enqueue(op);
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  struct call c = {.name = "ncclAllReduce", .stream = stream};
  size_t es;
  struct dccl_redop r;
  DCCLCHECK(check_common(comm, c.name, datatype, count, 0, &es));
  DCCLCHECK(check_buffer(&c, "sendbuff", sendbuff, count));
  DCCLCHECK(check_buffer(&c, "recvbuff", recvbuff, count));
  DCCLCHECK(dccl_redop_resolve(comm, op, datatype, &r, c.name));
  return submit(comm, &c, DCCL_OP_ALLREDUCE, sendbuff, recvbuff, count, datatype, es, &r, -1, -1);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  struct call c = {.name = "ncclBroadcast", .stream = stream};
  size_t es;
  DCCLCHECK(check_common(comm, c.name, datatype, count, 0, &es));
  DCCLCHECK(check_root(comm, c.name, root));
  if (comm->rank == root) DCCLCHECK(check_buffer(&c, "sendbuff", sendbuff, count));
  DCCLCHECK(check_buffer(&c, "recvbuff", recvbuff, count));
  return submit(comm, &c, DCCL_OP_BROADCAST, sendbuff, recvbuff, count, datatype, es, NULL, root, -1);
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  struct call c = {.name = "ncclReduce", .stream = stream};
  size_t es;
  struct dccl_redop r;
  DCCLCHECK(check_common(comm, c.name, datatype, count, 0, &es));
  DCCLCHECK(check_root(comm, c.name, root));
  DCCLCHECK(check_buffer(&c, "sendbuff", sendbuff, count));
  if (comm->rank == root) DCCLCHECK(check_buffer(&c, "recvbuff", recvbuff, count));
  DCCLCHECK(dccl_redop_resolve(comm, op, datatype, &r, c.name));
  return submit(comm, &c, DCCL_OP_REDUCE, sendbuff, recvbuff, count, datatype, es, &r, root, -1);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  struct call c = {.name = "ncclAllGather", .stream = stream};
  size_t es;
  DCCLCHECK(check_common(comm, c.name, datatype, sendcount, 1, &es));
  DCCLCHECK(check_buffer(&c, "sendbuff", sendbuff, sendcount));
  DCCLCHECK(check_buffer(&c, "recvbuff", recvbuff, sendcount));
  return submit(comm, &c, DCCL_OP_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, es, NULL, -1, -1);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  struct call c = {.name = "ncclReduceScatter", .stream = stream};
  size_t es;
  struct dccl_redop r;
  DCCLCHECK(check_common(comm, c.name, datatype, recvcount, 1, &es));
  DCCLCHECK(check_buffer(&c, "sendbuff", sendbuff, recvcount));
  DCCLCHECK(check_buffer(&c, "recvbuff", recvbuff, recvcount));
  DCCLCHECK(dccl_redop_resolve(comm, op, datatype, &r, c.name));
  return submit(comm, &c, DCCL_OP_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, es, &r, -1, -1);
}

static ncclResult_t p2p(int kind, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        int peer, ncclComm_t comm, cudaStream_t stream) {
  struct call c = {.name = dccl_op_name(kind), .stream = stream};
  size_t es;
  DCCLCHECK(check_common(comm, c.name, datatype, count, 0, &es));
  if (peer < 0 || peer >= comm->nranks)
    return dccl_error(ncclInvalidArgument, "%s: peer %d is outside 0..%d", c.name, peer, comm->nranks - 1);
  DCCLCHECK(check_buffer(&c, kind == DCCL_OP_SEND ? "sendbuff" : "recvbuff", kind == DCCL_OP_SEND ? sendbuff : recvbuff,
                         count));
  if (empty_and_captured(&c)) return ncclSuccess;
  DCCLCHECK(dccl_p2p_check_first_use(comm, kind, peer, c.on_device, (uint64_t)count * es, stream,
                                     dccl_cuda_stream_capturing));
  return submit(comm, &c, kind, sendbuff, recvbuff, count, datatype, es, NULL, -1, peer);
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return p2p(DCCL_OP_SEND, sendbuff, NULL, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return p2p(DCCL_OP_RECV, NULL, recvbuff, count, datatype, peer, comm, stream);
}

/* All-to-all, gather and scatter are groups of sends and receives. This ends the group such a call opened after
 * `mark` (the group's last op before it): on failure its own sends and receives queued so far are dropped first, so
 * none runs half an exchange. */
static ncclResult_t grouped(ncclResult_t res, struct dccl_op *mark) {
  if (res != ncclSuccess) dccl_group_drop_after(mark);
  ncclResult_t end = ncclGroupEnd();
  return res != ncclSuccess ? res : end;
}

/* A composite call's buffers, checked once under its own name before any send or receive is queued: both of one
 * kind; `in_rank` / `out_rank`: whether this rank passes them. */
static ncclResult_t check_composite(struct call *c, const void *sendbuff, size_t in_count, int in_rank,
                                    const void *recvbuff, size_t out_count, int out_rank) {
  if (in_rank) DCCLCHECK(check_buffer(c, "sendbuff", sendbuff, in_count));
  if (out_rank) DCCLCHECK(check_buffer(c, "recvbuff", recvbuff, out_count));
  return ncclSuccess;
}

ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream) {
  struct call c = {.name = "ncclAlltoAll", .stream = stream};
  size_t es;
  DCCLCHECK(check_common(comm, c.name, datatype, count, 1, &es));
  size_t all = count * (size_t)comm->nranks;
  DCCLCHECK(check_composite(&c, sendbuff, all, 1, recvbuff, all, 1));
  struct dccl_op *mark = dccl_group_last();
  ncclResult_t res = ncclGroupStart();
  for (int p = 0; p < comm->nranks && res == ncclSuccess; p++) {
    res = ncclSend((const char *)sendbuff + (size_t)p * count * es, count, datatype, p, comm, stream);
    if (res == ncclSuccess) res = ncclRecv((char *)recvbuff + (size_t)p * count * es, count, datatype, p, comm, stream);
  }
  return grouped(res, mark);
}

ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  struct call c = {.name = "ncclGather", .stream = stream};
  size_t es;
  DCCLCHECK(check_common(comm, c.name, datatype, count, 1, &es));
  DCCLCHECK(check_root(comm, c.name, root));
  DCCLCHECK(check_composite(&c, sendbuff, count, 1, recvbuff, count * (size_t)comm->nranks, comm->rank == root));
  struct dccl_op *mark = dccl_group_last();
  ncclResult_t res = ncclGroupStart();
  if (comm->rank == root)
    for (int p = 0; p < comm->nranks && res == ncclSuccess; p++)
      res = ncclRecv((char *)recvbuff + (size_t)p * count * es, count, datatype, p, comm, stream);
  if (res == ncclSuccess) res = ncclSend(sendbuff, count, datatype, root, comm, stream);
  return grouped(res, mark);
}

ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  struct call c = {.name = "ncclScatter", .stream = stream};
  size_t es;
  DCCLCHECK(check_common(comm, c.name, datatype, count, 1, &es));
  DCCLCHECK(check_root(comm, c.name, root));
  DCCLCHECK(check_composite(&c, sendbuff, count * (size_t)comm->nranks, comm->rank == root, recvbuff, count, 1));
  struct dccl_op *mark = dccl_group_last();
  ncclResult_t res = ncclGroupStart();
  if (comm->rank == root)
    for (int p = 0; p < comm->nranks && res == ncclSuccess; p++)
      res = ncclSend((const char *)sendbuff + (size_t)p * count * es, count, datatype, p, comm, stream);
  if (res == ncclSuccess) res = ncclRecv(recvbuff, count, datatype, root, comm, stream);
  return grouped(res, mark);
}
