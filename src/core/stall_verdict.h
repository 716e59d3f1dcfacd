/* What a stall report judges, apart from how the ranks' states are gathered (core/stall_report.c): the line that
 * describes each rank, the contradiction that fails a call on every rank, and its text. Pure functions of the
 * states (struct dccl_stall_status, bootstrap/bootstrap.h), so a unit test can hand them any picture. */
#ifndef DCCL_CORE_STALL_VERDICT_H_
#define DCCL_CORE_STALL_VERDICT_H_

#include <stddef.h>

#include "bootstrap/bootstrap.h"

/* One rank's line of a report. */
void dccl_stall_describe(const struct dccl_stall_status *s, char *out, size_t len);
/* 1 with `pair` set where two ranks in the same collective (one sequence number) contradict each other: different
 * kinds or arguments, or one waiting in the ranks' meeting while the other's kernels run the same call unmet
 * (they disagree on whether its buffers are registered or in windows; no correct program shows it, since a rank
 * that left the meeting had every record, so none still waits in it). */
int dccl_stall_contradiction(const struct dccl_stall_status *all, int n, struct dccl_stall_status pair[2]);
/* The error a contradiction gives every rank. */
void dccl_stall_verdict_text(const struct dccl_stall_status p[2], char *text, size_t len);
/* Both of the pair in one collective: every rank can fail it and keep the communicator (core/mismatch_drain.c). */
int dccl_stall_same_collective(const struct dccl_stall_status p[2]);

#endif
