/* The cost model for ranks on several hosts: an all-reduce's time from the job's shape and the constants of its
 * two kinds of link (inside a host, between hosts). Pure arithmetic, so the same code predicts a live
 * communicator's choice and the table of clusters nobody here has (perf/model_table, docs/rdma.md). */
#ifndef DCCL_TUNE_MODEL_H_
#define DCCL_TUNE_MODEL_H_

struct dccl_model {
  int nhosts, ranks_per_host; /* ranks_per_host: the busiest host's */
  int nics_per_host;          /* network links a host's rings and trees spread over */
  int nchannels;              /* rings (and tree pairs) running at once */
  double chunk_bytes;         /* a pipeline step's payload */
  double alpha_intra_ns;      /* one hand-off between ranks of a host */
  double bw_intra;            /* bytes/ns one rank moves to its neighbour in a host (its link or its copies) */
  double tree_inner_moves;    /* bytes an inner tree rank moves per input byte: 3 where ranks copy (host memory:
                               * two inputs and its own), 2 where links limit (a GPU's link carries 2S each way) */
  double alpha_inter_ns;      /* one hand-off between hosts */
  double bw_nic;              /* bytes/ns one NIC moves each way */
};

/* Predicted ns of an all-reduce of `bytes` with algo (DCCL_ALGO_RING or DCCL_ALGO_TREE):
 *   ring: one ring per channel through every rank, each host's ranks contiguous, so each ring leaves and enters
 *         every host once. 2N-2 steps plus the pipeline's loops, each as slow as the ring's slowest hand-off. A
 *         rank sends 2S(N-1)/N bytes to its neighbour; a host sends the same over min(NICs, channels) NICs.
 *   tree: two levels, as collectives/plan.c builds them: a binary heap of each host's ranks, and a heap of the
 *         hosts in which a host's head hangs under its parent host's tail; two such trees (each host inner in one,
 *         a leaf in the other), each carrying half the data. Root to deepest leaf crosses (depth(H) + 1) host
 *         heaps of depth(G) hand-offs and depth(H) network hops, up and down, plus the chunks. A rank moves
 *         tree_inner_moves x S; a host sends about 2S over min(NICs, 2 x channels) NICs.
 * The time is the latency plus the larger of the two links' transfer times (they overlap). */
double dccl_model_allreduce_ns(const struct dccl_model *m, int algo, double bytes);

/* Bus bandwidth (nccl-tests' convention) of an all-reduce of `bytes` that takes `ns` on n ranks: the bytes every
 * rank's link moves in a ring, 2S(N-1)/N, over the time, in bytes/ns (GB/s). */
double dccl_model_busbw(double bytes, double ns, int nranks);

#endif
