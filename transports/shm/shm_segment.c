/* POSIX shared-memory segments: create with the space reserved up front, open, unlink, and sweep the ones a dead
 * process left behind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transports/shm/shm_private.h"
#include "util/error.h"

#define MIB(b) ((double)(b) / (1024.0 * 1024.0))

ncclResult_t dccl_shm_segment_create(const char *name, size_t bytes, void **map) {
  *map = NULL;
  /* A size past RLIMIT_FSIZE would raise SIGXFSZ (fatal by default) in ftruncate: refuse it with words instead. */
  struct rlimit fsize;
  if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY && bytes > fsize.rlim_cur)
    return dccl_error(ncclSystemError,
                      "shared memory segment of %zu bytes (%.1f MiB) exceeds this process's file size limit "
                      "(RLIMIT_FSIZE, ulimit -f: %llu bytes); raise it or lower DCCL_NSLOTS / DCCL_CHUNK_SIZE",
                      bytes, MIB(bytes), (unsigned long long)fsize.rlim_cur);

  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0)
    return dccl_error(ncclSystemError, "cannot create shared memory segment /dev/shm%s: %s", name, strerror(errno));
  if (ftruncate(fd, (off_t)bytes) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(name);
    return dccl_error(ncclSystemError, "cannot size shared memory segment /dev/shm%s to %zu bytes: %s", name, bytes,
                      strerror(err));
  }
  /* Reserve every page now: tmpfs hands out pages lazily, and a page it cannot supply later is a SIGBUS in the
   * middle of a collective. Here it is an error the user can act on. */
  int err;
  do {
    err = posix_fallocate(fd, 0, (off_t)bytes);
  } while (err == EINTR);
  if (err != 0) {
    close(fd);
    shm_unlink(name);
    return dccl_error(ncclSystemError,
                      "cannot reserve %zu bytes (%.1f MiB) of shared memory in /dev/shm for segment %s: %s; "
                      "/dev/shm is too small (check `df -h /dev/shm`; in a container raise --shm-size) or lower "
                      "DCCL_NSLOTS / DCCL_CHUNK_SIZE, or use DCCL_TRANSPORT=socket",
                      bytes, MIB(bytes), name, strerror(err));
  }
  /* Not populated: tmpfs clears a reserved page when it is first mapped, and populating cleared all 2 MiB of every
   * link at creation (14 links per rank at 8 ranks, most of whose slots carry only small messages); the pages
   * stay reserved, so a first touch cannot fail. */
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  err = errno;
  close(fd); /* the mapping keeps the segment alive */
  if (p == MAP_FAILED) {
    shm_unlink(name);
    return dccl_error(ncclSystemError, "cannot map %zu bytes of shared memory segment /dev/shm%s: %s", bytes, name,
                      strerror(err));
  }
  *map = p;
  return ncclSuccess;
}

ncclResult_t dccl_shm_segment_open(const char *name, size_t bytes, void **map) {
  *map = NULL;
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0)
    return dccl_error(ncclSystemError, "cannot open shared memory segment /dev/shm%s made by the peer: %s", name,
                      strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < bytes) {
    close(fd);
    return dccl_error(ncclSystemError, "shared memory segment /dev/shm%s is smaller than the expected %zu bytes", name,
                      bytes);
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED)
    return dccl_error(ncclSystemError, "cannot map %zu bytes of shared memory segment /dev/shm%s: %s", bytes, name,
                      strerror(err));
  *map = p;
  return ncclSuccess;
}

void dccl_shm_segment_unlink(const char *name) {
  if (shm_unlink(name) != 0 && errno != ENOENT)
    DCCL_WARN(DCCL_SHM, "cannot unlink shared memory segment /dev/shm%s: %s", name, strerror(errno));
}

/* The creator pid encoded in a segment name, or 0 if the name is not one of ours. */
static pid_t segment_creator(const char *entry) {
  size_t plen = strlen(DCCL_SHM_PREFIX);
  if (strncmp(entry, DCCL_SHM_PREFIX, plen) != 0) return 0;
  char *end;
  errno = 0;
  long pid = strtol(entry + plen, &end, 10);
  if (errno != 0 || end == entry + plen || *end != '-' || pid <= 0 || pid > 0x7fffffffL) return 0;
  return (pid_t)pid;
}

int dccl_shm_sweep_stale(void) {
  DIR *dir = opendir("/dev/shm");
  if (!dir) return 0;
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    pid_t pid = segment_creator(e->d_name);
    if (pid == 0) continue;
    /* Gone: ESRCH (EPERM means the process exists under another user), or a zombie not yet reaped. */
    int gone = kill(pid, 0) != 0 && errno == ESRCH;
    char state;
    unsigned long long start;
    if (!gone) gone = dccl_shm_proc_stat(pid, &state, &start) == ncclSuccess && (state == 'Z' || state == 'X');
    if (!gone) continue;
    char name[DCCL_SHM_NAME_LEN + 2];
    if (snprintf(name, sizeof(name), "/%s", e->d_name) >= (int)sizeof(name)) continue;
    if (shm_unlink(name) == 0) {
      removed++;
      DCCL_INFO(DCCL_SHM, "removed stale shared memory segment /dev/shm%s: its creator pid %d no longer exists", name,
                (int)pid);
    }
  }
  closedir(dir);
  return removed;
}
