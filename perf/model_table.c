/* What DCCL's two-level cost model (src/tune/model.c) predicts for clusters nobody here has: all-reduce bus
 * bandwidth and the time of 1 GiB on 2, 8 and 64 hosts of 8 GPUs with 1 and 8 NICs of 400 Gb/s, ring and tree,
 * beside NCCL's published per-NIC figure. Prints a markdown table (docs/rdma.md).
 *
 * Usage: model_table [alpha_intra_us alpha_inter_us intra_GBps]
 * The constants are stated, not measured here: a NIC moves 400 Gb/s x 97.9% (a 256 KiB slot's payload share of
 * the wire on RoCEv2 with a 4096-byte MTU: headers, credit and ACKs, docs/rdma.md section 3); inside a host a rank moves 370 GB/s to its neighbour (NCCL's ring busbw on 8 H100s
 * over NVLink, issue 13), a tree's inner rank 2 S (its link, not copies, is the limit); a hand-off costs 1 us
 * inside a host and 5 us between hosts (defaults). */
#include <stdio.h>
#include <stdlib.h>

#include "collectives/coll_comm.h"
#include "tune/model.h"

#define NCCL_PER_NIC_LOW 46.0 /* GB/s per 400G NIC, all-reduce busbw over NICs per node (nccl-tests#290) */
#define NCCL_PER_NIC_HIGH 48.0

int main(int argc, char **argv) {
  double alpha_intra_us = argc > 1 ? atof(argv[1]) : 1.0, alpha_inter_us = argc > 2 ? atof(argv[2]) : 5.0;
  double intra_gbps = argc > 3 ? atof(argv[3]) : 370.0;
  const double nic = 400e9 / 8 / 1e9 * 0.979; /* bytes/ns: a 256 KiB slot's share of the wire (docs/rdma.md, 3.) */
  const double gib = 1024.0 * 1024 * 1024;
  printf("constants: NIC %.2f GB/s each way, intra %.0f GB/s, hand-off %.1f us inside a host, %.1f us between\n\n",
         nic, intra_gbps, alpha_intra_us, alpha_inter_us);
  printf("| hosts x GPUs | NICs/host | algorithm | busbw 1 GiB (GB/s) | per NIC | NCCL per NIC | ratio | 1 GiB time (ms) "
         "| busbw 64 MiB | busbw 1 MiB |\n");
  printf("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  static const int hosts[] = {2, 8, 64}, nics[] = {1, 8};
  for (int h = 0; h < 3; h++)
    for (int k = 0; k < 2; k++)
      for (int a = 0; a < 2; a++) {
        int algo = a ? DCCL_ALGO_TREE : DCCL_ALGO_RING;
        struct dccl_model m = {.nhosts = hosts[h], .ranks_per_host = 8, .nics_per_host = nics[k], .nchannels = 8,
                               .chunk_bytes = 262144, .alpha_intra_ns = alpha_intra_us * 1000,
                               .bw_intra = intra_gbps, .tree_inner_moves = 2, .alpha_inter_ns = alpha_inter_us * 1000, .bw_nic = nic};
        int n = hosts[h] * 8;
        double t = dccl_model_allreduce_ns(&m, algo, gib);
        double bus = dccl_model_busbw(gib, t, n);
        double bus64 = dccl_model_busbw(64.0 * 1024 * 1024, dccl_model_allreduce_ns(&m, algo, 64.0 * 1024 * 1024), n);
        double bus1 = dccl_model_busbw(1024.0 * 1024, dccl_model_allreduce_ns(&m, algo, 1024.0 * 1024), n);
        double per_nic = bus / nics[k];
        printf("| %d x 8 | %d | %s | %.1f | %.1f | %.0f-%.0f | %.2f-%.2f | %.2f | %.1f | %.1f |\n", hosts[h], nics[k],
               a ? "tree" : "ring", bus, per_nic, NCCL_PER_NIC_LOW, NCCL_PER_NIC_HIGH, per_nic / NCCL_PER_NIC_HIGH,
               per_nic / NCCL_PER_NIC_LOW, t / 1e6, bus64, bus1);
      }
  return 0;
}
