/* Socket addresses: the local one to be reached at, their lengths, and their text. */
#ifndef DCCL_UTIL_NET_ADDR_H_
#define DCCL_UTIL_NET_ADDR_H_

#include <stddef.h>
#include <sys/socket.h>

#include "dccl.h"

/* The address this host should be reached at, per DCCL_SOCKET_IFNAME / DCCL_SOCKET_FAMILY or automatically
 * (first non-loopback interface that is up; loopback if nothing else); port 0. */
ncclResult_t dccl_socket_local_addr(struct sockaddr_storage *addr);
socklen_t dccl_sockaddr_len(const struct sockaddr_storage *addr);
/* "1.2.3.4:5678" for logs. */
const char *dccl_socket_addr_str(const struct sockaddr_storage *addr, char *buf, size_t len);

#endif
