/* Which host this process runs on, as the rest of the library compares it. */
#ifndef DCCL_HOST_ID_H_
#define DCCL_HOST_ID_H_

#include <stddef.h>
#include <stdint.h>

#include "dccl.h"

/* 64-bit FNV-1a over `len` bytes, continuing from `hash` (start with DCCL_FNV1A_INIT). */
#define DCCL_FNV1A_INIT 0xcbf29ce484222325ull
uint64_t dccl_fnv1a64(uint64_t hash, const void *data, size_t len);

/* Fills this process's identity:
 *  hostname        gethostname(), NUL-terminated;
 *  real_host_hash  hash of hostname + boot id: equal only for processes under one running kernel, which is what
 *                  shared memory needs;
 *  host_id/host_hash  DCCL_HOSTID if set (to split or merge "hosts" for testing; a comma-separated list gives
 *                  `rank` its entry), else the real identity.
 * host_id is the human-readable identity behind host_hash (truncated to fit; the hash covers all of it, except
 * a DCCL_HOSTID entry, which is cut at 63 bytes). */
ncclResult_t dccl_host_identity(int rank, char hostname[64], char host_id[64], uint64_t *host_hash,
                                uint64_t *real_host_hash);

#endif
