/* Loading files into host memory (src/storage, docs/storage.md): every size class and odd offsets and lengths, on
 * tmpfs and on disk, with the default chunking and with many small chunks; progress; every error (missing file,
 * directory, offset past the end, short file, permission denied, a file truncated while it is read) names the file
 * and leaks nothing; the collective load with 1-8 forked ranks, and with one rank unable to read its part (every
 * rank fails, none hangs). The bounce's pipeline (DCCL_FILE_PATH=bounce) and its O_DIRECT reads
 * (DCCL_FILE_PATH=direct: whole blocks around each chunk, where the file system allows O_DIRECT; the test says
 * where it does) run the same cases. Each configuration runs in a forked child, since parameters are read once a
 * process. */
#define _GNU_SOURCE /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dccl.h"
#include "forked_case.h"
#include "storage/cufile.h"
#include "storage/file_load.h"

static char disk_dir[512], shm_dir[] = "/dev/shm";

static unsigned char byte_at(size_t i) { return (unsigned char)(i * 131u + (i >> 12)); }

/* Writes a file of `bytes` pattern bytes; returns its path (static storage per slot). */
static const char *make_file(const char *dir, const char *name, size_t bytes) {
  static char paths[8][600];
  static int next;
  char *path = paths[next++ % 8];
  snprintf(path, 600, "%s/dccl-test-load-%d-%s", dir, (int)getpid(), name);
  FILE *f = fopen(path, "wb");
  if (!f) return NULL;
  unsigned char buf[65536];
  for (size_t done = 0; done < bytes;) {
    size_t n = bytes - done < sizeof buf ? bytes - done : sizeof buf;
    for (size_t i = 0; i < n; i++) buf[i] = byte_at(done + i);
    fwrite(buf, 1, n, f);
    done += n;
  }
  fclose(f);
  return path;
}

static int matches(const unsigned char *got, size_t offset, size_t bytes) {
  for (size_t i = 0; i < bytes; i++)
    if (got[i] != byte_at(offset + i)) return 0;
  return 1;
}

static void ranges(void) {
  const char *dirs[] = {shm_dir, disk_dir};
  const size_t sizes[] = {0, 1, 4095, 4096, 4097, (1 << 20) + 3, (9 << 20) + 7};
  const size_t offsets[] = {0, 1, 4095, 12345};
  for (int d = 0; d < 2; d++) {
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      if (d == 0 && sizes[s] > (2 << 20)) continue; /* /dev/shm may be small (64 MiB in containers) */
      size_t file_bytes = sizes[s] + 20000;
      const char *path = make_file(dirs[d], "range", file_bytes);
      CHECK(path != NULL);
      for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
        unsigned char *buf = malloc(sizes[s] + 1);
        dcclLoad_t load = NULL;
        CHECK(dcclFileLoad(path, offsets[o], sizes[s], buf, NULL, &load) == ncclSuccess && load);
        CHECK(dcclLoadWait(load) == ncclSuccess);
        if (!matches(buf, offsets[o], sizes[s])) {
          fprintf(stderr, "  %s: %zu bytes from %zu differ\n", path, sizes[s], offsets[o]);
          case_failures++;
        }
        free(buf);
      }
      /* The same through a descriptor, which stays open. */
      int fd = open(path, O_RDONLY);
      unsigned char *buf = malloc(sizes[s] + 1);
      dcclLoad_t load = NULL;
      CHECK(dcclFileLoadFd(fd, 3, sizes[s], buf, NULL, &load) == ncclSuccess);
      CHECK(dcclLoadWait(load) == ncclSuccess && matches(buf, 3, sizes[s]));
      CHECK(fcntl(fd, F_GETFD) != -1);
      close(fd);
      free(buf);
      unlink(path);
    }
  }
}

/* Progress: total at once, done reaching it, ncclSuccess at the end. */
static void progress(void) {
  size_t bytes = 24 << 20;
  const char *path = make_file(disk_dir, "progress", bytes);
  unsigned char *buf = malloc(bytes);
  dcclLoad_t load = NULL;
  CHECK(dcclFileLoad(path, 0, bytes, buf, NULL, &load) == ncclSuccess);
  size_t done = 0, total = 0;
  ncclResult_t r;
  while ((r = dcclLoadQuery(load, &done, &total)) == ncclInProgress) CHECK(total == bytes && done <= bytes);
  CHECK(r == ncclSuccess && done == bytes && total == bytes);
  CHECK(dcclLoadWait(load) == ncclSuccess && matches(buf, 0, bytes));
  free(buf);
  unlink(path);
}

static int open_fds(void) {
  int n = 0;
  for (int fd = 0; fd < 1024; fd++) n += fcntl(fd, F_GETFD) != -1;
  return n;
}

/* An error at the start: returned by the call, naming the file, with nothing left open. */
static void refused(const char *path, size_t offset, size_t bytes, const char *text) {
  int before = open_fds();
  char buf[64];
  dcclLoad_t load = (dcclLoad_t)1;
  ncclResult_t r = dcclFileLoad(path, offset, bytes, buf, NULL, &load);
  const char *why = ncclGetLastError(NULL);
  int ok = r != ncclSuccess && load == NULL && strstr(why, path) && strstr(why, text) && open_fds() == before;
  if (!ok) {
    fprintf(stderr, "  %s [%zu, +%zu): got %d \"%s\", want \"%s\"\n", path, offset, bytes, (int)r, why, text);
    case_failures++;
  }
}

static void errors(void) {
  char missing[600];
  snprintf(missing, sizeof missing, "%s/dccl-test-load-none-%d", disk_dir, (int)getpid());
  refused(missing, 0, 10, "No such file");
  refused(disk_dir, 0, 10, "is a directory");
  const char *path = make_file(disk_dir, "short", 1000);
  refused(path, 1001, 1, "past the end");
  refused(path, 10, 1000, "short file");
  unlink(path);
}

/* Permission denied: as a user that may not read the file (root reads everything, so the child becomes nobody). */
static void permission(void) {
  const char *path = make_file(disk_dir, "private", 100);
  chmod(path, 0);
  pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
    char buf[100];
    dcclLoad_t load = NULL;
    ncclResult_t r = dcclFileLoad(path, 0, 100, buf, NULL, &load);
    _exit(r != ncclSuccess && strstr(ncclGetLastError(NULL), "Permission denied") && strstr(ncclGetLastError(NULL), path)
              ? 0
              : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  unlink(path);
}

/* A file cut short while it is read: the load fails naming the file, and the process lives. 64 MiB read 4 KiB at a
 * time by one thread takes far longer than the truncation that follows the call. */
static void truncated(void) {
  size_t bytes = 64 << 20;
  const char *path = make_file(disk_dir, "truncated", bytes);
  unsigned char *buf = malloc(bytes);
  dcclLoad_t load = NULL;
  CHECK(dcclFileLoad(path, 0, bytes, buf, NULL, &load) == ncclSuccess);
  CHECK(truncate(path, 1 << 20) == 0);
  ncclResult_t r = dcclLoadWait(load);
  const char *why = ncclGetLastError(NULL);
  CHECK(r == ncclSystemError && strstr(why, path) && strstr(why, "shrank"));
  free(buf);
  unlink(path);
}

/* The collective load: nranks forked ranks; rank `bad` (or -1) names a file that does not exist, or, with
 * `shifted`, asks for a range one byte further on (every rank must fail naming the ranges). */
static int collective_case(int nranks, size_t offset, size_t bytes, int bad, int shifted) {
  const char *path = make_file(disk_dir, "collective", offset + bytes + 100);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 0;
  pid_t pids[8];
  for (int r = 0; r < nranks; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      alarm(30);
      ncclComm_t comm;
      if (ncclCommInitRank(&comm, nranks, id, r) != ncclSuccess) _exit(2);
      unsigned char *buf = malloc(bytes + 1);
      memset(buf, 0xee, bytes + 1);
      ncclResult_t res = dcclCommFileLoad(comm, r == bad && !shifted ? "/nonexistent/dccl-file" : path,
                                          offset + (r == bad && shifted), bytes, buf, NULL);
      const char *why = ncclGetLastError(comm);
      int ok;
      if (shifted) {
        ok = res == ncclInvalidUsage && strstr(why, "different ranges") && strstr(why, path);
        if (!ok) fprintf(stderr, "  rank %d: %d \"%s\"\n", r, (int)res, why);
      } else if (bad < 0) {
        ok = res == ncclSuccess && matches(buf, offset, bytes) && buf[bytes] == 0xee;
      } else {
        char who[32];
        snprintf(who, sizeof who, "rank %d", bad);
        ok = res != ncclSuccess && strstr(why, who) && (r != bad || strstr(why, "/nonexistent/dccl-file"));
        if (!ok) fprintf(stderr, "  rank %d: %d \"%s\"\n", r, (int)res, why);
      }
      ncclCommDestroy(comm);
      _exit(ok ? 0 : 1);
    }
  }
  int ok = 1;
  for (int r = 0; r < nranks; r++) {
    int status = 0;
    ok &= waitpid(pids[r], &status, 0) == pids[r] && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  unlink(path);
  return ok;
}

static int collective(int nranks, size_t offset, size_t bytes, int bad) {
  return collective_case(nranks, offset, bytes, bad, 0);
}

static void collectives(void) {
  for (int n = 1; n <= 8; n++) {
    CHECK(collective(n, 7, (3 << 20) + 5, -1));
    CHECK(collective(n, 0, 5, -1)); /* fewer bytes than ranks */
  }
  CHECK(collective(4, 3, 1 << 20, 2));
  CHECK(collective_case(3, 3, 1 << 20, 1, 1));
}

/* DCCL_FILE_PATH=auto (what GPU destinations get): chunks mostly out of the page cache are read with O_DIRECT,
 * cached ones with pread. A file on disk whose pages were dropped: every chunk O_DIRECT; read once more so its
 * pages are cached: none. Skipped (said so) where O_DIRECT or dropping pages is not allowed. */
static size_t load_counting_direct(const char *path, size_t bytes, unsigned char *buf) {
  dcclLoad_t load = NULL;
  CHECK(dcclFileLoad(path, 0, bytes, buf, NULL, &load) == ncclSuccess && load);
  while (dcclLoadQuery(load, NULL, NULL) == ncclInProgress) usleep(1000);
  size_t direct = dccl_file_load_direct_chunks(load);
  CHECK(dcclLoadWait(load) == ncclSuccess && matches(buf, 0, bytes));
  return direct;
}

static int mostly_cached(const char *path, size_t bytes) {
  int fd = open(path, O_RDONLY);
  void *m = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return -1;
  size_t pages = (bytes + 4095) / 4096, cached = 0;
  unsigned char *vec = malloc(pages);
  if (mincore(m, bytes, vec) == 0)
    for (size_t i = 0; i < pages; i++) cached += vec[i] & 1;
  free(vec);
  munmap(m, bytes);
  return 2 * cached >= pages;
}

/* cuFile's answer about a file (storage/cufile.h): on machines without GPUDirect Storage a reason naming
 * the library, its driver or the registration. (cuFile reads GPU memory only: DCCL_FILE_PATH=cufile loads host
 * memory as `auto` does; gpu.file_load_cufile_reads reads through it.) */
static void cufile_asked(void) {
  const char *path = make_file(disk_dir, "cufile", 4096);
  int fd = open(path, O_RDONLY);
  char why[300] = "";
  void *handle = dccl_cufile_open(fd, why, sizeof(why));
  int accepted = handle != NULL;
  dccl_cufile_close(handle);
  close(fd);
  printf("  cuFile: %s\n", why);
  CHECK(strstr(why, "cuFile") || strstr(why, "libcufile"));
  CHECK(accepted == (strstr(why, "registers the file") != NULL));
  unlink(path);
}

static void auto_by_page_cache(void) {
  const size_t bytes = 16 << 20, chunks = 16; /* DCCL_FILE_CHUNK=1 MiB */
  const char *path = make_file(disk_dir, "auto", bytes);
  CHECK(path != NULL);
  unsigned char *buf = malloc(bytes);
  int fd = open(path, O_RDONLY | O_DIRECT);
  int direct_ok = fd >= 0;
  if (fd >= 0) close(fd);
  fd = open(path, O_RDONLY);
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  if (!direct_ok || mostly_cached(path, bytes) != 0) {
    printf("SKIP: O_DIRECT %s, pages %s on %s\n", direct_ok ? "allowed" : "refused",
           mostly_cached(path, bytes) == 0 ? "dropped" : "not dropped", disk_dir);
  } else {
    size_t cold = load_counting_direct(path, bytes, buf);
    CHECK(cold == chunks);
    printf("  cold: %zu of %zu chunks with O_DIRECT\n", cold, chunks);
  }
  fd = open(path, O_RDONLY); /* now cache it */
  for (ssize_t n; (n = read(fd, buf, bytes)) > 0;) {
  }
  close(fd);
  size_t warm = load_counting_direct(path, bytes, buf);
  CHECK(mostly_cached(path, bytes) != 1 || warm == 0);
  printf("  warm: %zu of %zu chunks with O_DIRECT\n", warm, chunks);
  free(buf);
  unlink(path);
}

/* An unknown DCCL_FILE_PATH is refused at the call, naming the file and the setting. */
static void path_refused(void) {
  const char *value = getenv("DCCL_FILE_PATH");
  const char *path = make_file(shm_dir, "paths", 4096);
  static char buf[4096];
  dcclLoad_t load = NULL;
  ncclResult_t res = dcclFileLoad(path, 0, sizeof buf, buf, NULL, &load);
  (void)value;
  CHECK(res == ncclInvalidArgument && load == NULL);
  CHECK(strstr(ncclGetLastError(NULL), "DCCL_FILE_PATH") != NULL && strstr(ncclGetLastError(NULL), path) != NULL);
  unlink(path);
}

/* The bounce's cases under DCCL_FILE_PATH=`setting`: ranges with the default chunks and with `small_chunk`-byte
 * chunks over 3 threads, progress, errors, a file truncated under one thread of 4 KiB chunks, collective loads. */
static int pipeline_cases(const char *setting, const char *small_chunk) {
  char path[64], chunk[64], name[160];
  snprintf(path, sizeof path, "DCCL_FILE_PATH=%s", setting);
  snprintf(chunk, sizeof chunk, "DCCL_FILE_CHUNK=%s", small_chunk);
  const char *whole[] = {path, NULL};
  const char *small[] = {path, chunk, "DCCL_FILE_THREADS=3", NULL};
  const char *one[] = {path, "DCCL_FILE_CHUNK=4096", "DCCL_FILE_THREADS=1", NULL};
  int ok = 1;
  snprintf(name, sizeof name, "ranges, %s", setting);
  ok &= run_case(name, ranges, whole);
  snprintf(name, sizeof name, "ranges, %s, %s-byte chunks over 3 threads", setting, small_chunk);
  ok &= run_case(name, ranges, small);
  snprintf(name, sizeof name, "progress, %s", setting);
  ok &= run_case(name, progress, whole);
  snprintf(name, sizeof name, "errors at the start, %s", setting);
  ok &= run_case(name, errors, whole);
  snprintf(name, sizeof name, "a file truncated while read, %s", setting);
  ok &= run_case(name, truncated, one);
  snprintf(name, sizeof name, "collective loads, %s", setting);
  ok &= run_case(name, collectives, small);
  return ok;
}

int main(void) {
  if (!getcwd(disk_dir, sizeof disk_dir)) return 1;
  int ok = 1;
  const char *small_chunks[] = {"DCCL_FILE_CHUNK=4096", "DCCL_FILE_THREADS=3", NULL};
  const char *one_thread[] = {"DCCL_FILE_CHUNK=4096", "DCCL_FILE_THREADS=1", NULL};
  ok &= run_case("ranges, default chunks", ranges, NULL);
  ok &= run_case("ranges, 4 KiB chunks over 3 threads", ranges, small_chunks);
  ok &= run_case("progress", progress, NULL);
  ok &= run_case("errors at the start", errors, NULL);
  ok &= run_case("permission denied", permission, NULL);
  ok &= run_case("a file truncated while read", truncated, one_thread);
  ok &= run_case("collective loads, 1-8 ranks", collectives, NULL);
  /* The bounce (pread into staging buffers, copied on by a sink): the GPU path's pipeline, on host memory. */
  ok &= pipeline_cases("bounce", "4096");
  /* O_DIRECT reads: odd offsets and lengths widen to whole blocks (5000-byte chunks straddle them); where the
   * file system refuses O_DIRECT the load falls back to buffered reads, so say where it ran. */
  const char *dirs[] = {shm_dir, disk_dir};
  for (int d = 0; d < 2; d++) {
    const char *probe = make_file(dirs[d], "probe", 4096);
    int fd = probe ? open(probe, O_RDONLY | O_DIRECT) : -1;
    printf("O_DIRECT on %s: %s\n", dirs[d], fd >= 0 ? "allowed" : strerror(errno));
    if (fd >= 0) close(fd);
    if (probe) unlink(probe);
  }
  ok &= pipeline_cases("direct", "5000");
  const char *auto_mode[] = {"DCCL_FILE_PATH=auto", "DCCL_FILE_CHUNK=1048576", NULL};
  const char *auto_small[] = {"DCCL_FILE_PATH=auto", "DCCL_FILE_CHUNK=5000", "DCCL_FILE_THREADS=3", NULL};
  ok &= run_case("auto: O_DIRECT for chunks out of the page cache, pread for cached ones", auto_by_page_cache,
                 auto_mode);
  ok &= run_case("ranges, auto, 5000-byte chunks over 3 threads", ranges, auto_small);
  const char *cufile[] = {"DCCL_FILE_PATH=cufile", "DCCL_FILE_CHUNK=5000", "DCCL_FILE_THREADS=3", NULL};
  ok &= run_case("cuFile's answer about a file", cufile_asked, NULL);
  ok &= run_case("ranges, cufile (host memory: as auto)", ranges, cufile);
  const char *unknown[] = {"DCCL_FILE_PATH=nonsense", NULL};
  ok &= run_case("DCCL_FILE_PATH=nonsense refused", path_refused, unknown);
  return ok ? 0 : 1;
}
