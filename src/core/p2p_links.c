/* Point-to-point links made ahead of use. A send/recv link is made by the first ncclSend/ncclRecv between two
 * ranks, which waits for the peer over the bootstrap: that cannot be captured into a CUDA graph (a replay would
 * not repeat it), so a first use under capture is refused, naming the peer. The links can be made before:
 * dcclCommConnectPeers for chosen peers, or DCCL_RUNTIME_CONNECT=0 for every peer at creation. */
#include <stdio.h>
#include <stdlib.h>

#include "collectives/op.h"
#include "core/comm.h"
#include "util/error.h"
#include "util/params.h"

/* Lanes a send/recv may use: the host's one, and where the communicator has device links every channel's. */
static int p2p_lanes(const struct dccl_comm *comm) {
  return 1 + (comm->device_links ? dccl_p2p_nchannels(&comm->coll, 1, UINT64_MAX) : 0);
}

/* Lane i of p2p_lanes. */
static int p2p_lane(int i) { return i == 0 ? DCCL_LANE_P2P : DCCL_LANE_DEVICE + DCCL_LANE_P2P + i - 1; }

/* Both directions of every point-to-point lane to each distinct peer of peers[0..npeers-1] but this rank. */
static ncclResult_t p2p_reqs(const struct dccl_comm *comm, const int *peers, int npeers, struct dccl_conn_req **out,
                             int *n) {
  *n = 0;
  int lanes = p2p_lanes(comm);
  *out = malloc((size_t)(npeers > 0 ? npeers : 1) * 2 * (size_t)lanes * sizeof(**out));
  if (!*out) return dccl_error(ncclSystemError, "out of memory connecting peers");
  for (int i = 0; i < npeers; i++) {
    int dup = peers[i] == comm->rank;
    for (int j = 0; j < i && !dup; j++) dup = peers[j] == peers[i];
    if (dup) continue;
    for (int l = 0; l < lanes; l++) {
      (*out)[(*n)++] = (struct dccl_conn_req){peers[i], 1, p2p_lane(l)};
      (*out)[(*n)++] = (struct dccl_conn_req){peers[i], 0, p2p_lane(l)};
    }
  }
  return ncclSuccess;
}

ncclResult_t dccl_p2p_creation_links(const struct dccl_comm *comm, struct dccl_conn_req **reqs, int *n, int *cap) {
  /* Buffers mapped on first use (DCCL_LAZY_MAP_BYTES) hold other processes' allocations open; a link's FIFO made
   * later could share a freed buffer's 2 MiB block (CUDA sub-allocates small allocations), which a process holding
   * that block cannot open (CUDA_ERROR_ALREADY_MAPPED): so every FIFO a peer opens is made first, at creation. */
  int at_creation = dccl_param_int(DCCL_PARAM_RUNTIME_CONNECT) == 0 ||
                    (comm->coll.direct_ok == DCCL_DIRECT_WINDOWS && dccl_param_int(DCCL_PARAM_LAZY_MAP_BYTES) >= 0);
  if (!at_creation || comm->nranks == 1) return ncclSuccess;
  int lanes = p2p_lanes(comm);
  int want = *n + 2 * lanes * (comm->nranks - 1);
  if (want > *cap) {
    struct dccl_conn_req *r = realloc(*reqs, (size_t)want * sizeof(*r));
    if (!r) return dccl_error(ncclSystemError, "out of memory connecting peers");
    *reqs = r;
    *cap = want;
  }
  for (int peer = 0; peer < comm->nranks; peer++)
    for (int l = 0; peer != comm->rank && l < lanes; l++) {
      (*reqs)[(*n)++] = (struct dccl_conn_req){peer, 1, p2p_lane(l)};
      (*reqs)[(*n)++] = (struct dccl_conn_req){peer, 0, p2p_lane(l)};
    }
  return ncclSuccess;
}

ncclResult_t dcclCommConnectPeers(ncclComm_t comm, const int *peers, int npeers) {
  DCCLCHECK(dccl_comm_check(comm, "dcclCommConnectPeers"));
  if (npeers < 0) return dccl_error(ncclInvalidArgument, "dcclCommConnectPeers: npeers is %d", npeers);
  if (npeers > 0 && !peers)
    return dccl_error(ncclInvalidArgument, "dcclCommConnectPeers: peers is NULL with npeers %d", npeers);
  for (int i = 0; i < npeers; i++)
    if (peers[i] < 0 || peers[i] >= comm->nranks)
      return dccl_error(ncclInvalidArgument, "dcclCommConnectPeers: peers[%d] = %d is outside 0..%d", i, peers[i],
                        comm->nranks - 1);
  if (comm->abort_flag)
    return dccl_error(ncclInvalidUsage, "dcclCommConnectPeers: the communicator has failed: %s", comm->error_text);
  struct dccl_conn_req *reqs;
  int n;
  DCCLCHECK(p2p_reqs(comm, peers, npeers, &reqs, &n));
  ncclResult_t res = n ? dccl_comm_connect(comm, reqs, n) : ncclSuccess;
  free(reqs);
  /* A link made on one end only leaves its peer waiting: the communicator cannot be trusted again. */
  if (res != ncclSuccess) {
    res = dccl_comm_explain_failure(comm, res, "dcclCommConnectPeers", -1);
    dccl_comm_set_failed(comm, res, dccl_last_error());
  }
  return res;
}

ncclResult_t dccl_p2p_check_first_use(struct dccl_comm *comm, int kind, int peer, int on_device, uint64_t bytes,
                                      cudaStream_t stream, int (*capturing)(cudaStream_t)) {
  int is_send = kind == DCCL_OP_SEND;
  int lane = DCCL_LANE_P2P + (on_device ? DCCL_LANE_DEVICE : 0), made = 1;
  for (int c = 0; c < dccl_p2p_nchannels(&comm->coll, on_device, bytes) && made; c++)
    made = dccl_comm_find_conn(comm, peer, is_send, lane + c) != NULL;
  if (peer == comm->rank || made || !capturing(stream)) return ncclSuccess;
  return dccl_error(ncclInvalidUsage,
                    "%s %s rank %d inside CUDA stream capture: the link %s rank %d is not made yet, and making it "
                    "waits for the peer, which a graph cannot replay. Make it before capturing: "
                    "dcclCommConnectPeers(comm, peers, n) naming rank %d here and rank %d there (dccl.h), or one "
                    "uncaptured send/recv between the two, or DCCL_RUNTIME_CONNECT=0 (every link at creation)",
                    dccl_op_name(kind), is_send ? "to" : "from", peer, is_send ? "to" : "from", peer, peer,
                    comm->rank);
}
