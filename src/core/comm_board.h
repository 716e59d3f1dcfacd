/* A communicator's shared-memory board (transports/shm/shm_board.h), for meetings cheaper than the bootstrap's
 * allgather where every rank lives on this host. */
#ifndef DCCL_CORE_COMM_BOARD_H_
#define DCCL_CORE_COMM_BOARD_H_

#include "core/comm.h"
#include "transports/shm/shm_board.h"

/* Collective: every rank calls it at the same point. *out is the board for records of at most `max_bytes`, or NULL
 * on every rank where some rank lives on another host or could not map it (then meet over the bootstrap). Errors:
 * the bootstrap's. */
ncclResult_t dccl_comm_board_open(struct dccl_comm *comm, size_t max_bytes, struct dccl_shm_board **out);

/* An allgather on the board for the device call `call`, ended by the communicator's abort flag or DCCL_TIMEOUT; a
 * long wait is noted for stall reports, whose verdict on mismatched calls fails the communicator. */
ncclResult_t dccl_comm_board_allgather(struct dccl_comm *comm, struct dccl_shm_board *b, void *data, size_t size,
                                       const struct dccl_slot_header *call);

#endif
