/* The device executor's host side (collectives/device/dev_exec.h). A launch's description (struct dccl_dev_work)
 * is the kernel's parameter: the driver copies it at the launch (and into a graph at capture). Only a group with
 * more tasks than the parameter holds puts them in a pinned block the device reads directly; a block is reused once
 * every CTA of its launch has reported its exit, and a launch captured into a CUDA graph keeps its block for good,
 * since every replay reads it again. */
#include "collectives/device/dev_exec.h"

#include <pthread.h>
#include <stddef.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collectives/device/ce_collectives.h"
#include "collectives/device/cta_plan.h"
#include "collectives/device/cta_share.h"
#include "collectives/device/dev_work.h"
#include "collectives/device/kernel_choice.h"
#include "collectives/device/launch_merge.h"
#include "collectives/device/launch_notes.h"
#include "collectives/device/stream_order.h"
#include "util/cuda_api.h"
#include "util/cuda_driver.h"
#include "util/clock.h"
#include "util/cuda_peer_mem.h"
#include "util/error.h"
#include "util/params.h"

extern const unsigned char dccl_kernels_fatbin[];

_Static_assert(sizeof(struct dccl_direct_slot) == 128, "a direct slot is one 128-byte line");
_Static_assert(sizeof(struct dccl_dev_work) <= 4096, "the launch must fit a kernel's parameter");

/* One pinned block holding the tasks of one launch. */
struct work_block {
  struct dccl_dev_task *tasks;
  size_t capacity; /* bytes */
  int captured;    /* part of a CUDA graph: never reused */
  uint32_t ticket; /* idle once *done_ctas reaches it */
  struct work_block *next;
};

struct dccl_dev_comm {
  CUcontext ctx;
  int ranks_in_process; /* ranks of the communicator in this process: more than one may not share a stream */
  CUfunction kernels[DCCL_NKERNELS];
  int ordinal;
  int resident;  /* CTAs the GPU holds at once (of this kernel) */
  int max_ctas;  /* channels a collective may plan: the resident CTAs over the communicator's ranks on the GPU */
  int fixed_ctas; /* DCCL_MAX_CTAS, or 0: each launch takes its share of the GPU (collectives/device/cta_share.h) */
  long share_joined;
  int folded_logged;
  uint32_t *abort_word;            /* pinned, device-visible */
  uint32_t *done_ctas;             /* pinned: CTAs of uncaptured launches that have exited (kernels add, wrapping) */
  uint32_t launched_ctas;          /* CTAs of uncaptured launches so far: the device is idle when the two agree */
  int captured_any;                /* a launch went into a CUDA graph: replays start kernels unannounced */
  struct dccl_stream_order order;  /* its launches' streams, kept in issue order */
  CUevent join_event;              /* a launch shared with other ranks of the process orders its stream by it */
  struct dccl_launch_notes notes;  /* the uncaptured launches, for stall reports */
  struct dccl_dev_status *status;  /* pinned, device-visible */
  void *scratch;                   /* pinned, device-visible: 64 bytes for creation's probe */
  CUdeviceptr ring_orders;         /* device memory: each ring's rank order, read by the schedules every step */
  CUdeviceptr exit_ctas;           /* device memory: the running launch's exited CTAs (dccl_dev_work.exit_ctas) */
  CUdeviceptr board;               /* device memory: this rank's direct slots, one per channel */
  CUdeviceptr boards;              /* device memory: every rank's board address, by rank (0: no direct path), then
                                      the windows' table (DCCL_MAX_WINDOWS rows of struct dccl_win_peer) */
  struct dccl_peer_mem_map *board_maps; /* by rank: the boards of ranks in other processes, mapped here */
  CUdeviceptr ce_region;           /* the copy-engine collectives' (ce_collectives.h): this rank's flags and slots */
  struct dccl_peer_mem_map *ce_maps; /* by rank: the regions of ranks in other processes, mapped here */
  struct dccl_ce *ce;              /* those collectives, once every rank's region is mapped (else NULL) */
  struct work_block *blocks;       /* tasks of groups larger than a launch's parameter holds */
  struct dccl_dev_work launch;     /* the parameter being built (the driver copies it at the launch) */
  struct dccl_cta_plan cta_plan;   /* its tasks' CTAs */
  uint64_t pinned_bytes, device_bytes; /* held by this state (FIFOs are the transports') */
};

/* The kernels, loaded once per device: a module load may synchronise the device, which must not happen while
 * another rank's kernel spins, so it happens at the first communicator's creation. */
#define MAX_DEVICES 64
static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  CUmodule module;
  CUfunction kernels[DCCL_NKERNELS];
  int resident_ctas;
} modules[MAX_DEVICES];

static CUresult get_kernels(CUmodule mod, CUfunction *fns) {
  CUresult r = CUDA_SUCCESS;
  for (int k = 0; k < DCCL_NKERNELS && r == CUDA_SUCCESS; k++) {
    char name[32];
    dccl_kernel_name(k, name, sizeof(name));
    r = dccl_cu.module_get_function(&fns[k], mod, name);
  }
  return r;
}

static ncclResult_t load_kernels(int ordinal, CUfunction *kernels, int *resident) {
  if (ordinal < 0 || ordinal >= MAX_DEVICES) return dccl_error(ncclInvalidUsage, "device %d: too many GPUs", ordinal);
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&modules_lock);
  if (!modules[ordinal].module) {
    CUmodule mod;
    CUfunction fns[DCCL_NKERNELS];
    CUdevice dev;
    int per_sm = 0, sms = 0;
    CUresult r = dccl_cu.module_load_data(&mod, dccl_kernels_fatbin);
    if (r == CUDA_SUCCESS) r = get_kernels(mod, fns);
    /* The generic kernel uses the most of each SM: what it allows, the others allow too. */
    if (r == CUDA_SUCCESS) r = dccl_cu.occupancy(&per_sm, fns[DCCL_KERNEL_ANY], DCCL_DEV_THREADS, 0);
    if (r == CUDA_SUCCESS) r = dccl_cu.device_get(&dev, ordinal);
    if (r == CUDA_SUCCESS) r = dccl_cu.device_get_attribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    if (r != CUDA_SUCCESS) {
      res = dccl_error(ncclUnhandledCudaError, "loading DCCL's kernels on device %d: %s (%d)", ordinal,
                       dccl_cuda_error_text(r), (int)r);
    } else {
      modules[ordinal].module = mod;
      memcpy(modules[ordinal].kernels, fns, sizeof(fns));
      modules[ordinal].resident_ctas = per_sm * sms;
      DCCL_INFO(DCCL_INIT, "device %d: kernels loaded, %d CTAs of %d threads resident (%d SMs)", ordinal,
                per_sm * sms, DCCL_DEV_THREADS, sms);
    }
  }
  memcpy(kernels, modules[ordinal].kernels, sizeof(modules[ordinal].kernels));
  *resident = modules[ordinal].resident_ctas;
  pthread_mutex_unlock(&modules_lock);
  return res;
}

/* The device's context current on this thread (a user thread may have none yet, or another device's). */
static ncclResult_t enter(CUcontext ctx) {
  CUcontext cur = NULL;
  if (dccl_cu.ctx_get_current(&cur) == CUDA_SUCCESS && cur == ctx) return ncclSuccess;
  DCCL_CUCHECK(dccl_cu.ctx_set_current(ctx), "cuCtxSetCurrent");
  return ncclSuccess;
}

/* Pinned memory the device reads. The first launch captured into a graph may need a block: a capture in global mode
 * forbids the allocation on every thread unless this one relaxes it, for the allocation only. */
static ncclResult_t pinned(struct dccl_dev_comm *dev, void *p, size_t bytes) {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  DCCL_CUCHECK(dccl_cu.exchange_capture_mode(&mode), "cuThreadExchangeStreamCaptureMode");
  CUresult r = dccl_cu.mem_host_alloc((void **)p, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  (void)dccl_cu.exchange_capture_mode(&mode);
  DCCL_CUCHECK(r, "cuMemHostAlloc");
  memset(*(void **)p, 0, bytes);
  dev->pinned_bytes += bytes;
  return ncclSuccess;
}

/* The CTAs a launch of this communicator may use now: DCCL_MAX_CTAS, or its share of the GPU. */
static int launch_share(const struct dccl_dev_comm *dev) {
  int share = dev->fixed_ctas ? dev->fixed_ctas : dccl_cta_share(dev->ordinal, dev->resident);
  return share < DCCL_DEV_MAX_CTAS ? share : DCCL_DEV_MAX_CTAS;
}

ncclResult_t dccl_dev_comm_create(struct dccl_coll_comm *comm, void *cu_ctx, int ordinal, int ranks_on_gpu) {
  DCCLCHECK(dccl_cuda_api_load());
  struct dccl_dev_comm *dev = calloc(1, sizeof(*dev));
  if (!dev) return dccl_error(ncclSystemError, "out of memory");
  comm->dev = dev;
  dccl_launch_notes_init(&dev->notes);
  dev->ctx = (CUcontext)cu_ctx;
  DCCLCHECK(enter(dev->ctx));
  dev->ordinal = ordinal;
  DCCLCHECK(load_kernels(ordinal, dev->kernels, &dev->resident));
  /* No CTA may wait for one that cannot be resident: the ranks on this GPU share its capacity, and so do the
   * communicators whose kernels may run at once, counted at each launch (cta_share.h). */
  if (ranks_on_gpu < 1) ranks_on_gpu = 1;
  dev->max_ctas = dev->resident / ranks_on_gpu;
  int64_t cap = dccl_param_int(DCCL_PARAM_MAX_CTAS);
  dev->fixed_ctas = cap > 0 ? (int)(cap < DCCL_DEV_MAX_CTAS ? cap : DCCL_DEV_MAX_CTAS) : 0;
  if (dev->fixed_ctas && dev->fixed_ctas < dev->max_ctas) dev->max_ctas = dev->fixed_ctas;
  if (dev->max_ctas > DCCL_DEV_MAX_CTAS) dev->max_ctas = DCCL_DEV_MAX_CTAS;
  if (dev->max_ctas < 1)
    return dccl_error(ncclInvalidUsage, "device %d: %d ranks cannot share its %d resident CTAs", ordinal,
                      ranks_on_gpu, dev->resident);
  int local_on_gpu = 0;
  const struct dccl_peer_info *me = &comm->peers[comm->rank];
  for (int r = 0; r < comm->nranks; r++) {
    int here = comm->peers[r].pid == me->pid && comm->peers[r].real_host_hash == me->real_host_hash;
    dev->ranks_in_process += here;
    local_on_gpu += here && !memcmp(comm->peers[r].device_uuid, me->device_uuid, sizeof(me->device_uuid));
  }
  dev->share_joined = dccl_cta_share_join(ordinal, ranks_on_gpu, local_on_gpu);
  /* Every rank must plan the same channels (they name links): creation takes the fewest any rank can run. */
  if (comm->dev_nchannels > dev->max_ctas) comm->dev_nchannels = dev->max_ctas;
  DCCL_INFO(DCCL_INIT, "device %d: %d CTAs resident, %d ranks of the communicator on one GPU: at most %d channels; "
            "rank kernels that may run at once on the GPU: %.0f, a launch's share %d CTAs",
            ordinal, dev->resident, ranks_on_gpu, dev->max_ctas, dccl_cta_share_load(ordinal), launch_share(dev));
  DCCL_CUCHECK(dccl_cu.event_create(&dev->order.event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  DCCL_CUCHECK(dccl_cu.event_create(&dev->join_event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  DCCLCHECK(pinned(dev, &dev->abort_word, sizeof(uint32_t)));
  DCCLCHECK(pinned(dev, &dev->done_ctas, sizeof(uint32_t)));
  DCCLCHECK(pinned(dev, &dev->status, sizeof(struct dccl_dev_status)));
  DCCLCHECK(pinned(dev, &dev->scratch, 64));
  size_t order_bytes = (size_t)DCCL_MAX_CHANNELS * comm->nranks * sizeof(int);
  int *orders = calloc(1, order_bytes);
  if (!orders) return dccl_error(ncclSystemError, "out of memory");
  for (int c = 0; c < DCCL_MAX_CHANNELS; c++)
    if (comm->rings[c].order) memcpy(orders + (size_t)c * comm->nranks, comm->rings[c].order, comm->nranks * sizeof(int));
  CUresult r = dccl_cu.mem_alloc(&dev->ring_orders, order_bytes);
  if (r == CUDA_SUCCESS) r = dccl_cu.memcpy_htod(dev->ring_orders, orders, order_bytes);
  free(orders);
  DCCL_CUCHECK(r, "cuMemAlloc/cuMemcpyHtoD of the rings' orders");
  dev->device_bytes += order_bytes;
  DCCL_CUCHECK(dccl_cu.mem_alloc(&dev->exit_ctas, sizeof(uint32_t)), "cuMemAlloc of the launches' exit count");
  DCCL_CUCHECK(dccl_cu.memset_d8(dev->exit_ctas, 0, sizeof(uint32_t)), "clearing the launches' exit count");
  dev->device_bytes += sizeof(uint32_t);
  size_t board_bytes = (size_t)DCCL_MAX_CHANNELS * sizeof(struct dccl_direct_slot);
  DCCL_CUCHECK(dccl_cu.mem_alloc(&dev->board, board_bytes), "cuMemAlloc of the direct board");
  DCCL_CUCHECK(dccl_cu.memset_d8(dev->board, 0, board_bytes), "clearing the direct board");
  dev->device_bytes += board_bytes;
  return ncclSuccess;
}

ncclResult_t dccl_dev_comm_board_export(const struct dccl_coll_comm *comm, struct dccl_peer_mem_export *e) {
  memset(e, 0, sizeof(*e));
  if (!comm->dev) return ncclSuccess;
  DCCLCHECK(enter(comm->dev->ctx));
  int fd = -1;
  DCCLCHECK(dccl_peer_mem_export((void *)(uintptr_t)comm->dev->board, 1, e, &fd));
  if (fd >= 0) close(fd); /* cuMemAlloc memory: a legacy handle, never a descriptor */
  return ncclSuccess;
}

ncclResult_t dccl_dev_comm_set_boards(struct dccl_coll_comm *comm, const struct dccl_peer_mem_export *exports,
                                      const int32_t *pids) {
  struct dccl_dev_comm *dev = comm->dev;
  int n = comm->nranks, own_process = 1;
  DCCLCHECK(enter(dev->ctx));
  uint64_t *boards = calloc((size_t)n, sizeof(uint64_t));
  dev->board_maps = calloc((size_t)n, sizeof(*dev->board_maps));
  if (!boards || !dev->board_maps) {
    free(boards);
    return dccl_error(ncclSystemError, "out of memory");
  }
  ncclResult_t res = ncclSuccess;
  for (int r = 0; r < n && res == ncclSuccess; r++) {
    if (pids[r] == (int32_t)getpid()) { /* the address is ours too */
      boards[r] = exports[r].base;
      continue;
    }
    own_process = 0;
    res = dccl_peer_mem_import(&exports[r], -1, dev->ordinal, &dev->board_maps[r]);
    boards[r] = dev->board_maps[r].base;
  }
  /* The boards' addresses, then the windows' table (struct dccl_win_peer), empty until windows are registered. */
  size_t bytes = (size_t)n * sizeof(uint64_t) + (size_t)DCCL_MAX_WINDOWS * n * sizeof(struct dccl_win_peer);
  if (res == ncclSuccess && (res = dccl_cu_result(dccl_cu.mem_alloc(&dev->boards, bytes), "cuMemAlloc of the direct "
                                                  "boards' table")) == ncclSuccess) {
    dev->device_bytes += bytes;
    res = dccl_cu_result(dccl_cu.memset_d8(dev->boards, 0, bytes), "clearing the direct boards' table");
    if (res == ncclSuccess)
      res = dccl_cu_result(dccl_cu.memcpy_htod(dev->boards, boards, (size_t)n * sizeof(uint64_t)),
                           "writing the direct boards' table");
  }
  free(boards);
  if (res == ncclSuccess) comm->direct_ok = own_process ? DCCL_DIRECT_ONE_PROCESS : DCCL_DIRECT_WINDOWS;
  return res;
}

int dccl_dev_ce_possible(const struct dccl_coll_comm *comm) {
  const struct dccl_dev_comm *dev = comm->dev;
  if (!dev || comm->nranks < 2 || comm->nranks > DCCL_CE_MAX_RANKS || dev->ranks_in_process == comm->nranks)
    return 0;
  const struct dccl_peer_info *me = &comm->peers[comm->rank];
  for (int r = 0; r < comm->nranks; r++) {
    if (comm->peers[r].real_host_hash != me->real_host_hash ||
        memcmp(comm->peers[r].device_uuid, me->device_uuid, sizeof(me->device_uuid)))
      return 0;
    /* One rank per process: streams of one process waiting on each other's flags may share a hardware queue
     * (docs/gpu.md: such an echo under MPS never finished). */
    for (int q = 0; q < r; q++)
      if (comm->peers[q].pid == comm->peers[r].pid) return 0;
  }
  return 1;
}

size_t dccl_dev_ce_chunk(void) { return dccl_ce_chunk(); }

ncclResult_t dccl_dev_ce_export(struct dccl_coll_comm *comm, size_t chunk, int p2p, struct dccl_peer_mem_export *e) {
  struct dccl_dev_comm *dev = comm->dev;
  memset(e, 0, sizeof(*e));
  DCCLCHECK(enter(dev->ctx));
  size_t bytes = dccl_ce_region_bytes(comm->nranks, chunk, p2p);
  DCCL_CUCHECK(dccl_cu.mem_alloc(&dev->ce_region, bytes), "cuMemAlloc of the copy-engine collectives' region");
  dev->device_bytes += bytes;
  DCCL_CUCHECK(dccl_cu.memset_d8(dev->ce_region, 0, bytes), "clearing the copy-engine collectives' flags");
  int fd = -1;
  DCCLCHECK(dccl_peer_mem_export((void *)(uintptr_t)dev->ce_region, 1, e, &fd));
  if (fd >= 0) close(fd); /* cuMemAlloc memory: a legacy handle, never a descriptor */
  return ncclSuccess;
}

ncclResult_t dccl_dev_ce_connect(struct dccl_coll_comm *comm, size_t chunk, int p2p,
                                 const struct dccl_peer_mem_export *exports, const int32_t *pids) {
  struct dccl_dev_comm *dev = comm->dev;
  int n = comm->nranks;
  DCCLCHECK(enter(dev->ctx));
  uint64_t regions[DCCL_CE_MAX_RANKS] = {0};
  dev->ce_maps = calloc((size_t)n, sizeof(*dev->ce_maps));
  if (!dev->ce_maps) return dccl_error(ncclSystemError, "out of memory");
  for (int r = 0; r < n; r++) {
    if (r == comm->rank || pids[r] == (int32_t)getpid()) { /* the address is ours too */
      regions[r] = r == comm->rank ? dev->ce_region : exports[r].base;
      continue;
    }
    DCCLCHECK(dccl_peer_mem_import(&exports[r], -1, dev->ordinal, &dev->ce_maps[r]));
    regions[r] = dev->ce_maps[r].base;
  }
  DCCLCHECK(dccl_ce_create(comm->rank, n, chunk, p2p, dev->ce_region, regions, &dev->ce));
  DCCL_INFO(DCCL_INIT, "rank %d: device collectives%s by copy engines: %d ranks in processes of their own on one GPU, "
            "pieces of %zu bytes, %zu bytes of GPU memory", comm->rank, p2p ? " and send/recv" : "", n, chunk,
            dccl_ce_region_bytes(n, chunk, p2p));
  return ncclSuccess;
}

/* Written on a stream of its own that does not wait for the legacy stream, so no kernel of the user's (which may
 * spin, waiting for a peer that is itself registering) delays it. The row's entries are not in use yet. */
ncclResult_t dccl_dev_comm_set_window(struct dccl_coll_comm *comm, int index, const struct dccl_win_peer *row) {
  struct dccl_dev_comm *dev = comm->dev;
  if (!dev || !dev->boards) return dccl_error(ncclInternalError, "no direct boards for a window");
  DCCLCHECK(enter(dev->ctx));
  size_t bytes = (size_t)comm->nranks * sizeof(*row);
  CUdeviceptr at = dev->boards + (size_t)comm->nranks * sizeof(uint64_t) + (size_t)index * bytes;
  CUstream s;
  DCCL_CUCHECK(dccl_cu.stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  CUresult r = dccl_cu.memcpy_htod_async(at, row, bytes, s);
  if (r == CUDA_SUCCESS) r = dccl_cu.stream_synchronize(s);
  dccl_cu.stream_destroy(s);
  DCCL_CUCHECK(r, "writing a window's row of the direct table");
  return ncclSuccess;
}

void dccl_dev_comm_memory(const struct dccl_coll_comm *comm, uint64_t *device_bytes, uint64_t *pinned_bytes) {
  *device_bytes = comm->dev ? comm->dev->device_bytes : 0;
  *pinned_bytes = comm->dev ? comm->dev->pinned_bytes : 0;
}

/* CTAs of uncaptured launches not seen exiting yet, counted on 32 bits that wrap. The count assumes a
 * communicator's kernels run in launch order, as their shared links require anyway. */
static uint32_t ctas_running(const struct dccl_dev_comm *dev) {
  return __atomic_load_n(&dev->launched_ctas, __ATOMIC_RELAXED) - __atomic_load_n(dev->done_ctas, __ATOMIC_ACQUIRE);
}

static int block_idle(const struct dccl_dev_comm *dev, const struct work_block *b) {
  return !b->captured && (int32_t)(__atomic_load_n(dev->done_ctas, __ATOMIC_ACQUIRE) - b->ticket) >= 0;
}

int dccl_dev_comm_captured(const struct dccl_coll_comm *comm) {
  return comm->dev && comm->dev->captured_any;
}

int dccl_dev_comm_busy(struct dccl_coll_comm *comm) {
  return comm->dev && ctas_running(comm->dev) != 0;
}

int dccl_dev_comm_stalled(struct dccl_coll_comm *comm, struct dccl_slot_header *call, int64_t *idle_ns) {
  struct dccl_dev_comm *dev = comm->dev;
  return dev && dccl_launch_notes_stalled(&dev->notes, __atomic_load_n(dev->done_ctas, __ATOMIC_ACQUIRE),
                                          dccl_now_ns(), call, idle_ns);
}

void dccl_dev_comm_abort(struct dccl_coll_comm *comm) {
  if (comm->dev && comm->dev->abort_word) __atomic_store_n(comm->dev->abort_word, 1u, __ATOMIC_RELEASE);
  if (comm->dev && comm->dev->ce) { /* streams blocked in its waits go on (their results no longer matter) */
    CUcontext caller = NULL;
    (void)dccl_cu.ctx_get_current(&caller);
    if (enter(comm->dev->ctx) == ncclSuccess) dccl_ce_release(comm->dev->ce);
    if (caller && caller != comm->dev->ctx) (void)dccl_cu.ctx_set_current(caller);
  }
}

int dccl_dev_ce_on(const struct dccl_coll_comm *comm) { return comm->dev && comm->dev->ce; }

int dccl_dev_ce_takes(const struct dccl_coll_comm *comm, const struct dccl_op *op) {
  return comm->dev && comm->dev->ce && dccl_ce_runs(comm->dev->ce, op->kind) && op->count > 0 &&
         (!op->redop.has_pre || op->redop.called == ncclAvg) && !op->redop.pre_dev &&
         !dccl_cuda_stream_capturing(op->stream);
}

void dccl_dev_comm_free(struct dccl_coll_comm *comm) {
  struct dccl_dev_comm *dev = comm->dev;
  if (!dev) return;
  /* Kernels still queued read the work and the abort word: wait for them (an aborted one exits soon). */
  while (dccl_dev_comm_busy(comm)) sched_yield();
  (void)enter(dev->ctx);
  dccl_cta_share_leave(dev->ordinal, dev->share_joined);
  while (dev->blocks) {
    struct work_block *b = dev->blocks;
    dev->blocks = b->next;
    dccl_cu.mem_free_host(b->tasks);
    free(b);
  }
  if (dev->order.event) dccl_cu.event_destroy(dev->order.event);
  if (dev->join_event) dccl_cu.event_destroy(dev->join_event);
  if (dev->abort_word) dccl_cu.mem_free_host(dev->abort_word);
  if (dev->done_ctas) dccl_cu.mem_free_host(dev->done_ctas);
  if (dev->status) dccl_cu.mem_free_host(dev->status);
  if (dev->scratch) dccl_cu.mem_free_host(dev->scratch);
  if (dev->ring_orders) dccl_cu.mem_free(dev->ring_orders);
  if (dev->exit_ctas) dccl_cu.mem_free(dev->exit_ctas);
  dccl_ce_free(dev->ce);
  if (dev->ce_region) dccl_cu.mem_free(dev->ce_region);
  for (int r = 0; dev->ce_maps && r < comm->nranks; r++) dccl_peer_mem_close(&dev->ce_maps[r]);
  free(dev->ce_maps);
  if (dev->board) dccl_cu.mem_free(dev->board);
  if (dev->boards) dccl_cu.mem_free(dev->boards);
  for (int r = 0; dev->board_maps && r < comm->nranks; r++) dccl_peer_mem_close(&dev->board_maps[r]);
  free(dev->board_maps);
  comm->direct_ok = 0;
  dccl_launch_notes_destroy(&dev->notes);
  free(dev);
  comm->dev = NULL;
}

ncclResult_t dccl_dev_comm_error(struct dccl_coll_comm *comm, char *text, size_t len) {
  if (!comm->dev) return ncclSuccess;
  const volatile struct dccl_dev_status *s = comm->dev->status;
  uint32_t error = __atomic_load_n(&comm->dev->status->error, __ATOMIC_ACQUIRE);
  switch (error) {
    case DCCL_DEV_OK:
    case DCCL_DEV_RECORDING: /* its details are being written: read again later */
      return ncclSuccess;
    case DCCL_DEV_MISMATCH: {
      struct dccl_slot_header want = s->want, got = s->got;
      dccl_describe_device_mismatch(&want, &got, s->peer, comm->rank, text, len);
      return ncclInvalidUsage;
    }
    case DCCL_DEV_PEER_ABORTED:
      snprintf(text, len, "rank %d gave up on its device link with rank %d", s->peer, comm->rank);
      return ncclRemoteError;
    default:
      snprintf(text, len, "a kernel of rank %d stopped: the communicator was aborted", comm->rank);
      return ncclRemoteError;
  }
}

/* A pinned block with room for `bytes` that no kernel reads any more. */
static ncclResult_t get_block(struct dccl_dev_comm *dev, size_t bytes, struct work_block **out) {
  for (struct work_block *b = dev->blocks; b; b = b->next)
    if (b->capacity >= bytes && block_idle(dev, b)) {
      *out = b;
      return ncclSuccess;
    }
  struct work_block *b = calloc(1, sizeof(*b));
  if (!b) return dccl_error(ncclSystemError, "out of memory");
  size_t cap = bytes < 16384 ? 16384 : bytes;
  ncclResult_t res = pinned(dev, &b->tasks, cap);
  if (res != ncclSuccess) {
    free(b);
    return res;
  }
  b->capacity = cap;
  b->next = dev->blocks;
  dev->blocks = b;
  *out = b;
  return ncclSuccess;
}

struct dccl_dev_redop dccl_dev_redop_of(const struct dccl_redop *r) {
  struct dccl_dev_redop d;
  memset(&d, 0, sizeof(d));
  d.type = (uint32_t)r->type;
  d.kind = (uint32_t)r->kind;
  d.has_pre = (uint32_t)r->has_pre;
  d.post_div = (uint32_t)r->post_div;
  memcpy(&d.pre, r->pre, sizeof(d.pre));
  d.pre_ptr = (uint64_t)(uintptr_t)r->pre_dev;
  return d;
}

static void fill_task(struct dccl_dev_comm *dev, struct dccl_coll_comm *comm, const struct dccl_op *op, int c,
                      struct dccl_dev_task *t) {
  const struct dccl_op_channel *ch = &op->ch[c];
  memset(t, 0, sizeof(*t));
  t->sched = ch->sched;
  /* The ring order, as the device sees it. */
  if (ch->sched.ring_rank) t->sched.ring_rank = (int *)(uintptr_t)dev->ring_orders + (size_t)c * comm->nranks;
  for (int i = 0; i < DCCL_DEV_CONN_SLOTS; i++) {
    t->recv[i] = ch->recv[i] ? (struct dccl_dev_conn *)ch->recv[i]->dev : NULL;
    t->send[i] = ch->send[i] ? (struct dccl_dev_conn *)ch->send[i]->dev : NULL;
  }
  t->nsteps[0] = ch->nsteps[0];
  t->nsteps[1] = ch->nsteps[1];
  t->sendbuff = op->sendbuff;
  t->recvbuff = op->recvbuff;
  t->redop = dccl_dev_redop_of(&op->redop);
  t->esize = (uint32_t)op->esize;
  t->kind = (uint32_t)op->kind;
  t->rank = comm->rank;
  t->proto = (uint32_t)op->proto;
  t->channel = (uint32_t)c;
  t->direct_op = op->kind == DCCL_OP_REDUCESCATTER ? DCCL_DIRECT_OP_REDUCESCATTER
                  : op->kind == DCCL_OP_ALLGATHER   ? DCCL_DIRECT_OP_ALLGATHER
                  : op->kind == DCCL_OP_BROADCAST   ? DCCL_DIRECT_OP_BROADCAST
                  : op->kind == DCCL_OP_REDUCE      ? DCCL_DIRECT_OP_REDUCE
                                                    : DCCL_DIRECT_OP_ALLREDUCE;
  t->send_win = (int16_t)(op->send_win >= 0 ? op->send_win : -1); /* unused buffers are never read */
  t->recv_win = (int16_t)(op->recv_win >= 0 ? op->recv_win : -1);
  t->boards = (struct dccl_direct_slot *const *)(uintptr_t)dev->boards;
  t->call = dccl_op_call_header(op);
}

/* Counts each CTA's tasks, then places them CTA by CTA in issue order. */
static void place_tasks(struct dccl_dev_comm *dev, struct dccl_coll_comm *comm, const struct dccl_op *list,
                        const struct dccl_cta_plan *plan, struct dccl_dev_work *w, struct dccl_dev_task *tasks) {
  for (int t = 0; t < plan->ntasks; t++) w->cta_ntasks[plan->cta[t]]++;
  int next = 0;
  for (int k = 0; k < plan->nctas; k++) {
    w->cta_first[k] = (uint16_t)next;
    next += w->cta_ntasks[k];
    w->cta_ntasks[k] = 0;
  }
  int t = 0;
  for (const struct dccl_op *op = list; op; op = op->next) {
    if (op->comm != comm || !op->on_device || op->finished) continue;
    for (int c = 0; c < op->nchannels; c++) {
      if (op->ch[c].nsteps[0] + op->ch[c].nsteps[1] == 0) continue;
      int cta = plan->cta[t++];
      fill_task(dev, comm, op, c, &tasks[w->cta_first[cta] + w->cta_ntasks[cta]++]);
    }
  }
}

/* The direct operation that `comm`'s launch runs alone, each channel on a CTA of its own (none folded), or NULL. Its
 * channels differ only by number, so they run as one task (struct dccl_dev_task, cta0 and ctas): past 8 channels
 * each had its own, too many for the parameter, and every CTA read its task from host memory (1.4 us more of each
 * 4 ranks' all-reduce of 4-64 MiB, the task stage's time; docs/performance.md). */
static const struct dccl_op *direct_alone(const struct dccl_op *list, const struct dccl_coll_comm *comm,
                                          const struct dccl_cta_plan *plan) {
  const struct dccl_op *alone = NULL;
  for (const struct dccl_op *op = list; op; op = op->next) {
    if (op->comm != comm || !op->on_device || op->finished) continue;
    if (alone) return NULL;
    alone = op;
  }
  if (!alone || alone->nchannels < 2 || alone->ch[0].sched.algo != DCCL_SCHED_DIRECT) return NULL;
  if (plan->ntasks != alone->nchannels || plan->fold < alone->nchannels) return NULL;
  return alone;
}

static int is_p2p(const struct dccl_op *op) {
  return op->kind == DCCL_OP_SEND || op->kind == DCCL_OP_RECV;
}
/* One rank: an operation that only copies its input goes to the copy engine (in place, nothing at all). */
static ncclResult_t single_rank_copies(struct dccl_coll_comm *comm, struct dccl_op *list, void *stream) {
  for (struct dccl_op *op = list; op; op = op->next) {
    if (op->comm != comm || !op->on_device || op->finished || op->redop.has_pre || op->redop.post_div > 1) continue;
    if (op->count && op->sendbuff != op->recvbuff)
      DCCLCHECK(dccl_dev_copy(comm, op->recvbuff, op->sendbuff, op->count * op->esize, stream));
    op->finished = 1;
  }
  return ncclSuccess;
}

/* An uncaptured launch's CTAs are counted, and the launch noted for stall reports under the call `first`. */
static void count_launch(struct dccl_dev_comm *dev, const struct dccl_op *first, int nctas) {
  __atomic_add_fetch(&dev->launched_ctas, (uint32_t)nctas, __ATOMIC_RELAXED); /* the pump reads it */
  struct dccl_slot_header call = dccl_op_call(first);
  call.kind = (uint32_t)first->kind; /* as the host's waits note it */
  dccl_launch_notes_add(&dev->notes, dev->launched_ctas, dccl_now_ns(), &call);
}

/* The kernel part of a copy-engine collective's round (ce_collectives.h): CTAs for 256 KiB each, up to the GPU's
 * resident ones (the part never waits, so it need not share them). */
struct ce_launch {
  struct dccl_dev_comm *dev;
  const struct dccl_op *op;
};
static ncclResult_t ce_launch(void *arg, const struct dccl_ce_work *cw, CUstream stream) {
  struct ce_launch *l = arg;
  struct dccl_dev_comm *dev = l->dev;
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < (cw->mode == DCCL_CE_REDUCE ? 1 : cw->n); i++)
    bytes += cw->mode == DCCL_CE_REDUCE ? cw->count[0] * cw->esize : cw->count[i];
  uint64_t want = (bytes + (256 << 10) - 1) >> 18;
  int cap = dev->resident < DCCL_DEV_MAX_CTAS ? dev->resident : DCCL_DEV_MAX_CTAS;
  int nctas = want < 1 ? 1 : want > (uint64_t)cap ? cap : (int)want;
  struct dccl_dev_work *w = &dev->launch;
  memset(w, 0, offsetof(struct dccl_dev_work, inline_tasks));
  w->rank[0].abort_flag = dev->abort_word;
  w->rank[0].status = dev->status;
  w->rank[0].done_ctas = dev->done_ctas;
  w->nctas = (uint32_t)nctas;
  w->ce = *cw;
  void *args[] = {w};
  int type = (int)l->op->type;
  CUfunction kernel = dev->kernels[dccl_kernel_generic(type)];
  DCCL_CUCHECK(dccl_cu.launch_kernel(kernel, (unsigned)nctas, 1, 1, DCCL_DEV_THREADS, 1, 1, 0, stream, args, NULL),
               "launching DCCL's kernel (copy engines)");
  count_launch(dev, l->op, nctas);
  return ncclSuccess;
}

/* The list's copy-engine collectives of this communicator, queued in issue order before its kernel's tasks, then
 * its copy-engine sends and receives together (their chunks interleave: dccl_ce_p2p). */
static ncclResult_t ce_ops(struct dccl_coll_comm *comm, struct dccl_op *list, void *stream) {
  int np2p = 0;
  for (struct dccl_op *op = list; op; op = op->next) {
    if (op->comm != comm || !op->on_device || op->finished || op->algo != DCCL_ALGO_CE) continue;
    if (is_p2p(op)) {
      np2p++;
      continue;
    }
    struct ce_launch l = {comm->dev, op};
    DCCLCHECK(dccl_ce_collective(comm->dev->ce, op, (CUstream)stream, ce_launch, &l));
    op->finished = 1;
  }
  if (np2p == 0) return ncclSuccess;
  struct dccl_op **ops = malloc((size_t)np2p * sizeof(*ops));
  if (!ops) return dccl_error(ncclSystemError, "out of memory");
  int n = 0;
  for (struct dccl_op *op = list; op; op = op->next)
    if (op->comm == comm && op->on_device && !op->finished && op->algo == DCCL_ALGO_CE && is_p2p(op)) ops[n++] = op;
  struct ce_launch l = {comm->dev, ops[0]};
  ncclResult_t res = dccl_ce_p2p(comm->dev->ce, ops, n, (CUstream)stream, ce_launch, &l);
  for (int i = 0; i < n; i++) ops[i]->finished = 1;
  free(ops);
  return res;
}

/* A launch built and not yet made (prepare, then submit or dccl_dev_launch_ranks). */
struct prepared {
  int kernel;                   /* index into dev->kernels; -1: nothing to launch */
  int captured;
  const struct dccl_op *first;  /* what a stall report names */
  struct work_block *block;     /* the tasks' pinned block, or NULL: inline */
};

/* Everything of `comm`'s launch of `list` on `stream` but the launch itself: the work is in dev->launch. */
static ncclResult_t prepare(struct dccl_coll_comm *comm, struct dccl_op *list, void *stream, struct prepared *p) {
  struct dccl_dev_comm *dev = comm->dev;
  p->kernel = -1;
  if (!dev) return dccl_error(ncclInvalidUsage, "device buffers: rank %d's communicator has no CUDA device", comm->rank);
  DCCLCHECK(enter(dev->ctx));
  /* The legacy default stream orders every kernel of the process after the last: two ranks' kernels there would run
   * one after the other, the first waiting for the second forever. */
  if ((stream == NULL || stream == CU_STREAM_LEGACY) && dev->ranks_in_process > 1)
    return dccl_error(ncclInvalidUsage,
                      "rank %d: %d ranks of this communicator live in this process and this call uses the legacy "
                      "default stream (stream NULL): their kernels would run one after the other and the first would "
                      "wait for the second forever. Give each rank a stream of its own (cudaStreamCreateWithFlags "
                      "with cudaStreamNonBlocking)",
                      comm->rank, dev->ranks_in_process);
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  DCCL_CUCHECK(dccl_cu.stream_is_capturing((CUstream)stream, &capture), "cuStreamIsCapturing");
  int captured = capture != CU_STREAM_CAPTURE_STATUS_NONE;
  DCCLCHECK(dccl_stream_order(&dev->order, (CUstream)stream, captured, ctas_running(dev)));
  if (comm->nranks == 1) DCCLCHECK(single_rank_copies(comm, list, stream));
  if (dev->ce) DCCLCHECK(ce_ops(comm, list, stream));
  int type = -1;
  for (const struct dccl_op *op = list; op; op = op->next)
    if (op->comm == comm && op->on_device && !op->finished)
      type = type == -1 || type == (int)op->type ? (int)op->type : DCCL_KERNEL_ANY; /* a mix */
  struct dccl_cta_plan *plan = &dev->cta_plan;
  DCCLCHECK(dccl_cta_plan(plan, list, comm, launch_share(dev)));
  const struct dccl_op *alone = direct_alone(list, comm, plan);
  int ntasks = alone ? 1 : plan->ntasks;
  if (ntasks == 0) return ncclSuccess;
  if (plan->fold < plan->ncoll && !dev->folded_logged) {
    dev->folded_logged = 1;
    DCCL_INFO(DCCL_COLL, "rank %d: %d channels run on %d CTAs: %.0f rank kernels may run at once on device %d, "
              "sharing its %d resident CTAs", comm->rank, plan->ncoll, plan->fold, dccl_cta_share_load(dev->ordinal),
              dev->ordinal, dev->resident);
  }
  dev->captured_any |= captured;
  p->first = NULL;
  for (const struct dccl_op *op = list; op && !p->first; op = op->next)
    if (op->comm == comm && op->on_device && !op->finished) p->first = op;
  struct work_block *b = NULL;
  if (ntasks > DCCL_DEV_INLINE_TASKS) DCCLCHECK(get_block(dev, (size_t)ntasks * sizeof(struct dccl_dev_task), &b));
  struct dccl_dev_work *w = &dev->launch;
  memset(w, 0, offsetof(struct dccl_dev_work, inline_tasks));
  w->rank[0].abort_flag = dev->abort_word;
  w->rank[0].status = dev->status;
  w->rank[0].done_ctas = captured ? NULL : dev->done_ctas;
  w->exit_ctas = captured ? NULL : (uint32_t *)(uintptr_t)dev->exit_ctas;
  w->tasks = b ? b->tasks : NULL;
  struct dccl_dev_task *tasks = b ? b->tasks : w->inline_tasks;
  int nctas = plan->nctas;
  if (alone) {
    for (int k = 0; k < nctas; k++) w->cta_ntasks[k] = 1; /* every CTA's first task is tasks[0] */
    fill_task(dev, comm, alone, 0, &tasks[0]);
    tasks[0].ctas = (uint8_t)nctas;
  } else {
    place_tasks(dev, comm, list, plan, w, tasks);
  }
  w->ntasks = (uint32_t)ntasks;
  w->nctas = (uint32_t)nctas;
  w->rank[0].ctas = (uint32_t)nctas;
  p->captured = captured;
  p->block = b;
  p->kernel = dccl_kernel_for(type, tasks, ntasks);
  return ncclSuccess;
}

/* After the launch of `comm`'s prepared work: its CTAs counted, its block's reuse tied to their exit. */
static void launched(struct dccl_dev_comm *dev, const struct prepared *p, int nctas) {
  if (!p->captured) count_launch(dev, p->first, nctas);
  if (p->block) {
    p->block->captured = p->captured;
    p->block->ticket = dev->launched_ctas;
  }
}

/* A launch of fewer CTAs counts each one's exit on the host itself: the device count's extra round trip cost 1 and 2
 * CTAs 0.3-1.2 us, and saved a launch of 8 a rank 6 us (H100, docs/performance.md). */
#define DCCL_DEV_EXIT_COUNT_CTAS 4

/* Launches `w` by kernel `k` of `dev`, or by its type's tiny kernel where that may run it (one warp a CTA). */
static ncclResult_t launch_work(const struct dccl_dev_comm *dev, int k, struct dccl_dev_work *w, CUstream stream) {
  if (w->nctas < DCCL_DEV_EXIT_COUNT_CTAS) w->exit_ctas = NULL;
  if (dccl_param_int(DCCL_PARAM_DEV_TINY)) k = dccl_kernel_tiny(k, w);
  unsigned threads = k >= DCCL_KERNEL_TINY(0) ? DCCL_DEV_TINY_THREADS : DCCL_DEV_THREADS;
  struct dccl_dev_slim_work slim;
  void *args[] = {w};
  if (k >= DCCL_KERNEL_SLIM(0)) {
    dccl_dev_slim_of(w, &slim);
    args[0] = &slim;
  }
  __atomic_thread_fence(__ATOMIC_RELEASE);
  DCCL_CUCHECK(dccl_cu.launch_kernel(dev->kernels[k], w->nctas, 1, 1, threads, 1, 1, 0, stream, args, NULL),
               "launching DCCL's kernel");
  return ncclSuccess;
}

static ncclResult_t submit(struct dccl_coll_comm *comm, const struct prepared *p, void *stream) {
  if (p->kernel < 0) return ncclSuccess;
  struct dccl_dev_comm *dev = comm->dev;
  DCCLCHECK(launch_work(dev, p->kernel, &dev->launch, (CUstream)stream));
  launched(dev, p, (int)dev->launch.nctas);
  return ncclSuccess;
}

ncclResult_t dccl_dev_launch(struct dccl_coll_comm *comm, struct dccl_op *list, void *stream) {
  struct prepared p;
  DCCLCHECK(prepare(comm, list, stream, &p));
  return submit(comm, &p, stream);
}

/* Whether the ranks' launches may become one (launch_merge.h): all of this process, on one GPU (one context), more
 * than one rank each, none on the copy engines, the setting on. */
static int may_share(struct dccl_coll_comm *const *comms, int n) {
  if (n < 2 || n > DCCL_DEV_LAUNCH_RANKS || !dccl_param_int(DCCL_PARAM_DEV_SHARED_LAUNCH)) return 0;
  for (int i = 0; i < n; i++) {
    const struct dccl_dev_comm *dev = comms[i]->dev;
    if (!dev || dev->ce || comms[i]->nranks == 1 || dev->ctx != comms[0]->dev->ctx) return 0;
  }
  return 1;
}

/* One launch on streams[0] for the merged work: every other stream's queued work before it, and its work after
 * it, through events (a stream shared with streams[0] needs none). */
static ncclResult_t launch_shared(struct dccl_coll_comm *const *comms, void *const *streams, int n, int kernel,
                                  struct dccl_dev_work *w) {
  CUstream first = (CUstream)streams[0];
  for (int i = 1; i < n; i++) {
    if (streams[i] == streams[0]) continue;
    DCCL_CUCHECK(dccl_cu.event_record(comms[i]->dev->join_event, (CUstream)streams[i]), "cuEventRecord");
    DCCL_CUCHECK(dccl_cu.stream_wait_event(first, comms[i]->dev->join_event, 0), "cuStreamWaitEvent");
  }
  DCCLCHECK(launch_work(comms[0]->dev, kernel, w, first));
  int recorded = 0;
  for (int i = 1; i < n; i++) {
    if (streams[i] == streams[0]) continue;
    if (!recorded++) DCCL_CUCHECK(dccl_cu.event_record(comms[0]->dev->join_event, first), "cuEventRecord");
    DCCL_CUCHECK(dccl_cu.stream_wait_event((CUstream)streams[i], comms[0]->dev->join_event, 0), "cuStreamWaitEvent");
  }
  return ncclSuccess;
}

/* Two ranks of one communicator on one stream, launched apart, would run one after the other, the first waiting
 * for the second forever: refused, `why` saying why they are apart. */
static ncclResult_t refuse_one_stream(struct dccl_coll_comm *const *comms, void *const *streams, int n,
                                      const char *why) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (streams[i] == streams[j] && comms[i]->peers[0].comm_nonce == comms[j]->peers[0].comm_nonce)
        return dccl_error(ncclInvalidUsage,
                          "ranks %d and %d of one communicator call on one stream (%p) in this group, and %s: "
                          "their kernels would run one after the other and the first would wait for the second "
                          "forever. Give each rank a stream of its own",
                          comms[i]->rank, comms[j]->rank, streams[i], why);
  return ncclSuccess;
}

ncclResult_t dccl_dev_launch_ranks(struct dccl_coll_comm *const *comms, void *const *streams, int n,
                                   struct dccl_op *list) {
  if (!may_share(comms, n)) {
    DCCLCHECK(refuse_one_stream(comms, streams, n,
                                "their launches are not shared (DCCL_DEV_SHARED_LAUNCH=0, more than 8 ranks, or the "
                                "copy engines)"));
    for (int i = 0; i < n; i++) DCCLCHECK(dccl_dev_launch(comms[i], list, streams[i]));
    return ncclSuccess;
  }
  struct prepared p[DCCL_DEV_LAUNCH_RANKS];
  const struct dccl_dev_work *works[DCCL_DEV_LAUNCH_RANKS];
  int shared = 1;
  for (int i = 0; i < n; i++) {
    DCCLCHECK(prepare(comms[i], list, streams[i], &p[i]));
    works[i] = &comms[i]->dev->launch;
    shared &= p[i].kernel >= 0 && !p[i].captured && p[i].kernel == p[0].kernel;
  }
  struct dccl_dev_work merged;
  if (!shared || !dccl_dev_work_merge(&merged, works, n)) {
    DCCLCHECK(refuse_one_stream(comms, streams, n,
                                "their work does not fit one shared launch (at most 8 tasks and 64 CTAs in all, "
                                "none captured)"));
    for (int i = 0; i < n; i++) DCCLCHECK(submit(comms[i], &p[i], streams[i]));
    return ncclSuccess;
  }
  DCCLCHECK(launch_shared(comms, streams, n, p[0].kernel, &merged));
  for (int i = 0; i < n; i++) launched(comms[i]->dev, &p[i], (int)works[i]->nctas);
  return ncclSuccess;
}

ncclResult_t dccl_dev_copy(struct dccl_coll_comm *comm, void *dst, const void *src, size_t bytes, void *stream) {
  DCCLCHECK(enter(comm->dev->ctx));
  DCCL_CUCHECK(dccl_cu.memcpy_async((CUdeviceptr)dst, (CUdeviceptr)src, bytes, (CUstream)stream),
               "ncclSend/ncclRecv to self: cuMemcpyAsync");
  return ncclSuccess;
}

void dccl_dev_comm_wait(struct dccl_coll_comm *comm) {
  /* A kernel waiting for a peer that failed exits once the abort word is set; nothing here waits for a peer. */
  while (dccl_dev_comm_busy(comm)) sched_yield();
}

static double wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

ncclResult_t dccl_dev_time_rounds(struct dccl_coll_comm *comm, int n,
                                  ncclResult_t (*issue)(void *arg, void *stream, void *scratch), void *arg, double *us) {
  struct dccl_dev_comm *dev = comm->dev;
  if (!dev) return dccl_error(ncclInvalidUsage, "rank %d has no GPU side", comm->rank);
  DCCLCHECK(enter(dev->ctx));
  CUstream stream;
  DCCL_CUCHECK(dccl_cu.stream_create(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < n && res == ncclSuccess; i++) {
    double t0 = wall_us();
    res = issue(arg, stream, dev->scratch);
    CUresult r = res == ncclSuccess ? dccl_cu.stream_synchronize(stream) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS)
      res = dccl_error(ncclUnhandledCudaError, "cuStreamSynchronize: %s (%d)", dccl_cuda_error_text(r), (int)r);
    us[i] = wall_us() - t0;
  }
  (void)dccl_cu.stream_destroy(stream); /* returns at once; the stream's work is done */
  return res;
}
