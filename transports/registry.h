/* The transport registry: every transport of this build in one priority-ordered table. Adding a transport is a
 * new folder with its ops table and one line in registry.c (docs/design.md, "Adding a transport"). */
#ifndef DCCL_TRANSPORT_REGISTRY_H_
#define DCCL_TRANSPORT_REGISTRY_H_

#include <stddef.h>

#include "transports/transport.h"

/* The registered transports, highest priority first: a link uses the first one whose can_connect accepts the
 * pair (host-local ones only between ranks of one host). */
int dccl_transport_count(void);
const struct dccl_transport *dccl_transport_at(int index);
/* By name or alias; NULL if this build has none of that name. */
const struct dccl_transport *dccl_transport_find(const char *name);
/* "shm, net_ib, socket": the names, for messages. */
const char *dccl_transport_names(void);

/* Completes a provider's table into `out`: copies the first table->size bytes, fills every op it lacks with the
 * "not supported" default and sets the index. -1 (with the reason in `why`) when a required op is missing or the
 * size is impossible. Used by the registry; public for its test. */
int dccl_transport_complete(struct dccl_transport *out, const struct dccl_transport *table, int index, char *why,
                            size_t why_len);

#endif
