// The device executor: a kernel runs a launch's tasks (collectives/device/dev_work.h). A task is one channel of
// one operation; it runs the schedule of pure/schedule.h step by step, exactly as collectives/executor.c does on
// the host: per step, thread 0 of the CTA waits until every FIFO the step reads has a slot and every FIFO it
// writes has room, the CTA's threads reduce and copy with 16-byte accesses, and thread 0 publishes. A channel with
// two streams (the trees' up and down) runs them in the two halves of the CTA, each with its own barrier, so
// neither can block the other. No CTA ever waits for another CTA of its launch.
//
// Memory ordering (docs/design.md): a producer's threads write a slot, the CTA meets at a barrier, and thread 0
// publishes `tail` with a fence and a release store; the consumer's thread 0 reads `tail` with an acquire before
// its CTA (after a barrier) reads the slot, and hands the slot back by a release store of `head`. The scope is
// the GPU's when both ends of the link are kernels on one GPU, the system's otherwise (dccl_dev_conn.same_gpu).
#include <stdint.h>

#include "collectives/device/dev_reduce.cuh"
#include "collectives/device/dev_work.h"

#define DCCL_DEV_OP_SEND 6 // enum dccl_op_kind (collectives/coll_comm.h)
#define DCCL_DEV_OP_RECV 7
#define POLLS_PER_ABORT_CHECK 1024

struct dev_half {
  int tid, nthreads, bar;
};

struct dev_cta {
  struct dccl_dev_task task;
  struct dccl_dev_args args[2];           // per half
  uint64_t seq[2][2 * DCCL_DEV_CONN_SLOTS]; // nops of each connection at the task's start, per half
  volatile uint64_t up_done;              // steps stream 0 has finished (stream 1 may wait on it)
  volatile int stop;                      // a half hit an error: both stop
};

// A link's counters at the narrowest scope that orders them: the GPU when both ends are kernels on it.
__device__ __forceinline__ uint64_t conn_acquire(int gpu, const uint64_t *p) {
  return gpu ? dccl_ld_acquire_gpu_u64(p) : dccl_ld_acquire_u64(p);
}
__device__ __forceinline__ void conn_release(int gpu, uint64_t *p, uint64_t v) {
  if (gpu)
    dccl_st_release_gpu_u64(p, v);
  else
    dccl_st_release_u64(p, v);
}

__device__ __forceinline__ void half_barrier(const dev_half &h) {
  asm volatile("bar.sync %0, %1;" ::"r"(h.bar), "r"(h.nthreads) : "memory");
}

// Records the first failure of the launch for the host (ncclCommGetAsyncError) and marks the link aborted, so the
// rank at the other end stops too.
__device__ void dev_fail(const dccl_dev_work *w, dev_cta *cta, const dccl_dev_conn *c, uint32_t code, uint32_t want_kind,
                         uint32_t got_kind, uint64_t want_seq, uint64_t got_seq, uint64_t want_bytes,
                         uint64_t got_bytes) {
  cta->stop = 1;
  if (c) {
    uint32_t *aborted = (uint32_t *)dccl_conn_word((char *const *)c->regions, c->desc.aborted);
    dccl_cas0_u32(aborted, 1);
  }
  if (atomicCAS_system(&w->status->error, 0u, code) != 0u) return;
  w->status->peer = c ? c->peer : -1;
  w->status->want_kind = want_kind;
  w->status->got_kind = got_kind;
  w->status->want_seq = want_seq;
  w->status->got_seq = got_seq;
  w->status->want_bytes = want_bytes;
  w->status->got_bytes = got_bytes;
  __threadfence_system();
}

// Waits until `ready()` holds, checking the launch's abort flag, the CTA's stop flag and the link's abort word now
// and then. Returns 0 when it must give up.
template <typename Ready>
__device__ int dev_wait(const dccl_dev_work *w, dev_cta *cta, const dccl_dev_conn *c, Ready ready) {
  for (unsigned polls = 1;; polls++) {
    if (ready()) return 1;
    if (polls % POLLS_PER_ABORT_CHECK) continue;
    if (cta->stop) return 0;
    const uint32_t *aborted = (const uint32_t *)dccl_conn_word((char *const *)c->regions, c->desc.aborted);
    if (dccl_ld_acquire_u32(aborted)) {
      dev_fail(w, cta, NULL, DCCL_DEV_PEER_ABORTED, 0, 0, 0, 0, 0, 0);
      w->status->peer = c->peer;
      return 0;
    }
    if (*(volatile const uint32_t *)w->abort_flag) {
      dev_fail(w, cta, c, DCCL_DEV_ABORTED, 0, 0, 0, 0, 0, 0);
      return 0;
    }
    if (polls > 64 * POLLS_PER_ABORT_CHECK) __nanosleep(200); // long waits leave the SM to co-tenants
  }
}

// Thread 0: waits for the step's FIFOs and fills the half's operands. Returns 0 to stop.
__device__ int dev_step_acquire(const dccl_dev_work *w, dev_cta *cta, int half, const dccl_prim_step &st,
                                uint32_t kind) {
  const dccl_dev_task &t = cta->task;
  dccl_dev_args &a = cta->args[half];
  uint64_t bytes = st.nelem * t.esize;
  uint32_t rmask = 0, smask = 0;
  int npeers = t.sched.npeers;
  if (st.flags & DCCL_PRIM_RECV0) rmask |= 1u;
  if (st.flags & DCCL_PRIM_RECV1) rmask |= 2u;
  if (st.flags & DCCL_PRIM_RECV_PARENT) rmask |= 1u << DCCL_TREE_PARENT;
  if (st.flags & DCCL_PRIM_RECV_ALL) rmask |= (1u << npeers) - 1;
  if (st.flags & DCCL_PRIM_SEND0) smask |= 1u;
  if (st.flags & DCCL_PRIM_SEND1) smask |= 2u;
  if (st.flags & DCCL_PRIM_SEND_PARENT) smask |= 1u << DCCL_TREE_PARENT;
  if (st.flags & DCCL_PRIM_SEND_ALL) smask |= (1u << npeers) - 1;

  const char *in = NULL;
  if (st.flags & DCCL_PRIM_INPUT)
    in = ((st.flags & DCCL_PRIM_INPUT_FROM_OUTPUT) ? (const char *)t.recvbuff : t.sendbuff) + st.in_off * t.esize;
  a.nsrcs = 0;
  a.ndsts = 0;
  a.own = -1;
  a.round_own = 0;
  if (in && !(st.flags & DCCL_PRIM_RANK_ORDER)) {
    a.own = 0;
    a.srcs[a.nsrcs++] = in;
  }
  int own_rank_placed = !(st.flags & DCCL_PRIM_RANK_ORDER);
  for (int i = 0; i < DCCL_DEV_CONN_SLOTS; i++) {
    if (!((rmask >> i) & 1)) continue;
    dccl_dev_conn *c = t.recv[i];
    uint64_t pos = c->pos;
    int gpu = c->same_gpu;
    const uint64_t *tail = dccl_conn_word((char *const *)c->regions, c->desc.tail);
    if (!dev_wait(w, cta, c, [&] { return conn_acquire(gpu, tail) > pos; })) return 0;
    const char *slot = dccl_conn_slot(&c->desc, (char *const *)c->regions, pos);
    const dccl_slot_header *h = (const dccl_slot_header *)(slot + 8);
    uint64_t want_seq = cta->seq[half][i];
    if (h->abort) {
      dev_fail(w, cta, c, DCCL_DEV_PEER_ABORTED, 0, 0, 0, 0, 0, 0);
      return 0;
    }
    if (h->kind != kind || h->seq != want_seq || h->bytes != bytes) {
      dev_fail(w, cta, c, DCCL_DEV_MISMATCH, kind, h->kind, want_seq, h->seq, bytes, h->bytes);
      return 0;
    }
    if (!own_rank_placed && c->peer > t.rank) { // one-shot: the own input at its rank's place
      a.own = a.nsrcs;
      a.srcs[a.nsrcs++] = in;
      own_rank_placed = 1;
    }
    a.srcs[a.nsrcs++] = slot + DCCL_SLOT_HEAD_BYTES;
  }
  if (!own_rank_placed && in) {
    a.own = a.nsrcs;
    a.srcs[a.nsrcs++] = in;
  }
  if (st.flags & DCCL_PRIM_RANK_ORDER) a.round_own = 1;
  if (st.flags & DCCL_PRIM_OUTPUT) a.dsts[a.ndsts++] = t.recvbuff + st.out_off * t.esize;
  for (int i = 0; i < DCCL_DEV_CONN_SLOTS; i++) {
    if (!((smask >> i) & 1)) continue;
    dccl_dev_conn *c = t.send[i];
    uint64_t pos = c->pos, nslots = c->desc.nslots;
    int gpu = c->same_gpu;
    const uint64_t *head = dccl_conn_word((char *const *)c->regions, c->desc.head);
    if (!dev_wait(w, cta, c, [&] { return pos - conn_acquire(gpu, head) < nslots; })) return 0;
    a.dsts[a.ndsts++] = dccl_conn_slot(&c->desc, (char *const *)c->regions, pos) + DCCL_SLOT_HEAD_BYTES;
  }
  a.n = st.nelem;
  a.kind = t.redop.kind;
  a.pre = t.redop.pre;
  // The tree root forwards data that already had its input's premultiply: a plain copy.
  a.has_pre = t.redop.has_pre && !(st.flags & DCCL_PRIM_INPUT_FROM_OUTPUT);
  a.post_div = (st.flags & DCCL_PRIM_POST) ? t.redop.post_div : 0;
  return 1;
}

// Thread 0: publishes the step's sends and hands its receptions back.
__device__ void dev_step_release(dev_cta *cta, int half, const dccl_prim_step &st, uint32_t kind) {
  const dccl_dev_task &t = cta->task;
  int npeers = t.sched.npeers;
  uint32_t smask = 0, rmask = 0;
  if (st.flags & DCCL_PRIM_SEND0) smask |= 1u;
  if (st.flags & DCCL_PRIM_SEND1) smask |= 2u;
  if (st.flags & DCCL_PRIM_SEND_PARENT) smask |= 1u << DCCL_TREE_PARENT;
  if (st.flags & DCCL_PRIM_SEND_ALL) smask |= (1u << npeers) - 1;
  if (st.flags & DCCL_PRIM_RECV0) rmask |= 1u;
  if (st.flags & DCCL_PRIM_RECV1) rmask |= 2u;
  if (st.flags & DCCL_PRIM_RECV_PARENT) rmask |= 1u << DCCL_TREE_PARENT;
  if (st.flags & DCCL_PRIM_RECV_ALL) rmask |= (1u << npeers) - 1;
  // Every thread's slot writes (seen through the barrier) before the counters: a fence at the widest scope any of
  // the step's links needs.
  int all_gpu = 1;
  for (int i = 0; i < DCCL_DEV_CONN_SLOTS; i++) {
    if ((smask >> i) & 1) all_gpu &= t.send[i]->same_gpu;
    if ((rmask >> i) & 1) all_gpu &= t.recv[i]->same_gpu;
  }
  if (all_gpu)
    __threadfence();
  else
    __threadfence_system();
  for (int i = 0; i < DCCL_DEV_CONN_SLOTS; i++) {
    if (!((smask >> i) & 1)) continue;
    dccl_dev_conn *c = t.send[i];
    uint64_t pos = c->pos;
    char *slot = dccl_conn_slot(&c->desc, (char *const *)c->regions, pos);
    dccl_slot_header h = {st.nelem * t.esize, cta->seq[half][DCCL_DEV_CONN_SLOTS + i], kind, 0};
    if (c->same_gpu) { // a kernel reads the header after `tail`: plain stores, ordered by the release below
      *(dccl_slot_header *)(slot + 8) = h;
      *(uint64_t *)slot = dccl_ll_unit(DCCL_SLOT_BULK_MARK, dccl_ll_flag(pos));
    } else {
      dccl_bulk_write_head(slot, pos, &h);
    }
    conn_release(c->same_gpu, dccl_conn_word((char *const *)c->regions, c->desc.tail), pos + 1);
    c->pos = pos + 1;
  }
  for (int i = 0; i < DCCL_DEV_CONN_SLOTS; i++) {
    if (!((rmask >> i) & 1)) continue;
    dccl_dev_conn *c = t.recv[i];
    conn_release(c->same_gpu, dccl_conn_word((char *const *)c->regions, c->desc.head), c->pos + 1);
    c->pos++;
  }
}

template <int TYPE>
__device__ void dev_run_stream(const dccl_dev_work *w, dev_cta *cta, int s, const dev_half &h) {
  const dccl_dev_task &t = cta->task;
  uint32_t kind = t.kind == DCCL_DEV_OP_RECV ? DCCL_DEV_OP_SEND : t.kind;
  __shared__ int go[2];
  for (uint64_t idx = 0; idx < t.nsteps[s]; idx++) {
    dccl_prim_step st;
    dccl_sched_step(&t.sched, s, idx, &st);
    if (h.tid == 0) {
      int ok = 1;
      while (st.wait_up >= 0 && cta->up_done <= (uint64_t)st.wait_up && !cta->stop) {
      }
      ok = !cta->stop && dev_step_acquire(w, cta, s, st, kind);
      go[s] = ok;
    }
    half_barrier(h);
    if (!go[s]) return;
    if (st.nelem > 0) dev_reduce_copy_for<TYPE>(cta->args[s], t.redop.type, t.esize, h.tid, h.nthreads);
    half_barrier(h);
    if (h.tid == 0) {
      dev_step_release(cta, s, st, kind);
      if (s == 0) cta->up_done = idx + 1;
    }
  }
}

template <int TYPE>
__device__ __forceinline__ void dev_kernel_body(const dccl_dev_work *w) {
  __shared__ dev_cta cta;
  int first = w->cta_first[blockIdx.x], ntasks = w->cta_ntasks[blockIdx.x];
  const dccl_dev_task *tasks = w->tasks ? w->tasks : w->inline_tasks;
  for (int k = 0; k < ntasks; k++) {
    // The task into shared memory, a word per thread (from the parameter, or from host memory).
    const uint32_t *src = (const uint32_t *)&tasks[first + k];
    for (unsigned i = threadIdx.x; i < sizeof(dccl_dev_task) / 4; i += blockDim.x) ((uint32_t *)&cta.task)[i] = src[i];
    if (threadIdx.x == 0) {
      cta.up_done = 0;
      cta.stop = 0;
    }
    __syncthreads();
    // Each connection's operation count, the sequence number its slots carry, before any half moves it.
    if (threadIdx.x < 2 * DCCL_DEV_CONN_SLOTS) {
      int i = threadIdx.x;
      dccl_dev_conn *c = i < DCCL_DEV_CONN_SLOTS ? cta.task.recv[i] : cta.task.send[i - DCCL_DEV_CONN_SLOTS];
      cta.seq[0][i] = cta.seq[1][i] = c ? c->nops : 0;
    }
    __syncthreads();
    int two = cta.task.nsteps[1] > 0;
    dev_half h;
    int s = two && threadIdx.x >= blockDim.x / 2;
    h.nthreads = two ? blockDim.x / 2 : blockDim.x;
    h.tid = threadIdx.x - s * h.nthreads;
    h.bar = 1 + s;
    dev_run_stream<TYPE>(w, &cta, s, h);
    __syncthreads();
    if (cta.stop) break;
    if (threadIdx.x < 2 * DCCL_DEV_CONN_SLOTS) {
      int i = threadIdx.x;
      dccl_dev_conn *c = i < DCCL_DEV_CONN_SLOTS ? cta.task.recv[i] : cta.task.send[i - DCCL_DEV_CONN_SLOTS];
      if (c) c->nops = cta.seq[0][i] + 1;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0 && w->done_ctas) {
    __threadfence_system();
    atomicAdd_system(w->done_ctas, 1u);
  }
}

// The kernels: one per element type, and one for groups that mix types. The host finds them by these names. The
// launch comes by value; __grid_constant__ lets the body address it in place instead of copying it per thread.
#define DCCL_DEV_KERNEL(name, type)                                                                  \
  extern "C" __global__ void __launch_bounds__(DCCL_DEV_THREADS, 1) name(const __grid_constant__ dccl_dev_work w) { \
    dev_kernel_body<type>(&w);                                                                       \
  }
DCCL_DEV_KERNEL(dccl_kernel_any, DCCL_DEV_ANY_TYPE)
DCCL_DEV_KERNEL(dccl_kernel_t0, 0)
DCCL_DEV_KERNEL(dccl_kernel_t1, 1)
DCCL_DEV_KERNEL(dccl_kernel_t2, 2)
DCCL_DEV_KERNEL(dccl_kernel_t3, 3)
DCCL_DEV_KERNEL(dccl_kernel_t4, 4)
DCCL_DEV_KERNEL(dccl_kernel_t5, 5)
DCCL_DEV_KERNEL(dccl_kernel_t6, 6)
DCCL_DEV_KERNEL(dccl_kernel_t7, 7)
DCCL_DEV_KERNEL(dccl_kernel_t8, 8)
DCCL_DEV_KERNEL(dccl_kernel_t9, 9)
DCCL_DEV_KERNEL(dccl_kernel_t10, 10)
DCCL_DEV_KERNEL(dccl_kernel_t11, 11)
