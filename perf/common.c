/* The driver every perf tool shares: MPI and communicator setup, buffers, the loops over types, ops, roots and
 * sizes, the timed runs, the checked runs and the optional MPI baseline. */
#include "common.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parallel.h"

/* Set by perf/CMakeLists.txt when the dccl_mpi library is part of the build. */
#ifdef PERF_HAVE_DCCL_MPI
#include "dccl_mpi.h"
#endif

/* The communicator whose last error a failure prints (NULL before it exists). */
static ncclComm_t error_comm;

/* A failed NCCL call ends the whole job: the other ranks would otherwise wait in the collective forever. */
static void fail_nccl(const char *what, ncclResult_t res, const char *file, int line) {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char *last = ncclGetLastError(error_comm);
  fprintf(stderr, "rank %d: %s:%d: %s failed: %s (%d); last error: %s\n", rank, file, line, what,
          ncclGetErrorString(res), (int)res, last && *last ? last : "(none)");
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

#define PERF_NCCL_CHECK(call)                                                      \
  do {                                                                             \
    ncclResult_t perf_res_ = (call);                                               \
    if (perf_res_ != ncclSuccess) fail_nccl(#call, perf_res_, __FILE__, __LINE__); \
  } while (0)

static void fail_mpi(const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0, rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", code);
  fprintf(stderr, "rank %d: MPI baseline %s failed: %s\n", rank, what, text);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

static void on_timeout(int sig) {
  (void)sig;
  static const char msg[] = "perf: the -T timeout expired; aborting\n";
  ssize_t written = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)written;
  perf_json_abort();
  _exit(124);
}

MPI_Op perf_mpi_op(enum perf_op op) {
  switch (op) {
    case PERF_OP_PROD:
      return MPI_PROD;
    case PERF_OP_MAX:
      return MPI_MAX;
    case PERF_OP_MIN:
      return MPI_MIN;
    default:
      return MPI_SUM; /* avg: MPI has none; a sum moves the same bytes and does the same work */
  }
}

static ncclRedOp_t builtin_nccl_op(enum perf_op op) {
  switch (op) {
    case PERF_OP_PROD:
      return ncclProd;
    case PERF_OP_MAX:
      return ncclMax;
    case PERF_OP_MIN:
      return ncclMin;
    case PERF_OP_AVG:
      return ncclAvg;
    default:
      return ncclSum;
  }
}

/* Everything one run needs, built once. */
struct perf_run {
  const struct perf_options *opts;
  const struct perf_collective *coll;
  ncclComm_t comm;
  int rank, nranks;
  unsigned char *send, *recv; /* recv is also the in-place buffer; both have guards on either side */
  struct perf_mem mem;        /* device buffers the host ones mirror, where a GPU is used */
  long long total_wrong;
  double busbw_sum;
  int busbw_rows;
};

/* -a: which number stands for the ranks' times. */
static double combine_time(const struct perf_run *run, double seconds) {
  double out = seconds;
  switch (run->opts->average) {
    case 0:
      MPI_Bcast(&out, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      break;
    case 2:
      MPI_Allreduce(&seconds, &out, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
      break;
    case 3:
      MPI_Allreduce(&seconds, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      break;
    default:
      MPI_Allreduce(&seconds, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      out /= run->nranks;
      break;
  }
  return out;
}

/* What the collective is given for a host address: itself, or the device address it mirrors. */
static void *buf(const struct perf_run *run, const unsigned char *host) {
  return perf_mem_ptr(&run->mem, host, run->send - PERF_GUARD_BYTES, run->recv - PERF_GUARD_BYTES);
}
static void upload(const struct perf_run *run) {
  perf_mem_upload(&run->mem, run->send - PERF_GUARD_BYTES, run->recv - PERF_GUARD_BYTES);
}
static void download(const struct perf_run *run) {
  perf_mem_download(&run->mem, run->send - PERF_GUARD_BYTES, run->recv - PERF_GUARD_BYTES);
}

/* Microseconds per iteration. Host-buffer operations are complete when the call returns; device ones when the
 * stream has run them. The warm-up starts from a barrier too, as the checked calls do (check_out_of_place). */
static double time_dccl(const struct perf_run *run, const struct perf_call *call, const unsigned char *send,
                        unsigned char *recv) {
  const void *s = buf(run, send);
  void *r = buf(run, recv);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < run->opts->warmup_iters; i++) PERF_NCCL_CHECK(run->coll->run(s, r, call, run->comm));
  perf_mem_sync(&run->mem);
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (int i = 0; i < run->opts->iters; i++) PERF_NCCL_CHECK(run->coll->run(s, r, call, run->comm));
  perf_mem_sync(&run->mem);
  return combine_time(run, (MPI_Wtime() - start) / run->opts->iters) * 1e6;
}

static double time_mpi(const struct perf_run *run, const struct perf_call *call, const void *send, void *recv) {
  int rc;
  for (int i = 0; i < run->opts->warmup_iters; i++)
    if ((rc = run->coll->run_mpi(send, recv, call, MPI_COMM_WORLD)) != MPI_SUCCESS) fail_mpi(run->coll->name, rc);
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (int i = 0; i < run->opts->iters; i++)
    if ((rc = run->coll->run_mpi(send, recv, call, MPI_COMM_WORLD)) != MPI_SUCCESS) fail_mpi(run->coll->name, rc);
  return combine_time(run, (MPI_Wtime() - start) / run->opts->iters) * 1e6;
}

/* Decided from the largest buffer of any rank, which every rank knows, so that all ranks skip together. */
static int mpi_can_run(const struct perf_collective *coll, const struct perf_call *call) {
  size_t limit = coll->mpi_moves_bytes ? (size_t)INT32_MAX / call->type->size : (size_t)INT32_MAX;
  if (call->counts.report_bytes / call->type->size > limit) return 0;
  if (coll->mpi_moves_bytes) return 1;
  return call->type->mpi != MPI_DATATYPE_NULL && call->op != PERF_OP_MULSUM;
}

static int has_result(const struct perf_collective *coll, const struct perf_call *call) {
  return coll->rank_has_result ? coll->rank_has_result(call) : 1;
}

/* The checked iterations: fresh inputs each time (a stale result from the previous one would show), poisoned
 * outputs (an element never written shows), guards (a write out of bounds shows) and, out of place, an
 * untouched send buffer. Returns this rank's count of wrong elements; guard bytes count one each. Each checked
 * call starts from a barrier: filling and checking 1 GiB on the host takes seconds, longer on some ranks than on
 * others, and a rank that started alone would wait inside DCCL until its stall report fired (5 s). */
static long long check_out_of_place(const struct perf_run *run, const struct perf_call *call, struct perf_values *v) {
  const size_t ts = call->type->size;
  const size_t send_bytes = call->counts.send_count * ts, recv_bytes = call->counts.recv_count * ts;
  long long wrong = 0;
  perf_guard_set(run->send, send_bytes);
  perf_fill_input(v, run->rank, 0, run->send, call->counts.send_count);
  perf_guard_set(run->recv, recv_bytes);
  upload(run);
  MPI_Barrier(MPI_COMM_WORLD);
  PERF_NCCL_CHECK(run->coll->run(buf(run, run->send), buf(run, run->recv), call, run->comm));
  download(run);
  if (has_result(run->coll, call)) wrong += (long long)perf_count_wrong(run->coll, v, call, run->recv);
  wrong += (long long)perf_count_input_changed(v, run->rank, 0, run->send, call->counts.send_count);
  wrong += (long long)perf_guard_count_changed(run->send, send_bytes);
  wrong += (long long)perf_guard_count_changed(run->recv, recv_bytes);
  return wrong;
}

static long long check_in_place(const struct perf_run *run, const struct perf_call *call, struct perf_values *v) {
  const size_t ts = call->type->size;
  const struct perf_counts *c = &call->counts;
  const size_t bytes = (c->send_count > c->recv_count ? c->send_count : c->recv_count) * ts;
  unsigned char *send = run->recv + c->inplace_send_offset * ts, *recv = run->recv + c->inplace_recv_offset * ts;
  long long wrong = 0;
  perf_guard_set(run->recv, bytes);
  perf_fill_input(v, run->rank, 0, send, c->send_count);
  upload(run);
  MPI_Barrier(MPI_COMM_WORLD);
  PERF_NCCL_CHECK(run->coll->run(buf(run, send), buf(run, recv), call, run->comm));
  download(run);
  if (has_result(run->coll, call)) wrong += (long long)perf_count_wrong(run->coll, v, call, recv);
  wrong += (long long)perf_guard_count_changed(run->recv, bytes);
  return wrong;
}

static double bandwidth_gbs(size_t bytes, double time_us) {
  return time_us > 0 ? (double)bytes / time_us / 1e3 : 0;
}

/* One line of the table: one size, type, op and root. */
static void run_row(struct perf_run *run, struct perf_call *call, size_t bytes) {
  const struct perf_collective *coll = run->coll;
  const size_t ts = call->type->size;
  coll->get_counts(bytes, call, &call->counts);
  const struct perf_counts *c = &call->counts;
  struct perf_values v = {call->type, call->op, run->nranks, 0, perf_value_range(call->type, call->op, run->nranks)};

  struct perf_row row;
  memset(&row, 0, sizeof row);
  row.collective = coll->name;
  row.nranks = run->nranks;
  row.bytes = c->report_bytes;
  row.count = c->report_bytes / ts;
  row.type = call->type->name;
  row.redop = perf_op_name(call->op);
  row.root = call->root;
  row.out_of_place.wrong = row.in_place.wrong = -1;

  /* Timed runs start from valid inputs, so no run is slowed by denormals or NaNs. */
  unsigned char *ip_send = run->recv + c->inplace_send_offset * ts, *ip_recv = run->recv + c->inplace_recv_offset * ts;
  perf_fill_input(&v, run->rank, 0, run->send, c->send_count);
  upload(run);
  row.out_of_place.time_us = time_dccl(run, call, run->send, run->recv);
  perf_fill_input(&v, run->rank, 0, ip_send, c->send_count);
  upload(run);
  row.in_place.time_us = time_dccl(run, call, ip_send, ip_recv);

  if (run->opts->check > 0) {
    long long local[2] = {0, 0}, total[2];
    for (int iter = 0; iter < run->opts->check; iter++) {
      v.seed = (unsigned)iter + 1;
      local[0] += check_out_of_place(run, call, &v);
      if (!coll->in_place_unchecked) local[1] += check_in_place(run, call, &v);
    }
    MPI_Allreduce(local, total, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    row.out_of_place.wrong = total[0];
    row.in_place.wrong = coll->in_place_unchecked ? -1 : total[1];
    run->total_wrong += total[0] + total[1];
  }

  if (run->opts->mpi_baseline) {
    row.has_mpi = 1;
    if (mpi_can_run(coll, call)) {
      v.seed = 0;
      perf_fill_input(&v, run->rank, 0, run->send, c->send_count);
      row.mpi_ok = 1;
      row.mpi_time_us = time_mpi(run, call, run->send, run->recv);
      row.mpi_algbw = bandwidth_gbs(c->report_bytes, row.mpi_time_us);
    }
  }

  double factor = coll->busbw_factor(run->nranks);
  row.mpi_busbw = row.mpi_algbw * factor;
  struct perf_result *results[2] = {&row.out_of_place, &row.in_place};
  for (int i = 0; i < 2; i++) {
    results[i]->algbw = bandwidth_gbs(c->report_bytes, results[i]->time_us);
    results[i]->busbw = results[i]->algbw * factor;
    run->busbw_sum += results[i]->busbw;
    run->busbw_rows++;
  }
  if (run->rank == 0) {
    perf_print_row(&row);
    perf_json_row(&row);
  }
}

static void run_sizes(struct perf_run *run, struct perf_call *call) {
  const struct perf_options *o = run->opts;
  for (size_t bytes = o->min_bytes;;) {
    run_row(run, call, bytes);
    size_t next;
    if (o->step_factor > 1.0) {
      double grown = (double)bytes * o->step_factor;
      next = grown >= (double)SIZE_MAX ? SIZE_MAX : (size_t)grown;
      if (next <= bytes) next = bytes + 1; /* from 0, or a factor too small to move */
    } else {
      if (o->step_bytes == 0) break;
      next = bytes + o->step_bytes;
      if (next < bytes) break;
    }
    if (next > o->max_bytes) break;
    bytes = next;
  }
}

/* Every type, op and root asked for. */
static void run_all(struct perf_run *run) {
  const struct perf_options *o = run->opts;
  const struct perf_collective *coll = run->coll;
  int ntypes = o->type_all ? perf_type_count : 1;
  for (int t = 0; t < ntypes; t++) {
    const struct perf_type *type = o->type_all ? &perf_types[t] : o->type;
    int nops = coll->uses_op && o->op_all ? PERF_OP_COUNT : 1;
    for (int k = 0; k < nops; k++) {
      struct perf_call call;
      memset(&call, 0, sizeof call);
      call.type = type;
      call.op = !coll->uses_op ? PERF_OP_NONE : o->op_all ? (enum perf_op)k : o->op;
      call.rank = run->rank;
      call.nranks = run->nranks;
      int premulsum = call.op == PERF_OP_MULSUM;
      if (premulsum) {
        unsigned char scalar[8] = {0};
        perf_type_store(type, scalar, perf_mulsum_scalar(run->rank));
        PERF_NCCL_CHECK(
            ncclRedOpCreatePreMulSum(&call.nccl_op, scalar, type->nccl, ncclScalarHostImmediate, run->comm));
      } else {
        call.nccl_op = builtin_nccl_op(call.op);
      }
      int first_root = coll->uses_root ? (o->root_all ? 0 : o->root) : -1;
      int last_root = coll->uses_root ? (o->root_all ? run->nranks - 1 : o->root) : -1;
      for (int root = first_root; root <= last_root; root++) {
        call.root = root;
        run_sizes(run, &call);
      }
      if (premulsum) PERF_NCCL_CHECK(ncclRedOpDestroy(call.nccl_op, run->comm));
    }
  }
}

static ncclComm_t create_comm(const struct perf_options *o, int rank, int nranks, const char **how) {
  ncclComm_t comm = NULL;
#ifdef PERF_HAVE_DCCL_MPI
  if (!o->use_unique_id) {
    *how = "dcclCommInitMPI";
    PERF_NCCL_CHECK(dcclCommInitMPI(&comm, MPI_COMM_WORLD, NULL));
    return comm;
  }
#else
  (void)o;
#endif
  *how = "ncclGetUniqueId + MPI_Bcast + ncclCommInitRank";
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0) PERF_NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  PERF_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
  return comm;
}

/* A buffer of `bytes` with PERF_GUARD_BYTES of room on each side; returns the usable start. */
static unsigned char *alloc_guarded(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, 64, bytes + 2 * PERF_GUARD_BYTES) != 0) return NULL;
  memset(p, 0, bytes + 2 * PERF_GUARD_BYTES); /* touch every page before timing */
  return (unsigned char *)p + PERF_GUARD_BYTES;
}

static void free_guarded(unsigned char *p) {
  if (p) free(p - PERF_GUARD_BYTES);
}

/* -R: the device buffers (guards included) registered, or made windows (every rank at once, as NCCL asks). */
static void register_buffers(struct perf_run *run, int mode, void *regs[2]) {
  if (!run->mem.on_device || !mode) return;
  unsigned char *bufs[2] = {run->mem.dev_send, run->mem.dev_recv};
  for (int i = 0; i < 2; i++) {
    if (mode == 1)
      PERF_NCCL_CHECK(ncclCommRegister(run->comm, bufs[i], run->mem.bytes, &regs[i]));
    else
      PERF_NCCL_CHECK(ncclCommWindowRegister(run->comm, bufs[i], run->mem.bytes, (ncclWindow_t *)&regs[i],
                                             NCCL_WIN_COLL_SYMMETRIC));
  }
}

static void deregister_buffers(struct perf_run *run, int mode, void *regs[2]) {
  for (int i = 0; i < 2; i++) {
    if (!regs[i]) continue;
    if (mode == 1)
      PERF_NCCL_CHECK(ncclCommDeregister(run->comm, regs[i]));
    else
      PERF_NCCL_CHECK(ncclCommWindowDeregister(run->comm, (ncclWindow_t)regs[i]));
  }
}

int perf_main(int argc, char **argv, const struct perf_collective *coll) {
  MPI_Init(&argc, &argv);
  struct perf_run run;
  memset(&run, 0, sizeof run);
  run.coll = coll;
  MPI_Comm_rank(MPI_COMM_WORLD, &run.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &run.nranks);
  MPI_Comm node;
  int ranks_on_node = 1;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &ranks_on_node);
    MPI_Comm_free(&node);
  }
  perf_parallel_init(ranks_on_node);

  struct perf_options opts;
  int parsed = perf_parse_args(argc, argv, &opts, run.rank);
  if (parsed == 0 && coll->uses_root && !opts.root_all && opts.root >= run.nranks) {
    if (run.rank == 0) fprintf(stderr, "%s: root %d is not a rank of %d\n", argv[0], opts.root, run.nranks);
    parsed = -1;
  }
  if (parsed != 0) {
    MPI_Finalize();
    return parsed > 0 ? 0 : 1;
  }
  run.opts = &opts;
  if (opts.timeout_s > 0) {
    signal(SIGALRM, on_timeout);
    alarm((unsigned)opts.timeout_s);
  }

  const char *how = "";
  /* The GPU first: a communicator is for the device current when it is made. */
  perf_mem_init(&run.mem, !opts.host_buffers, opts.memalloc, opts.max_bytes);
  /* Creation time, from a common start to the slowest rank's return: what a job waits for. */
  MPI_Barrier(MPI_COMM_WORLD);
  double created = MPI_Wtime();
  run.comm = create_comm(&opts, run.rank, run.nranks, &how);
  created = MPI_Wtime() - created;
  double slowest = 0;
  MPI_Reduce(&created, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  error_comm = run.comm;
  int count = -1, user_rank = -1;
  PERF_NCCL_CHECK(ncclCommCount(run.comm, &count));
  PERF_NCCL_CHECK(ncclCommUserRank(run.comm, &user_rank));
  if (count != run.nranks || user_rank != run.rank) {
    fprintf(stderr, "rank %d: the communicator says rank %d of %d, MPI says %d of %d\n", run.rank, user_rank, count,
            run.rank, run.nranks);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  void *regs[2] = {NULL, NULL};
  register_buffers(&run, opts.register_mode, regs);
  char created_by[200];
  snprintf(created_by, sizeof created_by, "%s, created in %.1f ms (slowest rank); %s buffers%s%s", how,
           slowest * 1e3, run.mem.on_device ? "device" : "host",
           !run.mem.on_device                          ? ""
           : run.mem.memalloc == PERF_ALLOC_MEMALLOC   ? " (ncclMemAlloc)"
           : run.mem.memalloc == PERF_ALLOC_SEGMENTS ? " (expandable segments)"
           : run.mem.memalloc == PERF_ALLOC_EXACT    ? " (cudaMalloc of exact sizes)"
                                                       : " (cudaMalloc in whole 2 MiB pages)",
           !run.mem.on_device || !opts.register_mode ? ""
           : opts.register_mode == 1                 ? " (ncclCommRegister)"
                                                     : " (in windows)");
  perf_print_header(&opts, coll, created_by, run.mem.on_device ? run.mem.device : -1, MPI_COMM_WORLD);

  run.send = alloc_guarded(opts.max_bytes);
  run.recv = alloc_guarded(opts.max_bytes);
  if (!run.send || !run.recv) {
    fprintf(stderr, "rank %d: cannot allocate 2 x %zu bytes\n", run.rank, opts.max_bytes);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (run.rank == 0 && opts.json_path &&
      perf_json_open(opts.json_path, &opts, coll, run.nranks, run.mem.on_device) != 0) {
    fprintf(stderr, "cannot write %s\n", opts.json_path);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  run_all(&run);

  if (run.rank == 0) {
    perf_json_close();
    printf("# Out of bounds values : %lld %s\n", run.total_wrong, run.total_wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n#\n", run.busbw_rows ? run.busbw_sum / run.busbw_rows : 0.0);
    fflush(stdout);
  }
  deregister_buffers(&run, opts.register_mode, regs);
  PERF_NCCL_CHECK(ncclCommDestroy(run.comm));
  error_comm = NULL;
  free_guarded(run.send);
  free_guarded(run.recv);
  perf_mem_free(&run.mem);
  MPI_Finalize();
  return run.total_wrong ? 1 : 0;
}
