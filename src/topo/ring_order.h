/* Ordering ranks into rings: the ranks of each host stay together, so a ring crosses between hosts exactly once
 * per host boundary (twice in all for two hosts), whatever the rank numbering. */
#ifndef DCCL_RING_ORDER_H_
#define DCCL_RING_ORDER_H_

#include <stdint.h>

/* order[i] = the rank at ring position i. Hosts appear in the order of their lowest rank; ranks of a host in
 * increasing order. Returns the number of distinct hosts. */
int dccl_ring_order(const uint64_t *host_hash, int nranks, int *order);
/* The most ranks one host has: the longest run of one host in an order dccl_ring_order made. */
int dccl_ring_busiest_host(const uint64_t *host_hash, const int *order, int nranks);
/* How many times the ring order[0..n) crosses from one host to another (counting the wrap-around). */
int dccl_ring_host_crossings(const uint64_t *host_hash, const int *order, int nranks);

#endif
