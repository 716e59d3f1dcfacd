/* Blocking TCP sockets with a deadline (util/deadline.h) and an abort flag, either of which may be absent. */
#ifndef DCCL_UTIL_SOCKET_H_
#define DCCL_UTIL_SOCKET_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "dccl.h"

/* Creates a listening TCP socket on addr (port 0: any) and writes back the bound address. */
ncclResult_t dccl_socket_listen(struct sockaddr_storage *addr, int *fd);
/* Accepts one pending connection on a nonblocking listener: *fd = -1 if none is waiting. */
ncclResult_t dccl_socket_accept(int listen_fd, int *fd, struct sockaddr_storage *peer);
/* Connects with retries until the deadline (or `timeout_ms`); blocking socket returned. */
ncclResult_t dccl_socket_connect_wait(const struct sockaddr_storage *addr, int64_t deadline_ns, _Atomic int *abort_flag,
                                      int *fd);
ncclResult_t dccl_socket_connect(const struct sockaddr_storage *addr, int timeout_ms, int *fd);
/* Full send/recv on a blocking socket; an EOF is ncclRemoteError. */
ncclResult_t dccl_socket_send_wait(int fd, const void *data, size_t size, _Atomic int *abort_flag, int64_t deadline_ns);
ncclResult_t dccl_socket_recv_wait(int fd, void *data, size_t size, _Atomic int *abort_flag, int64_t deadline_ns);
ncclResult_t dccl_socket_send_all(int fd, const void *data, size_t size);
ncclResult_t dccl_socket_recv_all(int fd, void *data, size_t size, _Atomic int *abort_flag);
void dccl_socket_set_nodelay(int fd);

#endif
