/* A communicator's ncclConfig_t: read from callers built against any NCCL version, checked, kept, inherited. */
#ifndef DCCL_COMM_CONFIG_H_
#define DCCL_COMM_CONFIG_H_

#include "dccl.h"

/* The config a communicator keeps. The strings are copied in, since the caller's may not outlive the call;
 * cfg.commName and cfg.netName point at them (or are NULL). A struct copy leaves those pointers at the original:
 * copy with dccl_config_copy, which moves them. */
struct dccl_comm_config {
  ncclConfig_t cfg;
  char comm_name[128];
  char net_name[64];
};

/* Reads `user` (NULL: inherit `parent` if given, else all defaults) into `out`: at most the smaller of the
 * caller's size and ours is read; a wrong magic, an impossible size or version, or a known field holding a value
 * NCCL does not allow is ncclInvalidArgument naming it; fields past the 2.28 struct are ignored (logged once).
 * Unset fields (NCCL_CONFIG_UNDEF_*) keep their defaults. `call` names the API call in messages. */
ncclResult_t dccl_config_read(const ncclConfig_t *user, const struct dccl_comm_config *parent,
                              struct dccl_comm_config *out, const char *call);
void dccl_config_copy(struct dccl_comm_config *dst, const struct dccl_comm_config *src);

#endif
