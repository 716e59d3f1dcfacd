/* The perf tools: one driver (common.c) shared by nine small collective files. Each tool is a process per rank,
 * launched by mpirun, working on host (malloc'd) buffers through the public API only. Flags and output follow
 * the layout users know from NVIDIA's nccl-tests; -J (JSON) and -M (an MPI baseline) are extras. */
#ifndef DCCL_PERF_COMMON_H_
#define DCCL_PERF_COMMON_H_

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "dccl.h"

/* Reductions the tools can ask for: NCCL's built-in ops plus "mulsum", a premultiply-then-sum op made with
 * ncclRedOpCreatePreMulSum. PERF_OP_NONE labels the collectives that reduce nothing. */
enum perf_op {
  PERF_OP_SUM,
  PERF_OP_PROD,
  PERF_OP_MAX,
  PERF_OP_MIN,
  PERF_OP_AVG,
  PERF_OP_MULSUM,
  PERF_OP_COUNT,
  PERF_OP_NONE = -1
};

/* ---- data types (datatypes.c) ---- */
struct perf_type {
  const char *name; /* as typed after -d */
  ncclDataType_t nccl;
  size_t size; /* bytes per element */
  int is_float;
  int is_signed;
  int mantissa_bits;  /* float types: stored fraction bits */
  double exact_limit; /* every integer in [-limit, limit] is exact, and so are sums staying inside it */
  MPI_Datatype mpi;   /* MPI_DATATYPE_NULL: MPI cannot reduce this type */
};
extern const struct perf_type perf_types[];
extern const int perf_type_count;
const struct perf_type *perf_type_by_name(const char *name);
/* Stores x (finite, in range) as one element of `type`, rounding to nearest even; reads one back. */
void perf_type_store(const struct perf_type *type, void *dst, double x);
double perf_type_load(const struct perf_type *type, const void *src);

const char *perf_op_name(enum perf_op op);
int perf_op_by_name(const char *name, enum perf_op *out);

/* ---- options (args.c) ---- */
struct perf_options {
  size_t min_bytes, max_bytes;
  size_t step_bytes;  /* additive step, used when step_factor <= 1 */
  double step_factor; /* multiplicative step when > 1 */
  int iters, warmup_iters;
  int check;  /* number of verified iterations after timing; 0: no check */
  int op_all; /* -o all */
  enum perf_op op;
  int type_all; /* -d all */
  const struct perf_type *type;
  int root_all; /* -r all */
  int root;
  int average; /* 0 rank 0, 1 mean, 2 min, 3 max of the per-rank times */
  const char *json_path;
  int mpi_baseline;  /* -M 1 */
  int timeout_s;     /* -T: the whole run is aborted after this many seconds; 0: never */
  int use_unique_id; /* -B uid: ncclGetUniqueId + MPI_Bcast + ncclCommInitRank even when dccl_mpi exists */
  int host_buffers;  /* --host: host memory even where a GPU is present */
  int register_mode; /* -R: device buffers registered (1) or in windows (2) */
  int memalloc;      /* --memalloc: device buffers from ncclMemAlloc (PERF_ALLOC_MEMALLOC); --segments:
                        PERF_ALLOC_SEGMENTS; --exact: PERF_ALLOC_EXACT */
};
/* Parses argv; returns 0 on success, 1 after printing help (exit 0), -1 on bad input (message printed). */
int perf_parse_args(int argc, char **argv, struct perf_options *opts, int rank);

/* ---- one collective ---- */
/* Buffer geometry for one row, on one rank. Counts are in elements; the in-place offsets locate the send and
 * receive pointers inside the one in-place buffer, which holds max(send_count, recv_count) elements. The buffer
 * counts may differ between ranks (gather's root receives nranks blocks, the other ranks nothing), so that a
 * write into a buffer the call must leave alone hits the guards; call_count and report_bytes may not. */
struct perf_counts {
  size_t call_count; /* the count argument of the NCCL call */
  size_t send_count, recv_count;
  size_t inplace_send_offset, inplace_recv_offset;
  size_t report_bytes; /* the size(B) column: the largest buffer of any rank */
};

/* What one call needs to know. */
struct perf_call {
  const struct perf_type *type;
  enum perf_op op;
  ncclRedOp_t nccl_op; /* the built-in op, or the premulsum handle for mulsum */
  int root;
  int rank, nranks;
  struct perf_counts counts;
};

/* Input and expected values, defined in check.c; the collective files combine them. */
struct perf_values {
  const struct perf_type *type;
  enum perf_op op;
  int nranks;
  unsigned seed; /* differs per checked iteration, so a stale result from the last one shows */
  double range;  /* inputs stay within [0, range] (or [-range, range]) so every partial result is exact */
};
/* Rank `rank`'s input element `index`. */
double perf_input_value(const struct perf_values *v, int rank, size_t index);
/* Element `index` of every rank's first `block` input elements laid end to end in rank order (a gather). */
double perf_gathered_value(const struct perf_values *v, size_t block, size_t index);
/* The reduction over all ranks of element `index` under v->op, as the exact result rounded to the type. */
double perf_reduced_value(const struct perf_values *v, size_t index);
/* The premultiplier rank `rank` passes to ncclRedOpCreatePreMulSum for mulsum. */
double perf_mulsum_scalar(int rank);

struct perf_collective {
  const char *name; /* e.g. "all_reduce": JSON and messages */
  int uses_op;      /* runs every -o op; else the redop column says "none" */
  int uses_root;    /* runs every -r root; else the root column says -1 */
  /* Fills this rank's counts for a row of `bytes`; every field of `call` but counts is set. */
  void (*get_counts)(size_t bytes, const struct perf_call *call, struct perf_counts *out);
  double (*busbw_factor)(int nranks);
  ncclResult_t (*run)(const void *sendbuff, void *recvbuff, const struct perf_call *call, ncclComm_t comm);
  /* The same operation through MPI (baseline); returns an MPI error code. */
  int (*run_mpi)(const void *sendbuff, void *recvbuff, const struct perf_call *call, MPI_Comm comm);
  int mpi_moves_bytes; /* the MPI baseline moves raw bytes, so it works for every type and no op */
  /* In place, the result is undefined (sendrecv: the buffer being sent is also the one being received into, a
   * race NCCL does not order either): timed, never checked, #wrong says N/A as in nccl-tests. */
  int in_place_unchecked;
  /* Whether this rank's receive buffer holds a defined result (reduce: root only). */
  int (*rank_has_result)(const struct perf_call *call);
  /* Expected element `index` of this rank's receive buffer. */
  double (*expected)(const struct perf_values *v, const struct perf_call *call, size_t index);
};

/* The MPI op timed in place of `op` by the baseline (avg: MPI_SUM, the same traffic and work). */
MPI_Op perf_mpi_op(enum perf_op op);

/* get_counts for the collectives whose every rank sends and receives the whole row (all-reduce, broadcast,
 * reduce, sendrecv): one count of bytes / type size, in place in the same buffer. */
void perf_counts_whole_row(size_t bytes, const struct perf_call *call, struct perf_counts *out);
/* busbw_factor for the collectives in which each rank moves the whole row once: 1. */
double perf_busbw_whole_row(int nranks);
/* busbw_factor for those in which each rank sends or receives all blocks but its own: (n-1)/n. */
double perf_busbw_all_but_own(int nranks);

/* The driver: every tool's main() is one call to it. */
int perf_main(int argc, char **argv, const struct perf_collective *coll);

/* ---- checking (check.c) ---- */
/* Room on both sides of every buffer, filled with a known byte to catch writes out of bounds. */
#define PERF_GUARD_BYTES 256
#define PERF_GUARD_BYTE 0xA5
#define PERF_POISON_BYTE 0x5A

/* Writes rank's input, element by element from index `first`, into `dst` (n elements). */
void perf_fill_input(const struct perf_values *v, int rank, size_t first, void *dst, size_t n);
/* Elements of `buf` (n of them, input indices from `first`) that no longer hold rank's input. */
size_t perf_count_input_changed(const struct perf_values *v, int rank, size_t first, const void *buf, size_t n);
/* Elements of `recv` (call->counts.recv_count) that differ from coll->expected. */
size_t perf_count_wrong(const struct perf_collective *coll, const struct perf_values *v, const struct perf_call *call,
                        const void *recv);
/* Poisons [base, base + bytes) and fills the guards around it; counts guard bytes that changed. */
void perf_guard_set(unsigned char *base, size_t bytes);
size_t perf_guard_count_changed(const unsigned char *base, size_t bytes);
/* The input range that keeps sums, products and averages exact in `type` for `nranks` ranks. */
double perf_value_range(const struct perf_type *type, enum perf_op op, int nranks);

/* ---- device buffers (device_mem.c, device_segments.c) ---- */
enum { PERF_ALLOC_CUDAMALLOC /* in whole 2 MiB pages */, PERF_ALLOC_MEMALLOC, PERF_ALLOC_SEGMENTS, PERF_ALLOC_EXACT };
/* --segments: a buffer in a reserved range of 20 MiB cuMem allocations, as PyTorch's expandable segments hold one
 * (device_segments.c); MPI_Abort on failure. */
void *perf_segments_alloc(size_t bytes, int device);
void perf_segments_free(void *p);
/* The collectives' buffers: the host buffers themselves, or device memory the host buffers mirror (same layout,
 * guards included, from the start of each allocation). */
struct perf_mem {
  int on_device, device;
  int memalloc; /* PERF_ALLOC_*: cudaMalloc, ncclMemAlloc (cuMem), or an expandable segment */
  unsigned char *dev_send, *dev_recv;
  size_t bytes; /* each allocation, guards included */
};
/* Uses this host's GPU for the rank (before the communicator is made) when want_device and one exists; returns
 * on_device. max_bytes: each buffer's usable size; memalloc: PERF_ALLOC_*. */
int perf_mem_init(struct perf_mem *m, int want_device, int memalloc, size_t max_bytes);
void perf_mem_free(struct perf_mem *m);
/* The host copies (allocation starts) to the device, and back after waiting for the device's work. */
void perf_mem_upload(const struct perf_mem *m, const unsigned char *send_base, const unsigned char *recv_base);
void perf_mem_download(const struct perf_mem *m, unsigned char *send_base, unsigned char *recv_base);
/* Waits for the operations queued on the device (stream NULL, which the tools use). */
void perf_mem_sync(const struct perf_mem *m);
/* The address the collective is given for a host-copy address inside one of the two allocations. */
void *perf_mem_ptr(const struct perf_mem *m, const unsigned char *host, const unsigned char *send_base,
                   const unsigned char *recv_base);

/* ---- output (report.c) ---- */
struct perf_result {
  double time_us, algbw, busbw;
  long long wrong; /* -1: not checked */
};
struct perf_row {
  const char *collective;
  int nranks;
  size_t bytes, count;
  const char *type;
  const char *redop;
  int root;
  struct perf_result out_of_place, in_place;
  int has_mpi; /* -M 1 was asked for */
  int mpi_ok;  /* the baseline ran (else "n/a") */
  double mpi_time_us, mpi_algbw, mpi_busbw;
};
/* `bootstrap` says how the communicator was made; `device`: this rank's GPU, -1 for host buffers. */
void perf_print_header(const struct perf_options *opts, const struct perf_collective *coll, const char *bootstrap,
                       int device, MPI_Comm comm);
void perf_print_row(const struct perf_row *row);
/* JSON (layout in docs/performance.md): one object, the run's metadata and then its rows, written as they
 * come. Rank 0 only. */
int perf_json_open(const char *path, const struct perf_options *opts, const struct perf_collective *coll, int nranks,
                   int on_device);
void perf_json_row(const struct perf_row *row);
void perf_json_close(void);
/* Ends the JSON file so that it still parses, marked "aborted" (async-signal-safe: the -T timeout's handler). */
void perf_json_abort(void);

#endif
