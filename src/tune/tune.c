/* The cost model. Two constants, measured on this machine when a communicator is created:
 *   alpha: the time of one pipeline step (a slot handed from one rank to the next), from passing tokens around
 *          the ring connections (probe.c);
 *   bw:    the rate at which a core copies memory, from timing memcpy (probe.c).
 * A ring all-reduce of S bytes on N ranks in L loops takes (2N-2+L) steps and moves 2S(N-1)/N bytes per rank; a
 * double binary tree takes (2*depth+C) steps for C chunks per tree and moves about 3S bytes per rank (each
 * inner node reads two children and its input, and writes its parent and two children). One-shot (every rank
 * sends its input to every other and reduces all in rank order) takes 2 steps per chunk and moves (N-1) S bytes
 * per rank each way: it wins for small sizes. The smallest prediction wins. All ranks use the slowest rank's
 * constants, so all choose the same algorithm. */
#include "tune/tune.h"

#include <math.h>
#include <strings.h>

#include "pure/conn_desc.h"
#include "pure/schedule.h"
#include "tune/model.h"
#include "util/log.h"
#include "util/params.h"

/* The slowest hand-off between ring 0 neighbours of one host (and one clock: pretend hosts of one machine count),
 * from when one sent the timed tokens to when the other received them; 0 where the ring has no such pair. */
static double intra_handoff_ns(const struct dccl_coll_comm *c, const double *all) {
  const int f = DCCL_TUNE_PROBE_FIELDS;
  double slowest = 0;
  for (int i = 0; c->rings[0].order && c->peers && i < c->nranks && c->nranks > 1; i++) {
    int r = c->rings[0].order[i], next = c->rings[0].order[(i + 1) % c->nranks];
    const double *from = all + f * r, *to = all + f * next;
    if (c->peers[r].host_hash != c->peers[next].host_hash ||
        c->peers[r].real_host_hash != c->peers[next].real_host_hash || from[2] <= 0 || to[3] <= 0)
      continue;
    if (to[3] - from[2] > slowest) slowest = to[3] - from[2];
  }
  return slowest;
}

void dccl_tune_agree(struct dccl_coll_comm *c, const double *all) {
  const int f = DCCL_TUNE_PROBE_FIELDS;
  c->alpha_ns = 0;
  c->bw_bytes_per_ns = 1e9;
  c->bw_net_bytes_per_ns = 0;
  for (int r = 0; r < c->nranks; r++) {
    if (all[f * r] > c->alpha_ns) c->alpha_ns = all[f * r];
    if (all[f * r + 1] > 0 && all[f * r + 1] < c->bw_bytes_per_ns) c->bw_bytes_per_ns = all[f * r + 1];
    if (all[f * r + 4] > 0 && (c->bw_net_bytes_per_ns == 0 || all[f * r + 4] < c->bw_net_bytes_per_ns))
      c->bw_net_bytes_per_ns = all[f * r + 4];
  }
  double intra = intra_handoff_ns(c, all);
  c->alpha_intra_ns = intra > 0 && intra < c->alpha_ns ? intra : c->alpha_ns;
  int64_t a = dccl_param_int(DCCL_PARAM_TUNE_ALPHA_NS), b = dccl_param_int(DCCL_PARAM_TUNE_BW_MBPS);
  if (a > 0) c->alpha_ns = c->alpha_intra_ns = (double)a;
  if (b > 0) c->bw_bytes_per_ns = (double)b / 1000.0;
  if (b > 0) c->bw_net_bytes_per_ns = 0; /* the copy rate stands for both links */
  DCCL_INFO(DCCL_TUNE, "cost model: step %.0f ns, hand-off inside a host %.0f ns, copy %.2f GB/s, ring step between "
            "hosts %.2f GB/s", c->alpha_ns, c->alpha_intra_ns, c->bw_bytes_per_ns, c->bw_net_bytes_per_ns);
}

/* Ranks on several hosts: the two-level model (model.c) with the measured constants: the probe's step (as slow as
 * ring 0's slowest hop, one between hosts) for a hand-off between hosts, the hand-off timed between neighbours of
 * one host for the rest; the copy rate inside a host, and between hosts the ring step's rate with full slots
 * (copies included). It differs from the one-level formulas below in the trees' depth, (depth(H) + 1) host heaps
 * and depth(H) network hops, and in charging each link at its own speed. */
static double predict_hosts_ns(const struct dccl_coll_comm *comm, int algo, size_t bytes) {
  double intra = comm->alpha_intra_ns > 0 ? comm->alpha_intra_ns : comm->alpha_ns;
  struct dccl_model m = {.nhosts = comm->nhosts, .ranks_per_host = comm->ranks_per_host, .nics_per_host = 1,
                         .nchannels = 1, .chunk_bytes = (double)dccl_param_int(DCCL_PARAM_CHUNK_SIZE),
                         .alpha_intra_ns = intra, .bw_intra = comm->bw_bytes_per_ns, .tree_inner_moves = 3,
                         .alpha_inter_ns = comm->alpha_ns,
                         .bw_nic = comm->bw_net_bytes_per_ns > 0 ? comm->bw_net_bytes_per_ns : comm->bw_bytes_per_ns};
  return dccl_model_allreduce_ns(&m, algo, (double)bytes);
}

double dccl_tune_predict_ns(const struct dccl_coll_comm *comm, int algo, size_t bytes) {
  if (comm->nhosts > 1 && algo != DCCL_ALGO_ONESHOT) return predict_hosts_ns(comm, algo, bytes);
  double n = comm->nranks, s = (double)bytes, k = (double)dccl_param_int(DCCL_PARAM_CHUNK_SIZE);
  if (algo == DCCL_ALGO_ONESHOT) {
    double chunks = s / k < 1 ? 1 : s / k;
    return 2.0 * chunks * comm->alpha_ns + 2.0 * s * (n - 1) / comm->bw_bytes_per_ns;
  }
  if (algo == DCCL_ALGO_TREE) {
    double chunks = s / 2 / k < 1 ? 1 : s / 2 / k;
    return (2.0 * dccl_tree_depth(comm->nranks) + chunks) * comm->alpha_ns + 3.0 * s / comm->bw_bytes_per_ns;
  }
  double loops = s / (n * k) < 1 ? 1 : s / (n * k);
  return (2.0 * n - 2 + loops) * comm->alpha_ns + 2.0 * s * (n - 1) / n / comm->bw_bytes_per_ns;
}

int dccl_tune_forced_algo(void) {
  const char *forced = dccl_param_str(DCCL_PARAM_ALGO);
  if (!strcasecmp(forced, "tree")) return DCCL_ALGO_TREE;
  if (!strcasecmp(forced, "ring")) return DCCL_ALGO_RING;
  if (!strcasecmp(forced, "oneshot")) return DCCL_ALGO_ONESHOT;
  return DCCL_ALGO_AUTO;
}

int dccl_tune_algo(const struct dccl_coll_comm *comm, int kind, size_t bytes) {
  int forced = dccl_tune_forced_algo();
  if (forced != DCCL_ALGO_AUTO) return forced;
  if (kind != DCCL_OP_ALLREDUCE) return DCCL_ALGO_RING; /* chains beat trees for broadcast/reduce on one host */
  int best = DCCL_ALGO_RING;
  double best_ns = dccl_tune_predict_ns(comm, DCCL_ALGO_RING, bytes);
  int candidates[] = {DCCL_ALGO_TREE, comm->nranks - 1 <= DCCL_CONN_SLOTS ? DCCL_ALGO_ONESHOT : DCCL_ALGO_TREE};
  for (int i = 0; i < 2; i++) {
    double t = dccl_tune_predict_ns(comm, candidates[i], bytes);
    if (t < best_ns) best = candidates[i], best_ns = t;
  }
  return best;
}

/* A small message's time on a host is the lines it moves to the consumer's core (one crossing is about a step's
 * measured latency, alpha; the probe passes one-line tokens) plus its copies. Lines are counted in 128-byte pairs,
 * which x86 fetches together (slots start on such a pair). An LL slot of b bytes is dccl_ll_units(b) 8-byte units
 * and two more copies (into the units, out of them: 4 b bytes moved); a bulk slot is its 64-byte head and payload.
 * LL wins only where it moves fewer pairs; on this layout it never does (8 bytes: one pair either way), so hosts
 * send bulk, as measured (docs/performance.md). All ranks hold the same constants, so they choose alike. */
static double proto_ns(const struct dccl_coll_comm *comm, int proto, size_t bytes) {
  double moved = proto == DCCL_PROTO_LL ? 8.0 * dccl_ll_units(bytes) : DCCL_SLOT_HEAD_BYTES + (double)bytes;
  double copies = proto == DCCL_PROTO_LL ? 4.0 * (double)bytes / comm->bw_bytes_per_ns : 0.0;
  return ceil(moved / DCCL_CACHELINE) * comm->alpha_ns + copies;
}

int dccl_tune_proto(const struct dccl_coll_comm *comm, int kind, size_t bytes) {
  const char *forced = dccl_param_str(DCCL_PARAM_PROTO);
  if (!strcasecmp(forced, "ll")) return DCCL_PROTO_LL;
  if (!strcasecmp(forced, "bulk")) return DCCL_PROTO_BULK;
  if (bytes > DCCL_LL_MAX_BYTES) return DCCL_PROTO_BULK;
  return proto_ns(comm, DCCL_PROTO_LL, bytes) < proto_ns(comm, DCCL_PROTO_BULK, bytes) ? DCCL_PROTO_LL
                                                                                       : DCCL_PROTO_BULK;
}
