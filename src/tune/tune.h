/* The cost model: picks ring, tree or one-shot per call from two constants measured on this machine at creation
 * (all-reduce chooses among the three; the other collectives run on rings). It sees the communicator only through
 * the collectives' view and runs no collective. */
#ifndef DCCL_TUNE_H_
#define DCCL_TUNE_H_

#include <stddef.h>

#include "collectives/coll_comm.h"

/* This rank's measurements (probe.c), DCCL_TUNE_PROBE_FIELDS of them: mine[0] the time of one step over ring 0's
 * links in ns (every rank hands a token on at once, so a step lasts as long as the slowest hand-off), mine[1] the
 * copy bandwidth in bytes/ns (on an oversubscribed host measured by its lowest rank only), mine[2] and mine[3] the
 * mean time this rank sent and received the timed tokens (this host's monotonic clock, in ns): the s-th token a
 * rank sends is its neighbour's s-th received, so two ranks of one host time the hand-off between them; mine[4],
 * on several hosts, the bytes/ns of a ring step of full slots (the slowest link's, copies included). 0 where not
 * measured, and for a constant the environment overrides. Every rank of c calls it at once. */
#define DCCL_TUNE_PROBE_FIELDS 5
ncclResult_t dccl_tune_probe(struct dccl_coll_comm *c, double mine[DCCL_TUNE_PROBE_FIELDS]);
/* Sets c's constants from every rank's probe (`all`: nranks x DCCL_TUNE_PROBE_FIELDS): the slowest rank's step,
 * copy and ring-step rate between hosts (a bandwidth of 0 was not measured), and the slowest hand-off between ring neighbours of one host (their
 * clocks agree; the step where ring 0 has none), so every rank picks the same algorithm. DCCL_TUNE_ALPHA_NS /
 * DCCL_TUNE_BW_MBPS override them. */
void dccl_tune_agree(struct dccl_coll_comm *c, const double *all);
/* Predicted time in ns of an all-reduce of `bytes` with algo (DCCL_ALGO_RING, _TREE or _ONESHOT). */
double dccl_tune_predict_ns(const struct dccl_coll_comm *c, int algo, size_t bytes);
/* The algorithm DCCL_ALGO forces, or DCCL_ALGO_AUTO. */
int dccl_tune_forced_algo(void);
/* The algorithm for a collective of kind (enum dccl_op_kind) moving `bytes`: DCCL_ALGO if set, else the model. */
int dccl_tune_algo(const struct dccl_coll_comm *c, int kind, size_t bytes);
/* The protocol for a collective of kind moving `bytes`: DCCL_PROTO if set, else the model (tune.c). */
int dccl_tune_proto(const struct dccl_coll_comm *c, int kind, size_t bytes);

#endif
