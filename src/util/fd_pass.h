/* File descriptors between processes of one host: an abstract Unix datagram socket per receiver, and SCM_RIGHTS.
 * A cuMem allocation exported as a POSIX file descriptor reaches a peer process this way (a descriptor number
 * means nothing in another process). Datagrams need no connection: a sender names the receiver's socket. */
#ifndef DCCL_UTIL_FD_PASS_H_
#define DCCL_UTIL_FD_PASS_H_

#include <stddef.h>
#include <stdint.h>

#include "dccl.h"

#define DCCL_FD_NAME_BYTES 48

/* Binds a new socket under a name unique to this process and `tag`, written into `name` (DCCL_FD_NAME_BYTES). */
ncclResult_t dccl_fd_socket_open(uint64_t tag, int *sock, char name[DCCL_FD_NAME_BYTES]);
void dccl_fd_socket_close(int sock);
/* Sends `fd` with `bytes` of data to the socket called `to`. Without waiting: ncclInProgress while the receiver's
 * queue is full. */
ncclResult_t dccl_fd_send(int sock, const char to[DCCL_FD_NAME_BYTES], int fd, const void *data, size_t bytes);
/* Receives one descriptor (the caller closes it) and its data: ncclInProgress, with nothing recorded, when none
 * arrives within timeout_ms. */
ncclResult_t dccl_fd_recv(int sock, int *fd, void *data, size_t bytes, int timeout_ms);

/* What travels with a descriptor in an exchange: its sender, whether it is the thing asked for (0: a stand-in, so
 * that no receiver waits for a descriptor its sender could not make), and what it names (the caller's meaning). */
struct dccl_fd_note {
  int32_t rank, ok;
  uint64_t tag;
};
/* One descriptor to send in an exchange, and where. */
struct dccl_fd_letter {
  const char *to; /* the receiver's socket name */
  int fd;         /* stays the caller's */
  struct dccl_fd_note note;
};
/* Sends every letter and receives `expected` descriptors into fds[] and notes[] in arrival order (the caller closes
 * them). Sends never block: while a receiver's queue is full this rank drains its own, so ranks that send to each
 * other at once cannot wedge. Errors: a socket's; ncclRemoteError, naming `what`, when fewer than `expected` came
 * within timeout_ms or `stop` (NULL: none; a communicator's abort flag) became nonzero while waiting (those that
 * came are closed on any error). */
/* How long an exchange waits: DCCL_TIMEOUT, or 60 s where that is unset (no exchange waits forever). */
int64_t dccl_fd_exchange_timeout_ms(void);
ncclResult_t dccl_fd_exchange(int sock, const struct dccl_fd_letter *out, int nout, int expected, int *fds,
                              struct dccl_fd_note *notes, int64_t timeout_ms, const _Atomic int *stop,
                              const char *what);

#endif
