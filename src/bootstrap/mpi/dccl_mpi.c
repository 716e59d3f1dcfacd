/* dcclCommInitMPI: the unique id travels by MPI_Bcast instead of by hand. This file is the whole of libdccl_mpi;
 * it sees only the public API (libdccl's internals are hidden), so it logs with a small logger of its own that
 * honours the same DCCL_DEBUG / NCCL_DEBUG setting. */
#include "dccl_mpi.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum { MPI_LOG_NONE, MPI_LOG_WARN, MPI_LOG_INFO };

static int mpi_log_level(void) {
  const char *s = getenv("DCCL_DEBUG");
  if (!s || !*s) s = getenv("NCCL_DEBUG");
  if (!s || !*s) return MPI_LOG_WARN;
  if (strcasecmp(s, "NONE") == 0) return MPI_LOG_NONE;
  if (strcasecmp(s, "INFO") == 0 || strcasecmp(s, "TRACE") == 0) return MPI_LOG_INFO;
  return MPI_LOG_WARN;
}

static void mpi_log(int level, int rank, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void mpi_log(int level, int rank, const char *fmt, ...) {
  if (level > mpi_log_level()) return;
  char host[64] = "unknown";
  gethostname(host, sizeof(host));
  host[sizeof(host) - 1] = '\0';
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s:%d:r%d DCCL %s [INIT] %s\n", host, (int)getpid(), rank, level == MPI_LOG_WARN ? "WARN" : "INFO",
          text);
}

/* How many nodes MPI sees: ranks sharing memory form one node; each node's first rank counts it. */
static int count_mpi_nodes(MPI_Comm mpi_comm, int rank, int *nnodes) {
  MPI_Comm node_comm;
  int node_rank = 0, leader;
  if (MPI_Comm_split_type(mpi_comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_comm) != MPI_SUCCESS) return 0;
  int ok = MPI_Comm_rank(node_comm, &node_rank) == MPI_SUCCESS;
  MPI_Comm_free(&node_comm);
  leader = ok && node_rank == 0;
  return ok && MPI_Allreduce(&leader, nnodes, 1, MPI_INT, MPI_SUM, mpi_comm) == MPI_SUCCESS;
}

ncclResult_t dcclCommInitMPI(ncclComm_t *comm, MPI_Comm mpi_comm, ncclConfig_t *config) {
  if (!comm) return ncclInvalidArgument;
  *comm = NULL;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    mpi_log(MPI_LOG_WARN, -1, "dcclCommInitMPI: MPI is not initialised (or already finalised)");
    return ncclInvalidUsage;
  }
  if (mpi_comm == MPI_COMM_NULL) {
    mpi_log(MPI_LOG_WARN, -1, "dcclCommInitMPI: mpi_comm is MPI_COMM_NULL");
    return ncclInvalidArgument;
  }
  int rank, size;
  if (MPI_Comm_rank(mpi_comm, &rank) != MPI_SUCCESS || MPI_Comm_size(mpi_comm, &size) != MPI_SUCCESS) {
    mpi_log(MPI_LOG_WARN, -1, "dcclCommInitMPI: MPI_Comm_rank/size failed");
    return ncclSystemError;
  }

  /* Rank 0's result travels with the id, so every rank fails together if the id could not be made. */
  struct {
    int result;
    ncclUniqueId id;
  } msg;
  memset(&msg, 0, sizeof(msg));
  if (rank == 0) msg.result = (int)ncclGetUniqueId(&msg.id);
  if (MPI_Bcast(&msg, (int)sizeof(msg), MPI_BYTE, 0, mpi_comm) != MPI_SUCCESS) {
    mpi_log(MPI_LOG_WARN, rank, "dcclCommInitMPI: MPI_Bcast of the unique id failed");
    return ncclSystemError;
  }
  if (msg.result != ncclSuccess) {
    mpi_log(MPI_LOG_WARN, rank, "dcclCommInitMPI: rank 0 could not create the unique id: %s",
            ncclGetErrorString((ncclResult_t)msg.result));
    return (ncclResult_t)msg.result;
  }

  int nnodes = 0;
  if (count_mpi_nodes(mpi_comm, rank, &nnodes)) {
    if (rank == 0) mpi_log(MPI_LOG_INFO, rank, "dcclCommInitMPI: %d MPI ranks on %d node(s)", size, nnodes);
  } else {
    mpi_log(MPI_LOG_WARN, rank, "dcclCommInitMPI: could not group MPI ranks by node");
  }
  return ncclCommInitRankConfig(comm, size, msg.id, rank, config);
}
