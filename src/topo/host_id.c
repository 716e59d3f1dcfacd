/* Host identity: hostname + boot id, so two containers sharing a hostname but not a kernel (or one machine
 * after a reboot) are different hosts, and DCCL_HOSTID may pretend otherwise for tests. */
#include "topo/host_id.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"
#include "util/params.h"

#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

uint64_t dccl_fnv1a64(uint64_t hash, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) {
    hash ^= p[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

/* Copies as much of src as fits in dst[64], always NUL-terminated. */
static void copy_truncated(char dst[64], const char *src) {
  size_t n = strlen(src);
  if (n > 63) n = 63;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* The kernel's boot id without its newline; "" if it cannot be read (the hostname alone then identifies). */
static void read_boot_id(char *out, size_t len) {
  out[0] = '\0';
  FILE *f = fopen(BOOT_ID_PATH, "re");
  if (!f) {
    DCCL_INFO(DCCL_INIT, "cannot read %s (%s); host identity is the hostname alone", BOOT_ID_PATH, strerror(errno));
    return;
  }
  if (!fgets(out, (int)len, f)) out[0] = '\0';
  fclose(f);
  out[strcspn(out, "\r\n")] = '\0';
}

/* DCCL_HOSTID's id for `rank`: the whole value, or with commas (`A,A,B,B`) the rank's entry, the last one for ranks
 * past the list, so ranks of one process can be on different pretend hosts. Copies at most 63 bytes. */
static void pretend_id(const char *value, int rank, char out[64]) {
  const char *start = value;
  for (int i = 0; i < rank; i++) {
    const char *comma = strchr(start, ',');
    if (!comma) break;
    start = comma + 1;
  }
  size_t n = strcspn(start, ",");
  if (n > 63) n = 63;
  memcpy(out, start, n);
  out[n] = '\0';
}

ncclResult_t dccl_host_identity(int rank, char hostname[64], char host_id[64], uint64_t *host_hash,
                                uint64_t *real_host_hash) {
  if (!hostname || !host_id || !host_hash || !real_host_hash)
    return dccl_error(ncclInvalidArgument, "dccl_host_identity: NULL argument");
  char name[256];
  if (gethostname(name, sizeof(name)) != 0)
    return dccl_error(ncclSystemError, "gethostname failed: %s", strerror(errno));
  name[sizeof(name) - 1] = '\0';
  copy_truncated(hostname, name);

  char boot_id[128];
  read_boot_id(boot_id, sizeof(boot_id));
  char real_id[sizeof(name) + sizeof(boot_id) + 1];
  snprintf(real_id, sizeof(real_id), "%s:%s", name, boot_id);
  *real_host_hash = dccl_fnv1a64(DCCL_FNV1A_INIT, real_id, strlen(real_id));

  const char *override = dccl_param_str(DCCL_PARAM_HOSTID);
  if (override && override[0]) {
    pretend_id(override, rank, host_id);
    *host_hash = dccl_fnv1a64(DCCL_FNV1A_INIT, host_id, strlen(host_id));
  } else {
    *host_hash = *real_host_hash;
    copy_truncated(host_id, real_id);
  }
  DCCL_TRACE(DCCL_INIT, "host identity %s (hash %016llx, real %016llx)", host_id, (unsigned long long)*host_hash,
             (unsigned long long)*real_host_hash);
  return ncclSuccess;
}
