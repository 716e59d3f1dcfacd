/* Helpers shared by the fault tests (see fault_harness.h). */
#include "fault_harness.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int fh_failures;

static double fh_start_time;

double fh_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
  if (fh_start_time == 0) fh_start_time = now; /* log lines count from the first look at the clock */
  return now;
}

static double fh_elapsed(void) {
  if (fh_start_time == 0) fh_start_time = fh_now();
  return fh_now() - fh_start_time;
}

void fh_fail(const char *file, int line, const char *fmt, ...) {
  char text[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[%8.3f pid %d] FAIL %s:%d: %s\n", fh_elapsed(), (int)getpid(), file, line, text);
  fflush(stderr);
  fh_failures++;
}

void fh_note(const char *fmt, ...) {
  char text[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  printf("[%8.3f pid %d] %s\n", fh_elapsed(), (int)getpid(), text);
  fflush(stdout);
}

void fh_sleep(double seconds) {
  if (seconds <= 0) return;
  struct timespec ts;
  ts.tv_sec = (time_t)seconds;
  ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void *fh_shared_alloc(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    return NULL;
  }
  return p; /* anonymous mappings start zeroed */
}

void fh_shared_free(void *p, size_t bytes) {
  if (p) munmap(p, bytes);
}

pid_t fh_spawn(int (*fn)(void *arg, int index), void *arg, int index) {
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return -1;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(99); /* the parent died before prctl took effect */
    fh_failures = 0;                     /* the child counts its own failures */
    int rc = fn(arg, index);
    exit(rc);
  }
  return pid;
}

int fh_wait_until(pid_t *pids, int n, double deadline, int *status, int *killed) {
  int remaining = 0, nkilled = 0;
  double started = fh_now();
  for (int i = 0; i < n; i++) {
    if (killed) killed[i] = 0;
    status[i] = 0;
    if (pids[i] > 0) remaining++;
  }
  int *done = calloc((size_t)n, sizeof(int));
  if (!done) return -1;
  for (int i = 0; i < n; i++)
    if (pids[i] <= 0) done[i] = 1;
  while (remaining > 0) {
    for (int i = 0; i < n; i++) {
      if (done[i]) continue;
      int st;
      pid_t r = waitpid(pids[i], &st, WNOHANG);
      if (r == pids[i] || (r < 0 && errno == ECHILD)) {
        status[i] = (r == pids[i]) ? st : -1;
        done[i] = 1;
        remaining--;
      }
    }
    if (remaining == 0) break;
    if (fh_now() >= deadline) {
      for (int i = 0; i < n; i++) {
        if (done[i]) continue;
        kill(pids[i], SIGKILL);
        int st = 0;
        while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR) {
        }
        status[i] = st;
        done[i] = 1;
        if (killed) killed[i] = 1;
        nkilled++;
      }
      break;
    }
    /* Poll fast at first (short waits end promptly), then slowly (a long wait costs the waiter no CPU). */
    double waited = fh_now() - started;
    fh_sleep(waited < 0.2 ? 0.002 : 0.02);
  }
  free(done);
  return nkilled;
}

int fh_wait_one(pid_t pid, double deadline, int *status) {
  int killed = 0;
  fh_wait_until(&pid, 1, deadline, status, &killed);
  return killed;
}

const char *fh_status_str(int status, char *buf, size_t len) {
  if (status == -1)
    snprintf(buf, len, "not a child");
  else if (WIFEXITED(status))
    snprintf(buf, len, "exit %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else
    snprintf(buf, len, "status 0x%x", status);
  return buf;
}

int fh_status_ok(int status) { return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

/* --- /dev/shm --- */

static int fh_is_dccl_name(const char *name) { return strncmp(name, "dccl-", 5) == 0; }

void fh_shm_snapshot_take(struct fh_shm_snapshot *s) {
  s->count = 0;
  s->names = NULL;
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  int cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!fh_is_dccl_name(e->d_name)) continue;
    if (s->count == cap) {
      cap = cap ? cap * 2 : 16;
      void *grown = realloc(s->names, (size_t)cap * sizeof *s->names);
      if (!grown) break;
      s->names = grown;
    }
    fh_copy_text(s->names[s->count++], sizeof s->names[0], e->d_name);
  }
  closedir(d);
}

void fh_shm_snapshot_free(struct fh_shm_snapshot *s) {
  free(s->names);
  s->names = NULL;
  s->count = 0;
}

static int fh_in_snapshot(const struct fh_shm_snapshot *s, const char *name) {
  for (int i = 0; i < s->count; i++)
    if (strcmp(s->names[i], name) == 0) return 1;
  return 0;
}

/* Does any process map /dev/shm/<name> or hold it open? Scans /proc (we run as the same user as the tests). */
static int fh_shm_in_use(const char *name) {
  char path[300];
  snprintf(path, sizeof path, "/dev/shm/%s", name);
  size_t plen = strlen(path);
  DIR *proc = opendir("/proc");
  if (!proc) return 0;
  int used = 0;
  struct dirent *p;
  while (!used && (p = readdir(proc)) != NULL) {
    if (!isdigit((unsigned char)p->d_name[0])) continue;
    char file[300];
    snprintf(file, sizeof file, "/proc/%s/maps", p->d_name);
    FILE *f = fopen(file, "r");
    if (f) {
      char line[1024];
      while (!used && fgets(line, sizeof line, f)) {
        char *at = strstr(line, path);
        if (at && (at[plen] == '\n' || at[plen] == ' ' || at[plen] == '\0')) used = 1;
      }
      fclose(f);
    }
    snprintf(file, sizeof file, "/proc/%s/fd", p->d_name);
    DIR *fds = used ? NULL : opendir(file);
    if (fds) {
      struct dirent *fe;
      while (!used && (fe = readdir(fds)) != NULL) {
        char link[600], target[400];
        snprintf(link, sizeof link, "%s/%s", file, fe->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = '\0';
        if (strcmp(target, path) == 0) used = 1;
      }
      closedir(fds);
    }
  }
  closedir(proc);
  return used;
}

/* Fills `out` with new, unused dccl-* names; returns their count. */
static int fh_shm_candidates(const struct fh_shm_snapshot *s, char (*out)[256], int cap) {
  int n = 0;
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < cap) {
    if (!fh_is_dccl_name(e->d_name) || fh_in_snapshot(s, e->d_name)) continue;
    if (fh_shm_in_use(e->d_name)) continue;
    fh_copy_text(out[n++], 256, e->d_name);
  }
  closedir(d);
  return n;
}

int fh_shm_check_leaks(const struct fh_shm_snapshot *s, const char *when) {
  enum { CAP = 64 };
  static char first[CAP][256], second[CAP][256];
  int n1 = fh_shm_candidates(s, first, CAP);
  if (n1 == 0) return 0;
  fh_sleep(0.3);
  int n2 = fh_shm_candidates(s, second, CAP);
  int leaks = 0;
  for (int i = 0; i < n2; i++) {
    int seen_before = 0;
    for (int j = 0; j < n1; j++)
      if (strcmp(first[j], second[i]) == 0) seen_before = 1;
    if (!seen_before) continue;
    FH_FAIL("/dev/shm/%s left behind (%s): no process maps or holds it; removed", second[i], when);
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%.255s", second[i]);
    unlink(path); /* reported; removed so later tests start clean */
    leaks++;
  }
  return leaks;
}

/* --- text --- */

int fh_text_has(const char *text, const char *needle) {
  if (!text || !needle) return 0;
  size_t n = strlen(needle);
  for (const char *p = text; *p; p++)
    if (strncasecmp(p, needle, n) == 0) return 1;
  return 0;
}

int fh_text_names_rank(const char *text, int rank) {
  if (!text) return 0;
  for (const char *p = text; *p; p++) {
    if (strncasecmp(p, "rank", 4) != 0) continue;
    if (p > text && isalnum((unsigned char)p[-1])) continue; /* "myrank" is not "rank" */
    const char *q = p + 4;
    if (*q == 's' || *q == 'S') continue; /* "ranks 3" is not naming rank 3 alone */
    int skipped = 0;
    while (*q && skipped < 3 && (*q == ' ' || *q == '=' || *q == ':' || *q == '#')) {
      q++;
      skipped++;
    }
    if (!isdigit((unsigned char)*q)) continue;
    char *end;
    long v = strtol(q, &end, 10);
    if (v == rank && !isdigit((unsigned char)*end)) return 1;
  }
  return 0;
}

void fh_copy_text(char *dst, size_t len, const char *src) {
  if (len == 0) return;
  if (!src) src = "(null)";
  size_t n = strlen(src);
  if (n >= len) n = len - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* --- data --- */

float fh_pattern(int rank, size_t index, int iter) {
  return (float)((rank + 1) * (int)((index + (size_t)iter) % 7 + 1));
}

void fh_fill(float *buf, size_t count, int rank, int iter) {
  for (size_t i = 0; i < count; i++) buf[i] = fh_pattern(rank, i, iter);
}

size_t fh_check_sum(const float *buf, size_t count, int nranks, int iter, size_t *first_bad) {
  size_t bad = 0;
  float ranks_sum = (float)(nranks * (nranks + 1) / 2);
  for (size_t i = 0; i < count; i++) {
    float want = ranks_sum * (float)((i + (size_t)iter) % 7 + 1);
    if (buf[i] != want) {
      if (bad == 0 && first_bad) *first_bad = i;
      bad++;
    }
  }
  return bad;
}

ncclResult_t fh_unique_id(ncclUniqueId *id) {
  ncclResult_t rc = ncclGetUniqueId(id);
  if (rc != ncclSuccess) FH_FAIL("ncclGetUniqueId: %s (%s)", ncclGetErrorString(rc), ncclGetLastError(NULL));
  return rc;
}

int fh_run_ranks(int (*fn)(void *arg, int index), void *arg, int n, double timeout_s, int *status, int *killed) {
  pid_t *pids = calloc((size_t)n, sizeof(*pids));
  if (!pids) return -1;
  double t0 = fh_now();
  for (int r = 0; r < n; r++) pids[r] = fh_spawn(fn, arg, r);
  int res = fh_wait_until(pids, n, t0 + timeout_s, status, killed);
  free(pids);
  return res;
}

const char *fh_transport_arg(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "shm";
  if (strcmp(mode, "shm") != 0 && strcmp(mode, "socket") != 0) {
    fprintf(stderr, "usage: %s shm|socket\n", argv[0]);
    return NULL;
  }
  setenv("DCCL_TRANSPORT", mode, 1);
  return mode;
}
