/* The two-level cost model (src/tune/model.c) and its use by the live model for ranks on several hosts. */
#include <math.h>
#include <stdlib.h>

#include "tune/model.h"
#include "tune/tune.h"
#include "unit_check.h"

static int near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b); }

int main(void) {
  unsetenv("DCCL_ALGO");
  unsetenv("DCCL_CHUNK_SIZE");
  const double chunk = 262144, mib = 1024.0 * 1024, gib = 1024 * mib;

  /* One host: the ring is the one-level formula the live model uses. */
  struct dccl_coll_comm one = {.nranks = 4, .nhosts = 1, .ranks_per_host = 4, .alpha_ns = 700, .bw_bytes_per_ns = 5};
  struct dccl_model flat = {.nhosts = 1, .ranks_per_host = 4, .nics_per_host = 1, .nchannels = 1,
                            .chunk_bytes = chunk, .alpha_intra_ns = 700, .bw_intra = 5, .tree_inner_moves = 3,
                            .alpha_inter_ns = 700, .bw_nic = 5};
  double sizes[] = {8, 64 * 1024, mib, 256 * mib};
  for (int i = 0; i < 4; i++)
    check(near(dccl_model_allreduce_ns(&flat, DCCL_ALGO_RING, sizes[i]),
               dccl_tune_predict_ns(&one, DCCL_ALGO_RING, (size_t)sizes[i]), 1e-12),
          "one host, %.0f B: the ring matches the one-level model", sizes[i]);

  /* Large sizes between hosts: the ring's bus bandwidth tends to the narrower of the NICs and the host's links. */
  struct dccl_model net = {.nhosts = 2, .ranks_per_host = 8, .nics_per_host = 1, .nchannels = 8,
                           .chunk_bytes = chunk, .alpha_intra_ns = 1000, .bw_intra = 370, .tree_inner_moves = 2,
                           .alpha_inter_ns = 5000, .bw_nic = 49};
  double bus = dccl_model_busbw(gib, dccl_model_allreduce_ns(&net, DCCL_ALGO_RING, gib), 16);
  check(bus < 49 && bus > 0.98 * 49, "2 hosts, 1 NIC: ring busbw %.1f GB/s, just under the NIC's 49", bus);
  net.nics_per_host = 8;
  bus = dccl_model_busbw(gib, dccl_model_allreduce_ns(&net, DCCL_ALGO_RING, gib), 16);
  check(bus < 370 && bus > 0.9 * 370, "2 hosts, 8 NICs: ring busbw %.1f GB/s, under the host links' 370", bus);
  net.nchannels = 2;
  double two = dccl_model_busbw(gib, dccl_model_allreduce_ns(&net, DCCL_ALGO_RING, gib), 16);
  check(two < 2 * 49 && two > 0.95 * 2 * 49, "8 NICs but 2 rings: %.1f GB/s, two NICs' worth", two);

  /* Many hosts, small sizes: the tree's depth beats the ring's 2N-2 steps. */
  net.nhosts = 64;
  net.nchannels = 8;
  check(dccl_model_allreduce_ns(&net, DCCL_ALGO_TREE, mib) < dccl_model_allreduce_ns(&net, DCCL_ALGO_RING, mib) / 10,
        "64 hosts, 1 MiB: the tree is over ten times faster than the ring");

  /* The tree's hand-offs: 4 hosts of 4 ranks, depth(4) = 2: root to deepest leaf crosses 3 host heaps (2 hand-offs
   * each) and 2 network hops; up and down; one chunk. */
  struct dccl_model t = {.nhosts = 4, .ranks_per_host = 4, .nics_per_host = 1, .nchannels = 1, .chunk_bytes = chunk,
                         .alpha_intra_ns = 100, .bw_intra = 1e9, .tree_inner_moves = 3, .alpha_inter_ns = 1000,
                         .bw_nic = 1e9};
  double want = 2 * 3 * 2 * 100 + 2 * 2 * 1000 + 1 * 1000;
  check(near(dccl_model_allreduce_ns(&t, DCCL_ALGO_TREE, 8), want, 1e-6), "tree latency %.0f ns, want %.0f",
        dccl_model_allreduce_ns(&t, DCCL_ALGO_TREE, 8), want);

  /* The live model on 8 hosts of 8 ranks: the tree for small all-reduces, the ring for large ones, and the same
   * prediction as the two-level model with this machine's constants for both links. */
  struct dccl_coll_comm hosts = {.nranks = 64, .nhosts = 8, .ranks_per_host = 8, .alpha_ns = 2000,
                                 .bw_bytes_per_ns = 5};
  check(dccl_tune_algo(&hosts, DCCL_OP_ALLREDUCE, 64 * 1024) == DCCL_ALGO_TREE, "8 x 8 ranks, 64 KiB: tree");
  check(dccl_tune_algo(&hosts, DCCL_OP_ALLREDUCE, (size_t)gib) == DCCL_ALGO_RING, "8 x 8 ranks, 1 GiB: ring");
  struct dccl_model live = {.nhosts = 8, .ranks_per_host = 8, .nics_per_host = 1, .nchannels = 1, .chunk_bytes = chunk,
                            .alpha_intra_ns = 2000, .bw_intra = 5, .tree_inner_moves = 3, .alpha_inter_ns = 2000,
                            .bw_nic = 5};
  check(near(dccl_tune_predict_ns(&hosts, DCCL_ALGO_TREE, (size_t)mib), dccl_model_allreduce_ns(&live, DCCL_ALGO_TREE, mib),
             1e-12),
        "8 x 8 ranks: the live tree prediction is the two-level model's");
  /* The measured constants: 4 ranks on 2 hosts, ring 0 in rank order. The step (2000 ns) is the slowest hop's;
   * neighbours of one host time their hand-off from the mean send and receive times of the timed tokens (rank 0
   * to 1: 300 ns, rank 2 to 3: 400 ns); hops between hosts (other clocks) are not compared. */
  unsetenv("DCCL_TUNE_ALPHA_NS");
  unsetenv("DCCL_TUNE_BW_MBPS");
  struct dccl_peer_info peers[4] = {{.host_hash = 1, .real_host_hash = 9}, {.host_hash = 1, .real_host_hash = 9},
                                    {.host_hash = 2, .real_host_hash = 9}, {.host_hash = 2, .real_host_hash = 9}};
  int order[4] = {0, 1, 2, 3};
  struct dccl_coll_comm agreed = {.nranks = 4, .peers = peers, .nhosts = 2, .ranks_per_host = 2};
  agreed.rings[0].order = order;
  double all[4 * DCCL_TUNE_PROBE_FIELDS] = {
      1900, 5, 1000, 9e9, 1.5,  /* rank 0: sent at 1000 on average; its receives come from rank 3 (another host) */
      2000, 4, 5000, 1300, 1.2, /* rank 1: received rank 0's at 1300 */
      1950, 5, 100, -7e9, 0,    /* rank 2: its receives come from rank 1 (another host, another clock) */
      1990, 5, 8000, 500, 1.4}; /* rank 3: received rank 2's at 500 */
  dccl_tune_agree(&agreed, all);
  check(agreed.alpha_ns == 2000 && agreed.bw_bytes_per_ns == 4, "the slowest step and copy: %.0f ns, %.1f",
        agreed.alpha_ns, agreed.bw_bytes_per_ns);
  check(agreed.bw_net_bytes_per_ns == 1.2, "the slowest ring step between hosts (0: not measured): %.1f",
        agreed.bw_net_bytes_per_ns);
  /* The live model charges the network at that rate: with a slow network the ring's time grows. */
  struct dccl_coll_comm slow_net = agreed;
  slow_net.alpha_intra_ns = 400;
  double with_net = dccl_tune_predict_ns(&slow_net, DCCL_ALGO_RING, (size_t)gib);
  slow_net.bw_net_bytes_per_ns = 0;
  double copy_only = dccl_tune_predict_ns(&slow_net, DCCL_ALGO_RING, (size_t)gib);
  check(with_net > 3 * copy_only, "a 1.2 GB/s network (vs 4 GB/s copies) makes the ring's 1 GiB over three times "
        "slower: %.0f against %.0f ns", with_net, copy_only);
  check(agreed.alpha_intra_ns == 400, "the slowest hand-off inside a host: %.0f ns, want 400", agreed.alpha_intra_ns);
  peers[1].real_host_hash = 8; /* rank 1 on another machine: its clock says nothing about rank 0's */
  dccl_tune_agree(&agreed, all);
  check(agreed.alpha_intra_ns == 400, "pairs on different machines are not compared: %.0f", agreed.alpha_intra_ns);
  peers[3].host_hash = 3;
  dccl_tune_agree(&agreed, all);
  check(agreed.alpha_intra_ns == 2000, "no pair inside a host: the step (%.0f)", agreed.alpha_intra_ns);
  printf("test_tune_model: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
