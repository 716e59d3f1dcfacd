/* The shared-memory transport's internals, shared by its files and its unit test. */
#ifndef DCCL_SHM_PRIVATE_H_
#define DCCL_SHM_PRIVATE_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dccl.h"
#include "transports/transport.h"

/* Every segment name starts with this, then the creator's pid: "/dccl-<pid>-<nonce>-<send>-<recv>-<lane>-<n>". */
#define DCCL_SHM_PREFIX "dccl-"
#define DCCL_SHM_NAME_LEN 128

/* Watches a peer process on this host for its death. */
struct dccl_shm_peer_watch {
  pid_t pid;
  int pidfd;                     /* -1: no pidfd (old kernel, seccomp): /proc is read instead */
  unsigned long long start_time; /* /proc/<pid>/stat field 22 at watch time, so a reused pid is not mistaken */
  int dead;                      /* already known dead */
};

/* Starts watching `pid` (alive now, or it is recorded as dead). Never fails: without pidfd it falls back. */
void dccl_shm_watch_start(struct dccl_shm_peer_watch *w, pid_t pid);
/* 1 while the process runs; 0 once it has ended (a zombie has ended). Never blocks. */
int dccl_shm_watch_alive(struct dccl_shm_peer_watch *w);
/* The /proc fallback alone (tests reach it directly): 1 alive, 0 ended, pid reused or unreadable. */
int dccl_shm_proc_alive(pid_t pid, unsigned long long start_time);
/* Reads /proc/<pid>/stat: state letter and start time; ncclSystemError if the process is not there. */
ncclResult_t dccl_shm_proc_stat(pid_t pid, char *state, unsigned long long *start_time);
void dccl_shm_watch_stop(struct dccl_shm_peer_watch *w);

/* Creates, sizes, reserves (posix_fallocate) and maps a new segment of `bytes`; on failure nothing is left in
 * /dev/shm and the error names the size and /dev/shm. */
ncclResult_t dccl_shm_segment_create(const char *name, size_t bytes, void **map);
/* Opens and maps an existing segment of at least `bytes`. */
ncclResult_t dccl_shm_segment_open(const char *name, size_t bytes, void **map);
/* shm_unlink, ignoring a name that is already gone. */
void dccl_shm_segment_unlink(const char *name);
/* Unlinks /dev/shm/dccl-<pid>-* segments whose creator pid no longer exists; returns how many. */
int dccl_shm_sweep_stale(void);

/* setup() with explicit geometry (the ops' setup reads DCCL_NSLOTS / DCCL_CHUNK_SIZE). */
ncclResult_t dccl_shm_setup_geometry(struct dccl_conn *conn, void *info, uint32_t nslots, uint64_t slot_bytes);

#endif
