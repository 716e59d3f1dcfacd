/* The communicator. */
#ifndef DCCL_COMM_H_
#define DCCL_COMM_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bootstrap/bootstrap.h"
#include "collectives/coll_comm.h"
#include "collectives/device/dev_work.h"
#include "core/comm_config.h"
#include "dccl.h"
#include "transports/transport.h"

/* The communicator's internal name; the struct is the one behind the public ncclComm_t handle. */
#define dccl_comm ncclComm

#define DCCL_COMM_MAGIC 0x6463636c636f6d6dull /* "dcclcomm" */
/* A cached connection: (peer, direction, lane) -> conn (lanes: collectives/coll_comm.h). */
struct dccl_conn_entry {
  int peer, is_send, lane;
  struct dccl_conn conn;
  struct dccl_conn_entry *next;
};

struct dccl_redop_entry {
  int in_use;
  ncclDataType_t type;
  unsigned char raw[8]; /* the premultiplier, stored in the op's type */
  const void *dev_scalar; /* or, ncclScalarDevice in GPU memory: where kernels read it as each operation runs */
};
#define DCCL_MAX_USER_OPS 64

struct dccl_comm {
  uint64_t magic;
  int rank, nranks;
  /* 1 + the rank whose DCCL_HOSTID list entry names this rank's pretend host; 0: its own rank. A split keeps its
   * parent's, so a rank stays on its pretend host whatever its rank in the child. */
  int hostid_entry;
  /* The GPU this rank was created for: the calling thread's current device at the creating call (InitAll: its
   * device list); -1 for none. Captured at the call, since creation may run on another thread. */
  int cuda_device;
  void *cu_ctx; /* cuda_device's primary context, retained for the communicator's life; NULL without a device */
  int device_links; /* 1: every pair of ranks has device links (lanes from DCCL_LANE_DEVICE), made at creation */
  /* The config it was created with (a split with a NULL config inherits it). */
  struct dccl_comm_config config;
  pid_t creator_pid; /* a forked child sees another pid and refuses the communicator */
  int64_t created_ns; /* when creation began (dccl_now_ns), for the log of its phases */
  struct dccl_bootstrap *bootstrap;
  struct dccl_peer_info *peers; /* nranks entries */
  int nhosts;                   /* distinct host_hash values */
  int ranks_per_host;           /* the busiest host's ranks */

  /* Lazily made connection cache: a list that only grows until destroy. Lookups are lock-free (the head is
   * published with release after the entry is complete); conn_lock orders insertions against an abort from
   * another thread walking the list. */
  _Atomic(struct dccl_conn_entry *) conns;
  pthread_mutex_t conn_lock;
  /* Progresses the device links a network transport carries (core/device_pump.c); made with the first of them
   * (under conn_lock), NULL until then. */
  struct dccl_link_pump *pump;

  uint64_t coll_seq; /* collectives issued so far: every rank issues the same sequence */
  uint64_t *p2p_send_seq, *p2p_recv_seq; /* per peer */

  struct dccl_redop_entry user_ops[DCCL_MAX_USER_OPS];

  /* More ranks on this host than processing units: waits yield at once instead of spinning. */
  int oversubscribed;

  /* What transports and collectives see of this communicator (filled by dccl_comm_fill_views). */
  struct dccl_transport_ctx tctx;
  struct dccl_coll_comm coll;

  /* Failure state. async_error is what ncclCommGetAsyncError reports; readable from any thread. */
  _Atomic int async_error;
  _Atomic int abort_flag;    /* nonzero: every wait stops */
  /* ncclCommRevoke, or a shrink with NCCL_SHRINK_ABORT, stopped every operation (abort_flag): calls are refused,
   * the stopped operations' failures are not the communicator's, and only management calls work on it. */
  _Atomic int revoked;
  _Atomic int dead_rank;    /* -1, or the rank whose death was reported */
  char error_text[512];
  pthread_mutex_t error_lock;

  /* What this rank waits on, for stall reports (core/stall_report.c). */
  pthread_mutex_t stall_lock;
  struct dccl_stall_status stall_now; /* the operation a wait last reported stalling, as of stall_seen_ns */
  int64_t stall_seen_ns;
  uint64_t stall_asked_seq;  /* the operation a report was last asked for (seq + 1; 0: none) */
  uint64_t stall_report_sig; /* rank 0: the last report logged, so a stall is reported once */
  _Atomic int stall_ticking;  /* the monitor will look at the kernels again without being woken */
  int stall_created;          /* creation has returned: a verdict fails the communicator at once */
  int stall_has_pending;      /* a verdict that arrived while creation's last barrier ran, applied after it */
  struct dccl_stall_status stall_pending[2];
  /* A mismatch in one collective that every rank can leave (core/mismatch_drain.c): set by a verdict, cleared once
   * the ranks have drained their collective links. drain_seq and drain_text are under stall_lock. */
  _Atomic int drain_pending;
  uint64_t drain_seq;      /* the collective every rank fails */
  uint64_t drained_before; /* verdicts about collectives below this were settled (late copies are ignored) */
  char drain_text[400];

  /* Ranges the user registered (ncclCommRegister): transports may read them in place (zero-copy). */
  pthread_mutex_t reg_lock;
  struct dccl_reg_handle *regs;
  _Atomic int nregs; /* lets the per-step lookup skip the lock when nothing is registered */

  /* Windows (ncclCommWindowRegister, core/comm_window.c): all of them, and the mapped ones by their slot (window
   * i on every rank). */
  struct dccl_window *window_list;
  struct dccl_window *windows[DCCL_MAX_WINDOWS];
  struct dccl_lazy_map *lazy; /* implicit windows: buffers mapped on first use (core/comm_lazy_map.h) */

  int finalized, destroyed;

  /* Nonblocking communicators (config.blocking = 0): creation runs on a thread of its own, and a progress thread
   * (src/core/progress_thread.c) runs the host-buffer operations callers post. */
  int nonblocking;
  _Atomic int init_state;   /* enum dccl_init_state */
  _Atomic int splits_running; /* nonblocking splits or shrinks of this (parent) communicator still running */
  pthread_t progress_thread;
  int progress_started;
};

enum dccl_init_state { DCCL_INIT_READY = 0, DCCL_INIT_PENDING, DCCL_INIT_FAILED };

/* Device links over a network transport (core/device_pump.c): the pump moves their bytes, since only kernels
 * wait on them. pump_link adds a made link (a no-op for others); launched follows a launch (captured or not);
 * stop runs once the communicator's kernels are done, before its links close, and first moves out what its send
 * links still hold. */
ncclResult_t dccl_comm_pump_link(struct dccl_comm *comm, struct dccl_conn *c);
void dccl_comm_pump_launched(struct dccl_comm *comm);
void dccl_comm_pump_stop(struct dccl_comm *comm);

/* Starts the progress thread of a nonblocking communicator; from then on it owns comm->coll.queue. */
ncclResult_t dccl_progress_thread_start(struct dccl_comm *comm);
/* Waits until the communicator's posted operations are done (or failed), then stops the thread. */
void dccl_progress_thread_stop(struct dccl_comm *comm);

/* The communicator behind a view it embeds. */
static inline struct dccl_comm *dccl_comm_of_coll(struct dccl_coll_comm *c) {
  return (struct dccl_comm *)((char *)c - offsetof(struct dccl_comm, coll));
}
static inline struct dccl_comm *dccl_comm_of_tctx(const struct dccl_transport_ctx *t) {
  return (struct dccl_comm *)((char *)t - offsetof(struct dccl_comm, tctx));
}
/* Fills the views from the communicator once its peers, rings and oversubscription are known (comm_views.c). */
void dccl_comm_fill_views(struct dccl_comm *comm);

/* 1 when [ptr, ptr+bytes) lies inside one range registered on comm (src/core/comm_register.c). */
int dccl_comm_is_registered(struct dccl_comm *comm, const void *ptr, uint64_t bytes);
/* Frees the handles the user did not deregister (at destroy). */
void dccl_comm_free_registrations(struct dccl_comm *comm);
/* The mapped window holding [ptr, ptr+bytes) (its slot), or -1 (src/core/comm_window.c). */
int dccl_comm_window_of(const struct dccl_comm *comm, const void *ptr, size_t bytes);
/* Unmaps and frees the windows the user did not deregister (at destroy, once no kernel runs). */
void dccl_comm_free_windows(struct dccl_comm *comm);

/* Validates a user's handle: NULL, destroyed, or used in a forked child are refused with a reason. */
ncclResult_t dccl_comm_check(struct dccl_comm *comm, const char *call);

/* The connection for (peer, direction, lane), or NULL if not connected yet. */
struct dccl_conn *dccl_comm_find_conn(struct dccl_comm *comm, int peer, int is_send, int lane);

/* Connects every link in reqs that is not connected yet. Every rank named must call it with the mirror request
 * (its own is_send flipped) in the same batch; it exchanges setup info over the bootstrap. */
ncclResult_t dccl_comm_connect(struct dccl_comm *comm, const struct dccl_conn_req *reqs, int n);
/* The links several communicators need, made together (one thread may drive communicators of one job). */
struct dccl_conn_batch {
  struct dccl_comm *comm;
  const struct dccl_conn_req *reqs;
  int n;
};
ncclResult_t dccl_connect_many(const struct dccl_conn_batch *batches, int nbatches);

/* 1 when every pair of ranks has a transport for device links, and then *over_network says whether some pair's is
 * a network transport (from the peer infos and the environment alone: every rank gives the same answers). */
int dccl_comm_device_links(struct dccl_comm *comm, int *over_network);
/* 0 when DCCL_TRANSPORT forces device links through another transport than p2p (the staged path, sockets): then
 * no rank maps another's GPU memory, for the direct algorithms neither. */
int dccl_device_mapping_allowed(void);
/* Point-to-point links ahead of use (p2p_links.c). Under DCCL_RUNTIME_CONNECT=0 appends the links to every peer
 * to reqs (capacity *cap, grown with realloc; count *n), for creation to make; nothing otherwise. */
ncclResult_t dccl_p2p_creation_links(const struct dccl_comm *comm, struct dccl_conn_req **reqs, int *n, int *cap);
/* Before a send (kind DCCL_OP_SEND) or receive is queued: refused with ncclInvalidUsage, naming the peer and how
 * to connect it first, when one of its links (a channel each, for `bytes`) does not exist yet and capturing(stream)
 * says the stream is being captured into a CUDA graph (asked only then; dccl_cuda_stream_capturing in production). */
ncclResult_t dccl_p2p_check_first_use(struct dccl_comm *comm, int kind, int peer, int on_device, uint64_t bytes,
                                      cudaStream_t stream, int (*capturing)(cudaStream_t));

/* Rewrites the last error of a failed `what` (e.g. "ncclAllReduce #41") so it names the rank that died, when the
 * monitor reports one within a short grace period, else the peer waited for (-1: none). Returns r. */
ncclResult_t dccl_comm_explain_failure(struct dccl_comm *comm, ncclResult_t r, const char *what, int peer);

/* Records a failure on the communicator (first one wins), sets the abort flag, and tells the peers' FIFOs. */
void dccl_comm_set_failed(struct dccl_comm *comm, ncclResult_t code, const char *text);
/* ncclCommRevoke's stop: every wait ends, kernels exit, the peers' links are told; no failure is recorded. */
void dccl_comm_revoke(struct dccl_comm *comm);
/* Whether no operation of the communicator runs any more: none posted to its progress thread, no kernel, and no
 * thread inside a call on it (ops out of the pool). */
int dccl_comm_quiescent(struct dccl_comm *comm);
/* `res` of a wait that the communicator's failure may have ended (a peer's death, mismatched calls; its text is
 * written before the flag): that failure where there is one and the wait failed, else `res`. */
ncclResult_t dccl_comm_failure_over(struct dccl_comm *comm, ncclResult_t res);
/* Stall reports (core/stall_report.c): a wait's note (the coll view's `waiting`), and the bootstrap's hooks. */
void dccl_stall_note(struct dccl_comm *comm, const struct dccl_slot_header *call, int peer, uint64_t idle_ns);
/* A device call's host thread waiting for `peer` in a meeting before its kernels (core/comm_board.h): a verdict
 * about it fails the communicator, as for calls in kernels. */
void dccl_stall_note_meeting(struct dccl_comm *comm, const struct dccl_slot_header *call, int peer, uint64_t idle_ns);
void dccl_stall_hooks_of(struct dccl_comm *comm, struct dccl_stall_hooks *hooks);
/* After a kernel launch: the monitor thread notes the kernels while they run (core/stall_report.c). */
void dccl_stall_launched(struct dccl_comm *comm);
/* Creation is done: a verdict that came during its last steps now fails the communicator. */
void dccl_stall_created(struct dccl_comm *comm);
/* A slot check found `peer`'s call (`theirs`) different from this rank's (`mine`): every rank is told; returns
 * ncclInvalidUsage with the error naming both. */
ncclResult_t dccl_stall_mismatch(struct dccl_comm *comm, const struct dccl_slot_header *theirs, int peer,
                         const struct dccl_slot_header *mine);

/* Mismatched calls that leave the communicator usable (core/mismatch_drain.c). A verdict naming two calls of the
 * same collective (same sequence number) asks every rank to fail that collective and drain its collective links;
 * any other verdict fails the communicator. */
void dccl_drain_request(struct dccl_comm *comm, int same_collective, uint64_t seq, const char *text);
/* While a drain is asked for: the verdict's ncclInvalidUsage for the collective numbered `seq` if it is the failed
 * one or a later one; ncclSuccess for an earlier one (a slow rank finishing it) and for send/recv, whose lanes the
 * drain leaves alone. */
ncclResult_t dccl_drain_error(struct dccl_comm *comm, int kind, uint64_t seq);
/* A call of `kind` entering while a drain is asked for: the failed collective (or a later one) joins the drain
 * now and returns its error; anything else returns ncclSuccess and runs. */
ncclResult_t dccl_drain_at_entry(struct dccl_comm *comm, int kind);
/* An operation failed with `res` (op: the one blocking host collective that failed, else NULL): with a drain asked
 * for, every rank meets over the bootstrap and, where all of them can, drains and keeps the communicator;
 * otherwise (or without a drain) the communicator is failed. Returns the error for the caller. */
ncclResult_t dccl_op_failed(struct dccl_comm *comm, const struct dccl_op *op, ncclResult_t res);

#endif
