/* Communicator creation: join the bootstrap, learn every rank, order rings, connect, measure. */
#include "core/comm_init.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "collectives/device/dev_exec.h"
#include "collectives/op.h"
#include "core/comm.h"
#include "core/comm_lazy_map.h"
#include "core/comm_registry.h"
#include "core/copy_engine_setup.h"
#include "core/gpu_sharing_probe.h"
#include "core/group.h"
#include "topo/cpu_topo.h"
#include "topo/host_id.h"
#include "topo/ring_order.h"
#include "transports/registry.h"
#include "tune/tune.h"
#include "util/cuda_driver.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/net_addr.h"
#include "util/params.h"

/* Called from the bootstrap's monitor thread: only flags, never a blocking call or a socket. */
static void on_peer_death(void *arg, int dead_rank) {
  struct dccl_comm *comm = arg;
  int expected = -1;
  if (!atomic_compare_exchange_strong(&comm->dead_rank, &expected, dead_rank)) return;
  pthread_mutex_lock(&comm->error_lock);
  if (!comm->error_text[0])
    snprintf(comm->error_text, sizeof(comm->error_text), "rank %d (host %s, pid %d) died", dead_rank,
             comm->peers[dead_rank].hostname, comm->peers[dead_rank].pid);
  pthread_mutex_unlock(&comm->error_lock);
  int ok = ncclSuccess;
  atomic_compare_exchange_strong(&comm->async_error, &ok, ncclRemoteError);
  comm->abort_flag = 1;
  dccl_dev_comm_abort(&comm->coll); /* a store to pinned memory: safe from the monitor thread */
  DCCL_WARN(DCCL_INIT, "rank %d (host %s, pid %d) died", dead_rank, comm->peers[dead_rank].hostname,
            comm->peers[dead_rank].pid);
}

/* What other ranks need to choose a transport to this one: its address, its GPU, and each transport's own part. */
static void describe_self(const struct dccl_comm *comm, struct dccl_peer_info *me) {
  for (int i = 0; i < dccl_transport_count(); i++) dccl_transport_at(i)->describe_self(me->transport_info[i]);
  me->deterministic = dccl_param_int(DCCL_PARAM_DETERMINISTIC) != 0;
  me->cuda_device = comm->cuda_device;
  me->has_device = comm->cuda_device >= 0 && dccl_cuda_device_identity(comm->cuda_device, me->device_uuid,
                                                                       me->pci_bus_id, sizeof(me->pci_bus_id));
  struct sockaddr_storage a;
  if (dccl_socket_local_addr(&a) != ncclSuccess) return;
  me->net_family = a.ss_family;
  if (a.ss_family == AF_INET) memcpy(me->net_addr, &((struct sockaddr_in *)&a)->sin_addr, 4);
  if (a.ss_family == AF_INET6) memcpy(me->net_addr, &((struct sockaddr_in6 *)&a)->sin6_addr, 16);
}

static int clamp_channels(int64_t n) {
  return n < 1 ? 1 : n > DCCL_MAX_CHANNELS ? DCCL_MAX_CHANNELS : (int)n;
}

static ncclResult_t build_rings(struct dccl_comm *comm) {
  int n = comm->nranks;
  uint64_t *hosts = malloc((size_t)n * sizeof(*hosts));
  if (!hosts) return dccl_error(ncclSystemError, "out of memory");
  for (int r = 0; r < n; r++) hosts[r] = comm->peers[r].host_hash;
  int nch = clamp_channels(dccl_param_int(DCCL_PARAM_NCHANNELS));
  int dev_nch = clamp_channels(dccl_param_int(DCCL_PARAM_DEV_NCHANNELS));
  comm->coll.nchannels = nch;
  comm->coll.dev_nchannels = dev_nch;
  for (int c = 0; c < (nch > dev_nch ? nch : dev_nch); c++) {
    struct dccl_ring *ring = &comm->coll.rings[c];
    ring->order = malloc((size_t)n * sizeof(int));
    if (!ring->order) {
      free(hosts);
      return dccl_error(ncclSystemError, "out of memory");
    }
    comm->nhosts = dccl_ring_order(hosts, n, ring->order);
    comm->ranks_per_host = dccl_ring_busiest_host(hosts, ring->order, n);
    for (int i = 0; i < n; i++)
      if (ring->order[i] == comm->rank) ring->pos = i;
    ring->next = ring->order[(ring->pos + 1) % n];
    ring->prev = ring->order[(ring->pos + n - 1) % n];
  }
  if (comm->rank == 0 && dccl_log_enabled(DCCL_LOG_INFO, DCCL_INIT)) {
    char line[1024];
    int len = 0;
    for (int i = 0; i < n && len < (int)sizeof(line) - 16; i++)
      len += snprintf(line + len, sizeof(line) - (size_t)len, " %d", comm->coll.rings[0].order[i]);
    DCCL_INFO(DCCL_INIT, "%d ranks on %d hosts; ring:%s (host crossings %d)", n, comm->nhosts, line,
              dccl_ring_host_crossings(hosts, comm->coll.rings[0].order, n));
  }
  free(hosts);
  return ncclSuccess;
}

/* Every rank on this rank's GPU (in this process or others) and on one host as DCCL_HOSTID sees it: the direct
 * all-reduce can meet on their boards. Every rank answers alike from the peer infos. */
static int one_gpu(const struct dccl_comm *comm) {
  const struct dccl_peer_info *me = &comm->peers[comm->rank];
  for (int r = 0; r < comm->nranks; r++) {
    const struct dccl_peer_info *p = &comm->peers[r];
    if (p->real_host_hash != me->real_host_hash || p->host_hash != me->host_hash || !p->has_device ||
        memcmp(p->device_uuid, me->device_uuid, sizeof(me->device_uuid)))
      return 0;
  }
  return comm->nranks > 1;
}

/* The GPU side of a communicator whose rank has a device: kernels loaded, its state, and the device links of every
 * collective, when every pair of ranks can have them. A failure leaves a host-buffer communicator. Every rank then
 * says whether its GPU side exists and how many channels it can run (the CTAs its GPU gives it), so all make
 * device links or none, over the same channels, whatever failed where or whatever GPU each has. */
static ncclResult_t prepare_device(struct dccl_comm *comm, int *device_links) {
  *device_links = 0;
  int any = 0, most = 1;
  for (int a = 0; a < comm->nranks; a++) any |= comm->peers[a].has_device;
  if (!any) return ncclSuccess; /* every rank knows: no allgather */
  /* The most ranks of this communicator on any one GPU: they share its CTAs. Every rank finds the same number. */
  for (int a = 0; a < comm->nranks; a++) {
    int on_gpu = 0;
    for (int b = 0; b < comm->nranks; b++)
      on_gpu += comm->peers[a].has_device && comm->peers[b].has_device &&
                comm->peers[a].real_host_hash == comm->peers[b].real_host_hash &&
                !memcmp(comm->peers[a].device_uuid, comm->peers[b].device_uuid, sizeof(comm->peers[a].device_uuid));
    if (on_gpu > most) most = on_gpu;
  }
  if (comm->cu_ctx && dccl_dev_comm_create(&comm->coll, comm->cu_ctx, comm->cuda_device, most) != ncclSuccess) {
    DCCL_WARN(DCCL_INIT, "device buffers will be refused: %s", dccl_last_error());
    dccl_dev_comm_free(&comm->coll);
  }
  /* Each rank's GPU side, channels and direct board (how its peers map it). */
  struct side {
    int32_t ready, nchannels, pid, pad;
    struct dccl_peer_mem_export board;
  } *all = calloc((size_t)comm->nranks, sizeof(*all));
  struct dccl_peer_mem_export *boards = calloc((size_t)comm->nranks, sizeof(*boards));
  int32_t *pids = calloc((size_t)comm->nranks, sizeof(*pids));
  if (!all || !boards || !pids) {
    free(all);
    free(boards);
    free(pids);
    return dccl_error(ncclSystemError, "out of memory");
  }
  struct side *me = &all[comm->rank];
  *me = (struct side){comm->coll.dev != NULL, comm->coll.dev_nchannels, (int32_t)getpid(), 0, {0}};
  if (me->ready && dccl_dev_comm_board_export(&comm->coll, &me->board) != ncclSuccess) {
    DCCL_WARN(DCCL_INIT, "device buffers will be refused: %s", dccl_last_error());
    me->ready = 0;
  }
  ncclResult_t res = dccl_bootstrap_allgather(comm->bootstrap, all, sizeof(*all));
  int not_ready = -1;
  for (int r = 0; r < comm->nranks && res == ncclSuccess; r++) {
    if (!all[r].ready && not_ready < 0) not_ready = r;
    if (all[r].nchannels < comm->coll.dev_nchannels) comm->coll.dev_nchannels = all[r].nchannels;
    boards[r] = all[r].board;
    pids[r] = all[r].pid;
  }
  free(all);
  if (res == ncclSuccess && not_ready < 0 && one_gpu(comm) && dccl_device_mapping_allowed())
    res = dccl_dev_comm_set_boards(&comm->coll, boards, pids);
  free(boards);
  free(pids);
  if (res != ncclSuccess) return res;
  if (not_ready >= 0)
    DCCL_INFO(DCCL_INIT, "no device links: rank %d has no usable GPU side (device buffers will be refused)", not_ready);
  /* One walk over every pair (all ranks agree from the same peer infos): device links or none, and whether any
   * goes over a network transport. */
  else if (!(*device_links = comm->coll.dev && dccl_comm_device_links(comm, &comm->coll.dev_net)))
    DCCL_INFO(DCCL_INIT, "no device links: some ranks cannot reach each other's GPU memory (device buffers will be "
                         "refused between them)");
  else if (comm->coll.dev_net) {
    /* Each channel's links are TCP streams a proxy thread serves: a few carry what the network can take. */
    int cap = clamp_channels(dccl_param_int(DCCL_PARAM_DEV_NET_NCHANNELS));
    if (comm->coll.dev_nchannels > cap) comm->coll.dev_nchannels = cap;
    DCCL_INFO(DCCL_INIT, "device links between hosts go over the network (%d channels, FIFOs in pinned host memory)",
              comm->coll.dev_nchannels);
  }
  return ncclSuccess;
}

void dccl_comm_memory(const struct dccl_comm *comm, size_t *device_bytes, size_t *pinned_host_bytes) {
  uint64_t dev = 0, pinned = 0;
  dccl_dev_comm_memory(&comm->coll, &dev, &pinned);
  *device_bytes = (size_t)(dev + __atomic_load_n(&comm->tctx.dev_bytes, __ATOMIC_RELAXED));
  *pinned_host_bytes = (size_t)(pinned + __atomic_load_n(&comm->tctx.pinned_bytes, __ATOMIC_RELAXED));
}

/* Device FIFOs are GPU memory the user's tensors need too: the channels of device collectives are lowered until
 * every rank's receiving FIFOs made at creation (the collectives' and the point-to-point ones') fit
 * DCCL_DEV_MEM_LIMIT. Each rank counts its own links; all take the most, so all
 * plan the same channels. */
static ncclResult_t fit_device_links(struct dccl_comm *comm, int forced) {
  uint64_t limit = (uint64_t)dccl_param_int(DCCL_PARAM_DEV_MEM_LIMIT);
  struct dccl_conn_desc d;
  uint64_t fifo = dccl_conn_desc_layout(&d, (uint32_t)dccl_param_int(DCCL_PARAM_DEV_NSLOTS),
                                        (uint64_t)dccl_param_int(DCCL_PARAM_DEV_CHUNK_SIZE), DCCL_DEV_LL_BYTES,
                                        DCCL_REGION_SEND);
  int *counts = calloc((size_t)comm->nranks, sizeof(int));
  if (!counts) return dccl_error(ncclSystemError, "out of memory");
  ncclResult_t res = ncclSuccess;
  for (;;) {
    struct dccl_conn_req *reqs = NULL;
    int n = 0, cap = 0, mine = 0, most = 0;
    res = dccl_coll_creation_links(&comm->coll, 1, forced, &reqs, &n, &cap);
    if (res == ncclSuccess) res = dccl_p2p_creation_links(comm, &reqs, &n, &cap); /* their device lanes too */
    for (int i = 0; i < n; i++) mine += !reqs[i].is_send && reqs[i].lane >= DCCL_LANE_DEVICE;
    free(reqs);
    counts[comm->rank] = mine;
    if (res == ncclSuccess) res = dccl_bootstrap_allgather(comm->bootstrap, counts, sizeof(int));
    if (res != ncclSuccess) break;
    for (int r = 0; r < comm->nranks; r++) most = counts[r] > most ? counts[r] : most;
    uint64_t need = (uint64_t)most * fifo;
    int nch = comm->coll.dev_nchannels;
    if (need <= limit || nch == 1) {
      if (need > limit)
        DCCL_WARN(DCCL_INIT, "device links need %llu bytes of GPU memory per rank with one channel, more than "
                             "DCCL_DEV_MEM_LIMIT (%llu)", (unsigned long long)need, (unsigned long long)limit);
      break;
    }
    int fit = (int)((uint64_t)nch * limit / need);
    comm->coll.dev_nchannels = fit >= nch ? nch - 1 : fit < 1 ? 1 : fit;
    DCCL_INFO(DCCL_INIT, "device channels %d -> %d: %d FIFOs of %llu bytes exceed DCCL_DEV_MEM_LIMIT (%llu)", nch,
              comm->coll.dev_nchannels, most, (unsigned long long)fifo, (unsigned long long)limit);
  }
  free(counts);
  return res;
}

/* Every link the collectives may use (rings; trees and one-shot unless DCCL_ALGO rules them out; under a forced
 * tree the rooted trees), the same on device lanes where the ranks' GPUs can reach each other, and under
 * DCCL_RUNTIME_CONNECT=0 the point-to-point links, made up front in one batch: no collective then waits for a peer
 * to make one, and the cost model measures over the rings. */
static ncclResult_t connect_creation_links(struct dccl_comm *comm, int device_links) {
  struct dccl_conn_req *reqs = NULL;
  int n = 0, cap = 0;
  int forced = dccl_tune_forced_algo();
  ncclResult_t res = device_links ? fit_device_links(comm, forced) : ncclSuccess;
  if (res == ncclSuccess) res = dccl_coll_creation_links(&comm->coll, 0, forced, &reqs, &n, &cap);
  if (res == ncclSuccess && device_links) res = dccl_coll_creation_links(&comm->coll, 1, forced, &reqs, &n, &cap);
  if (res == ncclSuccess) res = dccl_p2p_creation_links(comm, &reqs, &n, &cap);
  if (res == ncclSuccess && n > 0) res = dccl_comm_connect(comm, reqs, n);
  free(reqs);
  return res;
}

/* Every rank probes, then all take the slowest rank's constants, so all choose the same algorithms. */
static ncclResult_t measure_cost_model(struct dccl_comm *comm) {
  const size_t fields = DCCL_TUNE_PROBE_FIELDS;
  double *all = calloc((size_t)comm->nranks, fields * sizeof(double));
  if (!all) return dccl_error(ncclSystemError, "out of memory");
  ncclResult_t res = dccl_tune_probe(&comm->coll, all + fields * (size_t)comm->rank);
  if (res == ncclSuccess) res = dccl_bootstrap_allgather(comm->bootstrap, all, fields * sizeof(double));
  if (res == ncclSuccess) dccl_tune_agree(&comm->coll, all);
  free(all);
  return res;
}

/* Creation's phases and their times, logged at INFO: where creation's time goes. */
enum {
  PHASE_BOOTSTRAP,
  PHASE_PEERS,
  PHASE_LINKS,
  PHASE_PROBE,
  PHASE_MONITOR,
  PHASE_GPU_PROBE,
  PHASE_BARRIER,
  NPHASES
};
static const char *const phase_names[NPHASES] = {"bootstrap", "peer info", "links",  "cost probe",
                                                  "monitor",   "GPU probe", "barrier"};
struct phase_clock {
  int64_t ns[NPHASES], last;
};
static void phase_done(struct phase_clock *c, int phase) {
  int64_t now = dccl_now_ns();
  c->ns[phase] = now - c->last;
  c->last = now;
}
static void phase_log(const struct dccl_comm *comm, const struct phase_clock *c) {
  if (!dccl_log_enabled(DCCL_LOG_INFO, DCCL_INIT)) return;
  char line[256];
  int len = 0;
  int64_t total = 0;
  for (int i = 0; i < NPHASES; i++) {
    total += c->ns[i];
    len += snprintf(line + len, sizeof(line) - (size_t)len, "%s%s %.1f", i ? ", " : "", phase_names[i],
                    (double)c->ns[i] / 1e6);
  }
  DCCL_INFO(DCCL_INIT, "rank %d created in %.1f ms: %s", comm->rank, (double)total / 1e6, line);
}

ncclResult_t dccl_comm_init_from_bootstrap(struct dccl_comm *comm) {
  int n = comm->nranks;
  struct phase_clock clock = {.last = comm->created_ns};
  phase_done(&clock, PHASE_BOOTSTRAP);
  comm->peers = calloc((size_t)n, sizeof(*comm->peers));
  comm->p2p_send_seq = calloc((size_t)n, sizeof(uint64_t));
  comm->p2p_recv_seq = calloc((size_t)n, sizeof(uint64_t));
  if (!comm->peers || !comm->p2p_send_seq || !comm->p2p_recv_seq)
    return dccl_error(ncclSystemError, "out of memory creating a communicator of %d ranks", n);
  struct dccl_peer_info *me = &comm->peers[comm->rank];
  me->rank = comm->rank;
  me->pid = (int)getpid();
  int entry = comm->hostid_entry ? comm->hostid_entry - 1 : comm->rank;
  DCCLCHECK(dccl_host_identity(entry, me->hostname, me->host_id, &me->host_hash, &me->real_host_hash));
  describe_self(comm, me);
  if (getrandom(&me->comm_nonce, sizeof(me->comm_nonce), 0) != (ssize_t)sizeof(me->comm_nonce))
    me->comm_nonce = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)comm;
  DCCLCHECK(dccl_bootstrap_allgather(comm->bootstrap, comm->peers, sizeof(*comm->peers)));
  for (int r = 0; r < n; r++) {
    comm->peers[r].comm_nonce = comm->peers[0].comm_nonce;
    if (comm->peers[r].rank != r)
      return dccl_error(ncclInternalError, "bootstrap: slot %d holds rank %d", r, comm->peers[r].rank);
  }
  for (int r = 1; r < n; r++)
    if (comm->peers[r].deterministic != comm->peers[0].deterministic)
      return dccl_error(ncclInvalidUsage, "DCCL_DETERMINISTIC differs between ranks: rank 0 has %d, rank %d has %d",
                        comm->peers[0].deterministic, r, comm->peers[r].deterministic);
  comm->coll.deterministic = me->deterministic;
  DCCLCHECK(build_rings(comm));
  struct dccl_cpu_topo cpus;
  dccl_cpu_topo_read(&cpus);
  int local_ranks = 0;
  for (int r = 0; r < n; r++) local_ranks += comm->peers[r].real_host_hash == me->real_host_hash;
  comm->oversubscribed = local_ranks > cpus.pus;
  if (comm->oversubscribed)
    DCCL_INFO(DCCL_INIT, "%d ranks share %d processing units on this host: waits yield instead of spinning",
              local_ranks, cpus.pus);
  dccl_comm_fill_views(comm);
  phase_done(&clock, PHASE_PEERS);
  DCCLCHECK(prepare_device(comm, &comm->device_links));
  DCCLCHECK(connect_creation_links(comm, comm->device_links));
  DCCLCHECK(dccl_lazy_map_init(comm));
  phase_done(&clock, PHASE_LINKS);
  DCCLCHECK(measure_cost_model(comm));
  phase_done(&clock, PHASE_PROBE);
  struct dccl_stall_hooks hooks;
  dccl_stall_hooks_of(comm, &hooks);
  dccl_bootstrap_set_stall_hooks(comm->bootstrap, &hooks);
  DCCLCHECK(dccl_bootstrap_monitor_start(comm->bootstrap, on_peer_death, comm));
  phase_done(&clock, PHASE_MONITOR);
  int take_turns = 0;
  DCCLCHECK(dccl_gpu_sharing_probe(comm, &take_turns)); /* after the monitor: a death in it stops the kernels */
  DCCLCHECK(dccl_copy_engine_setup(comm, take_turns));
  phase_done(&clock, PHASE_GPU_PROBE);
  DCCLCHECK(dccl_bootstrap_barrier(comm->bootstrap));
  dccl_stall_created(comm);
  phase_done(&clock, PHASE_BARRIER);
  phase_log(comm, &clock);
  if (comm->cu_ctx) {
    size_t dev_bytes = 0, pinned_bytes = 0;
    dccl_comm_memory(comm, &dev_bytes, &pinned_bytes);
    DCCL_INFO(DCCL_INIT, "rank %d holds %.1f MiB of GPU memory (%d device channels) and %.1f MiB of pinned host "
                         "memory", comm->rank, dev_bytes / 1048576.0, comm->coll.dev_nchannels,
              pinned_bytes / 1048576.0);
  }
  DCCL_INFO(DCCL_INIT, "communicator %p rank %d of %d ready (host %s)", (void *)comm, comm->rank, n, me->host_id);
  return ncclSuccess;
}

struct dccl_comm *dccl_comm_alloc(int rank, int nranks) {
  struct dccl_comm *comm = calloc(1, sizeof(*comm));
  if (!comm) return NULL;
  comm->magic = DCCL_COMM_MAGIC;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->creator_pid = getpid();
  comm->created_ns = dccl_now_ns();
  comm->cuda_device = -1;
  atomic_store(&comm->dead_rank, -1);
  atomic_store(&comm->async_error, ncclSuccess);
  pthread_mutex_init(&comm->conn_lock, NULL);
  pthread_mutex_init(&comm->error_lock, NULL);
  pthread_mutex_init(&comm->stall_lock, NULL);
  pthread_mutex_init(&comm->reg_lock, NULL);
  pthread_mutex_init(&comm->coll.queue.lock, NULL);
  pthread_cond_init(&comm->coll.queue.posted, NULL);
  return comm;
}

void dccl_comm_set_device(struct dccl_comm *comm, int device) {
  comm->cuda_device = device;
  /* A failure leaves cu_ctx NULL: host buffers still work (ncclCommInitAll names devices 0..n-1 even on a
   * machine with fewer), and device buffers will say why they do not. */
  if (device >= 0 && dccl_cuda_available() && dccl_cuda_primary_ctx_retain(device, &comm->cu_ctx) != ncclSuccess)
    DCCL_INFO(DCCL_INIT, "%s", dccl_last_error());
}

struct dccl_comm *dccl_comm_create(const struct dccl_init_req *req) {
  struct dccl_comm *comm = dccl_comm_alloc(req->rank, req->nranks);
  if (!comm) return NULL;
  comm->nonblocking = req->config.cfg.blocking == 0;
  dccl_config_copy(&comm->config, &req->config);
  dccl_comm_set_device(comm, req->device);
  return comm;
}

ncclResult_t dccl_comm_init_run(struct dccl_comm *comm, const ncclUniqueId *id) {
  dccl_log_set_rank(comm->rank);
  ncclResult_t res;
  DCCLCHECKGOTO(dccl_bootstrap_init(id, comm->rank, comm->nranks, &comm->abort_flag, &comm->bootstrap), res, fail);
  DCCLCHECKGOTO(dccl_comm_init_from_bootstrap(comm), res, fail);
  if (comm->nonblocking) DCCLCHECKGOTO(dccl_progress_thread_start(comm), res, fail);
  return ncclSuccess;
fail:
  if (comm->peers) res = dccl_comm_explain_failure(comm, res, "ncclCommInitRank", -1);
  return res;
}

ncclResult_t dccl_comm_init_rank(const struct dccl_init_req *req) {
  struct dccl_comm *comm = dccl_comm_create(req);
  if (!comm) return dccl_error(ncclSystemError, "out of memory creating a communicator");
  ncclResult_t res = dccl_comm_init_run(comm, &req->id);
  if (res == ncclSuccess) res = dccl_registry_add(comm);
  if (res != ncclSuccess) {
    dccl_progress_thread_stop(comm);
    dccl_comm_free(comm, 0);
    return res;
  }
  *req->comm = comm;
  return ncclSuccess;
}
