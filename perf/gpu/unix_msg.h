/* Messages between the processes of a GPU measurement: a SOCK_SEQPACKET socket pair, one send = one message,
 * optionally carrying a file descriptor (SCM_RIGHTS), which is how a cuMem POSIX-fd handle travels. */
#ifndef DCCL_PERF_GPU_UNIX_MSG_H_
#define DCCL_PERF_GPU_UNIX_MSG_H_

#include <stddef.h>

/* A connected pair; receives on either end give up after timeout_s (a dead or stuck peer ends the wait). */
int msg_pair(int fds[2], int timeout_s);
/* Sends len bytes and, when fd >= 0, that descriptor with them. 0 on success, -1 on error. */
int msg_send(int sock, const void *buf, size_t len, int fd);
/* Receives one message of exactly len bytes; *fd gets a descriptor sent with it, or -1 (fd may be NULL).
 * 0 on success, -1 on error, timeout or a message of another length. */
int msg_recv(int sock, void *buf, size_t len, int *fd);
/* Both sides call it: each returns once the other has reached it too. 0 or -1. */
int msg_barrier(int sock);

#endif
