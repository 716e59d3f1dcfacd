/* Reading ncclConfig_t (comm_config.h). Its layout per NCCL version is in ../shared/docs/nccl-abi.md: 72 bytes in
 * 2.27, 80 in 2.28, 88 in 2.29, 96 in 2.30; each version only appends fields. */
#include "core/comm_config.h"

#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"
#include "util/log.h"

#define CONFIG_FIRST_VERSION NCCL_VERSION(2, 14, 0) /* the first NCCL with ncclConfig_t */

static void copy_name(char *dst, size_t len, const char *src, const char **field) {
  if (!src) {
    *field = NULL;
    return;
  }
  snprintf(dst, len, "%s", src);
  *field = dst;
}

void dccl_config_copy(struct dccl_comm_config *dst, const struct dccl_comm_config *src) {
  *dst = *src; /* the names come with it; only the pointers must move to dst's copies */
  if (src->cfg.commName) dst->cfg.commName = dst->comm_name;
  if (src->cfg.netName) dst->cfg.netName = dst->net_name;
}

/* A set field must lie in [lo, hi]. */
static ncclResult_t check_range(const char *call, const char *name, int v, int lo, int hi) {
  if (v == NCCL_CONFIG_UNDEF_INT || (v >= lo && v <= hi)) return ncclSuccess;
  return dccl_error(ncclInvalidArgument, "%s: config.%s = %d is not allowed (expected %d to %d)", call, name, v, lo,
                    hi);
}

static ncclResult_t check_fields(const ncclConfig_t *c, const char *call) {
  DCCLCHECK(check_range(call, "blocking", c->blocking, 0, 1));
  DCCLCHECK(check_range(call, "cgaClusterSize", c->cgaClusterSize, 0, 8));
  DCCLCHECK(check_range(call, "minCTAs", c->minCTAs, 1, INT_MAX));
  DCCLCHECK(check_range(call, "maxCTAs", c->maxCTAs, 1, INT_MAX));
  DCCLCHECK(check_range(call, "splitShare", c->splitShare, 0, 1));
  DCCLCHECK(check_range(call, "trafficClass", c->trafficClass, 0, INT_MAX));
  DCCLCHECK(check_range(call, "collnetEnable", c->collnetEnable, 0, 1));
  DCCLCHECK(check_range(call, "CTAPolicy", c->CTAPolicy, 0, NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO));
  DCCLCHECK(check_range(call, "shrinkShare", c->shrinkShare, 0, 1));
  DCCLCHECK(check_range(call, "nvlsCTAs", c->nvlsCTAs, 1, INT_MAX));
  DCCLCHECK(check_range(call, "nChannelsPerNetPeer", c->nChannelsPerNetPeer, 1, INT_MAX));
  DCCLCHECK(check_range(call, "nvlinkCentricSched", c->nvlinkCentricSched, 0, 1));
  if (c->minCTAs != NCCL_CONFIG_UNDEF_INT && c->maxCTAs != NCCL_CONFIG_UNDEF_INT && c->minCTAs > c->maxCTAs)
    return dccl_error(ncclInvalidArgument, "%s: config.minCTAs = %d exceeds config.maxCTAs = %d", call, c->minCTAs,
                      c->maxCTAs);
  return ncclSuccess;
}

ncclResult_t dccl_config_read(const ncclConfig_t *user, const struct dccl_comm_config *parent,
                              struct dccl_comm_config *out, const char *call) {
  static const ncclConfig_t defaults = NCCL_CONFIG_INITIALIZER;
  memset(out, 0, sizeof(*out));
  out->cfg = defaults;
  if (!user) {
    if (parent) dccl_config_copy(out, parent);
    return ncclSuccess;
  }
  if (user->magic != NCCL_CONFIG_MAGIC)
    return dccl_error(ncclInvalidArgument, "%s: config.magic is 0x%x, expected 0x%x (use NCCL_CONFIG_INITIALIZER)",
                      call, user->magic, NCCL_CONFIG_MAGIC);
  if (user->size < offsetof(ncclConfig_t, blocking) + sizeof(int) || user->size > (1u << 16))
    return dccl_error(ncclInvalidArgument, "%s: config.size is %zu: not the size of any ncclConfig_t", call,
                      user->size);
  if (user->version < CONFIG_FIRST_VERSION)
    return dccl_error(ncclInvalidArgument, "%s: config.version is %u: not an NCCL version with ncclConfig_t", call,
                      user->version);
  size_t take = user->size < sizeof(ncclConfig_t) ? user->size : sizeof(ncclConfig_t);
  memcpy(&out->cfg, user, take);
  out->cfg.size = sizeof(ncclConfig_t);
  out->cfg.version = NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  if (user->size > sizeof(ncclConfig_t)) {
    static atomic_flag told = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&told))
      DCCL_WARN(DCCL_INIT,
                "%s: config is %zu bytes from NCCL %u; the fields past the first %zu (NCCL 2.28) are "
                "ignored",
                call, user->size, user->version, sizeof(ncclConfig_t));
  }
  DCCLCHECK(check_fields(&out->cfg, call));
  copy_name(out->comm_name, sizeof out->comm_name, out->cfg.commName, &out->cfg.commName);
  copy_name(out->net_name, sizeof out->net_name, out->cfg.netName, &out->cfg.netName);
  return ncclSuccess;
}
