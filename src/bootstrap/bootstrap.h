/* Out-of-band rank discovery and small messages, used at communicator creation and for connection setup.
 *
 * TCP: ncclGetUniqueId picks an interface (DCCL_SOCKET_IFNAME or automatic), starts a rendezvous thread listening
 * there, and writes into the 128-byte id the listener's address, a random 128-bit secret and a magic. Every rank
 * connects to that address, presents the secret, sends its own listener address, and receives the whole table.
 * A connection without the secret is closed and logged; it never crashes or stalls the rendezvous. After that
 * the ranks talk to each other directly (send/recv by rank and tag, all-gather, barrier); the rendezvous thread
 * exits once all ranks have been served (or after DCCL_BOOTSTRAP_TIMEOUT). */
#ifndef DCCL_BOOTSTRAP_H_
#define DCCL_BOOTSTRAP_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "dccl.h"

struct dccl_bootstrap;

/* Creates a new id and its rendezvous thread in this process. */
ncclResult_t dccl_bootstrap_create_id(ncclUniqueId *id);
/* Checks that bytes look like an id made by dccl_bootstrap_create_id (magic); InvalidArgument otherwise. */
ncclResult_t dccl_bootstrap_check_id(const ncclUniqueId *id);

/* Joins the ranks of `id`. Blocks until all `nranks` ranks have joined (or the bootstrap timeout). `abort_flag`,
 * if not NULL, is polled: a nonzero value makes a blocked call return ncclRemoteError. */
ncclResult_t dccl_bootstrap_init(const ncclUniqueId *id, int rank, int nranks, _Atomic int *abort_flag,
                                 struct dccl_bootstrap **out);
/* A bootstrap for a subset of the ranks of `parent`: `members[i]` is the parent rank of new rank i. Every member
 * calls it with the same `members`; collective over the members only. */
ncclResult_t dccl_bootstrap_split(struct dccl_bootstrap *parent, int new_rank, int new_nranks, const int *members,
                                  struct dccl_bootstrap **out);

/* Points a bootstrap at the flag that interrupts its blocking calls (a split's bootstrap is made before its
 * communicator's flag exists). */
void dccl_bootstrap_set_abort_flag(struct dccl_bootstrap *b, _Atomic int *abort_flag);

/* data holds nranks * size bytes; this rank's block is at rank * size. On return every block is filled. */
ncclResult_t dccl_bootstrap_allgather(struct dccl_bootstrap *b, void *data, size_t size);
ncclResult_t dccl_bootstrap_barrier(struct dccl_bootstrap *b);
/* Point to point: messages are matched by (peer, tag), in order per (peer, tag). send never waits for the peer
 * to call recv (small messages). */
ncclResult_t dccl_bootstrap_send(struct dccl_bootstrap *b, int peer, uint32_t tag, const void *data, size_t size);
ncclResult_t dccl_bootstrap_recv(struct dccl_bootstrap *b, int peer, uint32_t tag, void *data, size_t size);
/* recv that gives up at deadline_ns (dccl_now_ns's clock) with *timed_out = 1 and nothing taken, so the caller can
 * do something else and wait again (DCCL_TIMEOUT, when set and sooner, still ends it as an error). */
ncclResult_t dccl_bootstrap_recv_by(struct dccl_bootstrap *b, int peer, uint32_t tag, void *data, size_t size,
                                    int64_t deadline_ns, int *timed_out);

/* Liveness. Every rank keeps one connection to rank 0; a monitor thread per rank sleeps in poll() on it (so an
 * idle communicator costs no CPU). When a rank's process ends without saying goodbye, rank 0 notices the EOF and
 * tells every other rank; a rank that loses rank 0 concludes rank 0 died. `on_death(arg, dead_rank)` is called
 * once, from the monitor thread. */
ncclResult_t dccl_bootstrap_monitor_start(struct dccl_bootstrap *b, void (*on_death)(void *arg, int dead_rank),
                                          void *arg);
/* Stall reports. A rank whose wait makes no progress asks (dccl_bootstrap_ask_stall_report, from any thread);
 * rank 0's monitor thread then asks every rank's monitor thread what its rank is doing (`status`), gives all the
 * answers to `judge` (which logs the report and says whether two ranks' calls contradict each other), and if they
 * do, sends that pair to every rank, whose monitor thread calls `verdict`. `tick` (optional) lets a rank note
 * work no thread of its own waits for (kernels): the monitor thread calls it as it starts, at every wakeup, and
 * after the milliseconds it returns (-1: not before dccl_bootstrap_wake_monitor). All hooks run on monitor threads. */
struct dccl_stall_status { /* what a rank is doing; the meaning of the fields is the hooks' */
  int32_t rank, in_call, waiting_on;
  uint32_t kind, what;
  int32_t root;
  uint64_t seq, count, next_seq, stalled_ms;
  int32_t seen_by;   /* in a verdict: -1, found by a stall report; else the rank whose slot check found it */
  int32_t on_device; /* 1: the call runs in kernels (no host thread waits in it); 2: a device call's host thread
                      * waits in the ranks' meeting before its kernels */
};
struct dccl_stall_hooks {
  void (*status)(void *arg, struct dccl_stall_status *out);
  int (*judge)(void *arg, const struct dccl_stall_status *all, int n, struct dccl_stall_status pair[2]);
  void (*verdict)(void *arg, const struct dccl_stall_status pair[2]);
  int (*tick)(void *arg);
  void *arg;
};
/* Before dccl_bootstrap_monitor_start. */
void dccl_bootstrap_set_stall_hooks(struct dccl_bootstrap *b, const struct dccl_stall_hooks *hooks);
void dccl_bootstrap_ask_stall_report(struct dccl_bootstrap *b);
/* Wakes the monitor thread to call `tick` (from any thread; one eventfd write). */
void dccl_bootstrap_wake_monitor(struct dccl_bootstrap *b);
/* Sends a contradiction found elsewhere (a slot's header) to every rank, whose monitor thread calls `verdict`:
 * through rank 0, one hop for everyone. From any thread; never blocks. */
void dccl_bootstrap_send_verdict(struct dccl_bootstrap *b, const struct dccl_stall_status pair[2]);
/* Clean departure: tells rank 0 this rank is leaving on purpose, so its EOF is not a death. */
void dccl_bootstrap_say_goodbye(struct dccl_bootstrap *b);
/* Stops the monitor thread and closes everything; never blocks on a peer. */
void dccl_bootstrap_close(struct dccl_bootstrap *b);

int dccl_bootstrap_rank(const struct dccl_bootstrap *b);
int dccl_bootstrap_nranks(const struct dccl_bootstrap *b);

#endif
