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

#endif
