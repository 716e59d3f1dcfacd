/* The two-level cost model (model.h says what each algorithm moves and waits for). */
#include "tune/model.h"

#include "collectives/coll_comm.h"
#include "pure/schedule.h"

static double at_least_one(double x) { return x < 1 ? 1 : x; }
static double max2(double a, double b) { return a > b ? a : b; }
static double min2(double a, double b) { return a < b ? a : b; }

double dccl_model_allreduce_ns(const struct dccl_model *m, int algo, double bytes) {
  double h = m->nhosts, g = m->ranks_per_host, n = h * g, s = bytes;
  double nics = m->nics_per_host > 0 ? m->nics_per_host : 1, channels = m->nchannels > 0 ? m->nchannels : 1;
  double slowest = h > 1 ? max2(m->alpha_intra_ns, m->alpha_inter_ns) : m->alpha_intra_ns;
  if (algo == DCCL_ALGO_TREE) {
    double chunks = at_least_one(s / 2 / channels / m->chunk_bytes);
    /* From the root to the deepest leaf: every host level is crossed head to tail (its heap's depth), one hop
     * between levels. Up and down. */
    double host_levels = dccl_tree_depth(m->nhosts) + 1;
    double latency = 2 * host_levels * dccl_tree_depth(m->ranks_per_host) * m->alpha_intra_ns +
                     2 * dccl_tree_depth(m->nhosts) * m->alpha_inter_ns + chunks * slowest;
    double intra = g > 1 ? m->tree_inner_moves * s / m->bw_intra : 0;
    double inter = h > 1 ? 2 * s / (min2(nics, 2 * channels) * m->bw_nic) : 0;
    return latency + max2(intra, inter);
  }
  double loops = at_least_one(s / (n * channels * m->chunk_bytes));
  double per_rank = 2 * s * (n - 1) / n;
  double intra = g > 1 ? per_rank / m->bw_intra : 0;
  double inter = h > 1 ? per_rank / (min2(nics, channels) * m->bw_nic) : 0;
  return (2 * n - 2 + loops) * slowest + max2(intra, inter);
}

double dccl_model_busbw(double bytes, double ns, int nranks) {
  return ns > 0 && nranks > 0 ? bytes / ns * 2.0 * (nranks - 1) / nranks : 0;
}
