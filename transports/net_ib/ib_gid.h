/* Which GID a RoCE port uses to reach a peer. A GID table holds one entry per (address, RoCE version) of the
 * port's network device; the right one is the RoCEv2 entry of the local IP address that routes to the peer, found
 * by type and address rather than by a fixed index (the order of the table differs between machines). */
#ifndef DCCL_IB_GID_H_
#define DCCL_IB_GID_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

enum dccl_ib_gid_type { DCCL_IB_GID_IB = 0, DCCL_IB_GID_ROCE_V1 = 1, DCCL_IB_GID_ROCE_V2 = 2 };

struct dccl_ib_gid_entry {
  uint32_t index;
  uint32_t type; /* enum dccl_ib_gid_type */
  uint8_t gid[16];
};

/* Picks the GID index to use, or -1 (with the reason in `why`).
 *   forced_index >= 0 (DCCL_IB_GID_INDEX): that entry, if the table has it;
 *   local (may be NULL): the local address the kernel routes to the peer from; its RoCEv2 GID wins;
 *   otherwise the first RoCEv2 IPv4-mapped entry, then a global RoCEv2 IPv6 one, then any RoCEv2, then RoCEv1.
 * `why` always says what was chosen and why, for the log. */
int dccl_ib_select_gid(const struct dccl_ib_gid_entry *table, int n, const struct sockaddr_storage *local,
                       int forced_index, char *why, size_t why_len);

/* "::ffff:10.9.0.1" or "fe80::1": a GID as an address. */
const char *dccl_ib_gid_str(const uint8_t gid[16], char *buf, size_t len);

/* The local address the kernel would send from to reach `peer` (a routing lookup; nothing is sent). */
int dccl_ib_route_source(const struct sockaddr_storage *peer, struct sockaddr_storage *local);

#endif
