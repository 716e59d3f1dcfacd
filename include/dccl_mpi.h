/* DCCL's MPI bootstrap (libdccl_mpi): create a communicator over an MPI communicator in one call. Kept out of
 * libdccl so the core library never depends on MPI. Link with -ldccl_mpi -ldccl and your MPI. */
#ifndef DCCL_MPI_H_
#define DCCL_MPI_H_

#include <mpi.h>

#include "dccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over `mpi_comm`: rank 0 makes the unique id, MPI broadcasts it, and every rank joins with its MPI
 * rank and size. `config` may be NULL (defaults). MPI must be initialised. Every rank gets the same result when
 * the id cannot be made; afterwards each rank reports its own ncclCommInitRankConfig result. */
ncclResult_t dcclCommInitMPI(ncclComm_t *comm, MPI_Comm mpi_comm, ncclConfig_t *config);

#ifdef __cplusplus
}
#endif

#endif
