/* The file-loading API (dccl.h, docs/storage.md): one process's load, and the collective load in which each rank
 * reads 1/N of the range and an all-gather gives every rank all of it, so the file is read once per job. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "storage/file_load.h"
#include "util/cuda_driver.h"
#include "util/error.h"

/* A host destination: the stream's earlier work (which may still read the buffer) finishes first, as for a
 * host-buffer collective. A GPU destination is ordered on the stream itself (load_sink_cuda.c). */
static ncclResult_t check_destination(const char *call, const void *buf, cudaStream_t stream) {
  if (buf && dccl_cuda_is_device_ptr(buf)) return ncclSuccess;
  return dccl_cuda_host_op_on_stream(stream, call);
}

static ncclResult_t open_file(const char *call, const char *path, int *fd) {
  if (!path) return dccl_error(ncclInvalidArgument, "%s: path is NULL", call);
  *fd = open(path, O_RDONLY | O_CLOEXEC);
  if (*fd < 0) return dccl_error(ncclInvalidArgument, "%s: cannot open %s: %s", call, path, strerror(errno));
  return ncclSuccess;
}

ncclResult_t dcclFileLoad(const char *path, size_t offset, size_t bytes, void *buf, cudaStream_t stream,
                          dcclLoad_t *load) {
  if (!load) return dccl_error(ncclInvalidArgument, "dcclFileLoad: load is NULL");
  *load = NULL;
  DCCLCHECK(check_destination("dcclFileLoad", buf, stream));
  int fd;
  DCCLCHECK(open_file("dcclFileLoad", path, &fd));
  return dccl_file_load_start(fd, 1, path, offset, bytes, buf, stream, load);
}

ncclResult_t dcclFileLoadFd(int fd, size_t offset, size_t bytes, void *buf, cudaStream_t stream, dcclLoad_t *load) {
  if (!load) return dccl_error(ncclInvalidArgument, "dcclFileLoadFd: load is NULL");
  *load = NULL;
  DCCLCHECK(check_destination("dcclFileLoadFd", buf, stream));
  char name[32];
  snprintf(name, sizeof(name), "file descriptor %d", fd);
  return dccl_file_load_start(fd, 0, name, offset, bytes, buf, stream, load);
}

/* Reads this rank's part (and, on every rank, the few bytes past the last whole part), and waits. */
static ncclResult_t read_own_part(int rank, int nranks, const char *path, size_t offset, size_t bytes, char *buf,
                                  cudaStream_t stream) {
  size_t part = bytes / (size_t)nranks, whole = part * (size_t)nranks;
  int fd;
  DCCLCHECK(open_file("dcclCommFileLoad", path, &fd));
  dcclLoad_t mine = NULL, tail = NULL;
  ncclResult_t res = dccl_file_load_start(fd, 0, path, offset + (size_t)rank * part, part, buf + (size_t)rank * part,
                                          stream, &mine);
  if (res == ncclSuccess && whole < bytes)
    res = dccl_file_load_start(fd, 0, path, offset + whole, bytes - whole, buf + whole, stream, &tail);
  if (mine) {
    ncclResult_t r = dcclLoadWait(mine);
    if (res == ncclSuccess) res = r;
  }
  if (tail) {
    ncclResult_t r = dcclLoadWait(tail);
    if (res == ncclSuccess) res = r;
  }
  close(fd);
  return res;
}

ncclResult_t dcclCommFileLoad(ncclComm_t comm, const char *path, size_t offset, size_t bytes, void *buf,
                              cudaStream_t stream) {
  int rank, nranks;
  if (!comm) return dccl_error(ncclInvalidArgument, "dcclCommFileLoad: communicator is NULL");
  DCCLCHECK(ncclCommUserRank(comm, &rank));
  DCCLCHECK(ncclCommCount(comm, &nranks));
  /* The ranks' ranges must agree: a rank asked for other bytes would give the others the wrong part. The largest
   * and (negated) smallest offset and byte count, in one all-reduce. */
  int64_t mine[4] = {(int64_t)offset, -(int64_t)offset, (int64_t)bytes, -(int64_t)bytes}, all[4];
  DCCLCHECK(ncclAllReduce(mine, all, 4, ncclInt64, ncclMax, comm, NULL));
  if (all[0] != -all[1] || all[2] != -all[3])
    return dccl_error(ncclInvalidUsage,
                      "dcclCommFileLoad: the ranks asked for different ranges of %s (offsets %lld to %lld, byte counts "
                      "%lld to %lld): every rank must pass the same offset and bytes",
                      path ? path : "(null)", (long long)-all[1], (long long)all[0], (long long)-all[3],
                      (long long)all[2]);
  ncclResult_t res = check_destination("dcclCommFileLoad", buf, stream);
  if (res == ncclSuccess) res = read_own_part(rank, nranks, path, offset, bytes, buf, stream);
  char why[512];
  snprintf(why, sizeof(why), "%s", res == ncclSuccess ? "" : ncclGetLastError(comm));
  /* Every rank learns whether all read their part before any waits in the all-gather for one that failed: the
   * lowest failed rank + 1, or 0. */
  int failed = res == ncclSuccess ? 0 : nranks - rank, worst = 0;
  ncclResult_t agree = ncclAllReduce(&failed, &worst, 1, ncclInt32, ncclMax, comm, NULL);
  if (agree != ncclSuccess) return agree;
  if (worst) {
    int who = nranks - worst;
    if (who == rank) return dccl_error(res, "rank %d: %s", rank, why);
    return dccl_error(ncclSystemError, "dcclCommFileLoad: rank %d could not read its part of %s (its error says why)",
                      who, path ? path : "(null)");
  }
  size_t part = bytes / (size_t)nranks;
  if (part == 0) return ncclSuccess; /* fewer bytes than ranks: every rank read them all */
  /* GPU memory: the all-gather runs on the caller's stream, after the loads' copies (ordered there). */
  cudaStream_t on = buf && dccl_cuda_is_device_ptr(buf) ? stream : NULL;
  return ncclAllGather((char *)buf + (size_t)rank * part, buf, part, ncclChar, comm, on);
}
