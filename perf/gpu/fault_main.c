/* gpu_mps_fault fault|kill|kill-own|kill-idle [--label TEXT]
 * Three clients (an owner of the shared flag, another survivor and a victim) run kernels spinning on one flag in
 * the owner's memory; then the victim faults (an illegal address) or is killed (SIGKILL): kill while its kernel
 * spins on the shared flag, kill-own while it spins on its own memory, kill-idle with no kernel of its own
 * (it still holds the shared mapping). The survivors report
 * whether their kernels still run and what the driver says, then try to finish and to work on; new clients are
 * started while the survivors live and after all have exited. The coordinator never touches CUDA, so it can fork
 * clients at any time. Exit status: 0 the scenario ran to its end (whatever it showed), 2 it could not run. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault.h"
#include "gpu_common.h"
#include "ipc_region.h"
#include "unix_msg.h"

#define REPLY_TIMEOUT_S 12
#define PROBE_TIMEOUT_S 12

struct child {
  const char *name;
  enum fault_role role;
  pid_t pid;
  int sock;
  int alive;
};

static struct child *all_children;
static int n_children;

static void kill_children(int sig) {
  (void)sig;
  for (int i = 0; i < n_children; i++)
    if (all_children[i].pid > 0 && all_children[i].alive) kill(all_children[i].pid, SIGKILL);
  if (sig) {
    static const char msg[] = "FAILED: gpu_mps_fault: watchdog expired, clients killed\n";
    (void)!write(1, msg, sizeof msg - 1);
    _exit(3);
  }
}

static int start(struct child *c) {
  int fds[2];
  if (msg_pair(fds, REPLY_TIMEOUT_S) != 0) return 0;
  fflush(stdout);
  c->pid = fork();
  if (c->pid == 0) {
    close(fds[0]);
    for (int i = 0; i < n_children; i++)
      if (all_children[i].sock >= 0) close(all_children[i].sock);
    fault_client(c->role, c->name, fds[1]);
  }
  close(fds[1]);
  c->sock = fds[0];
  c->alive = c->pid > 0;
  int32_t ready = 0;
  if (c->alive && msg_recv(c->sock, &ready, sizeof ready, NULL) != 0) printf("%s: no answer at start\n", c->name);
  return ready == 1;
}

static void reap(struct child *c, const char *how) {
  int st = 0;
  for (int waited = 0; waited < 100 * REPLY_TIMEOUT_S; waited++) {
    if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
      c->alive = 0;
      if (WIFSIGNALED(st))
        printf("%s %s: ended by signal %d\n", c->name, how, WTERMSIG(st));
      else
        printf("%s %s: exit status %d\n", c->name, how, WEXITSTATUS(st));
      return;
    }
    sleep_ms(10);
  }
  printf("%s %s: still there after %d s: killed\n", c->name, how, REPLY_TIMEOUT_S);
  kill(c->pid, SIGKILL);
  waitpid(c->pid, &st, 0);
  c->alive = 0;
}

/* Sends a command and waits for the answer. A client that does not answer in time is stuck in a driver call or
 * gone: it is reported and killed, so no later command waits for it again. */
static int command(struct child *c, enum fault_cmd cmd, const char *what) {
  int32_t op = (int32_t)cmd, answer = 0;
  if (!c->alive) return 0;
  if (msg_send(c->sock, &op, sizeof op, -1) != 0 || msg_recv(c->sock, &answer, sizeof answer, NULL) != 0) {
    printf("%s: no answer to '%s' (gone, or stuck for %d s): killed\n", c->name, what, REPLY_TIMEOUT_S);
    kill(c->pid, SIGKILL);
    reap(c, "after no answer");
    return 0;
  }
  return answer == 1;
}

/* A new client opens the GPU and works; one that hangs is killed after PROBE_TIMEOUT_S. */
static void probe(const char *when) {
  printf("-- new client, %s\n", when);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) fault_client(ROLE_PROBE, "new client", -1);
  int st = 0;
  for (int waited = 0; waited < 100 * PROBE_TIMEOUT_S; waited++) {
    if (waitpid(pid, &st, WNOHANG) == pid) {
      printf("new client: exit status %d%s\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
             WIFSIGNALED(st) ? " (signal)" : "");
      return;
    }
    sleep_ms(10);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  printf("new client: hung (no end within %d s): killed\n", PROBE_TIMEOUT_S);
}

/* The owner exports the flag region; the coordinator passes the descriptor on to the others. */
static int share(struct child *c) {
  struct region_wire w;
  int32_t op = CMD_SHARE, answer = 0;
  int fd = -1, ok = 1;
  if (msg_send(c[0].sock, &op, sizeof op, -1) != 0 || msg_recv(c[0].sock, &w, sizeof w, &fd) != 0 ||
      msg_recv(c[0].sock, &answer, sizeof answer, NULL) != 0 || answer != 1)
    return 0;
  for (int i = 1; i < 3; i++) {
    answer = 0;
    if (msg_send(c[i].sock, &op, sizeof op, -1) != 0 || msg_send(c[i].sock, &w, sizeof w, fd) != 0 ||
        msg_recv(c[i].sock, &answer, sizeof answer, NULL) != 0 || answer != 1)
      ok = 0;
  }
  close(fd);
  return ok;
}

static void observe(struct child *survivors, int n, const char *when) {
  printf("-- survivors, %s\n", when);
  for (int i = 0; i < n; i++) command(&survivors[i], CMD_OBSERVE, "observe");
}

int main(int argc, char **argv) {
  const char *scenario = argc > 1 ? argv[1] : "";
  int faulting = !strcmp(scenario, "fault"), own = !strcmp(scenario, "kill-own"), idle = !strcmp(scenario, "kill-idle");
  if (!faulting && !own && !idle && strcmp(scenario, "kill")) {
    fprintf(stderr, "usage: gpu_mps_fault fault|kill|kill-own|kill-idle [--label TEXT]\n");
    return 2;
  }
  const char *label = argc > 3 && !strcmp(argv[2], "--label") ? argv[3] : "";
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct child c[3] = {
      {"owner", ROLE_OWNER, 0, -1, 0}, {"survivor", ROLE_SURVIVOR, 0, -1, 0}, {"victim", ROLE_VICTIM, 0, -1, 0}};
  all_children = c;
  n_children = 3;
  signal(SIGALRM, kill_children);
  alarm(240);
  printf("== gpu_mps_fault %s %s\n", argv[1], label);

  for (int i = 0; i < 3; i++)
    if (!start(&c[i])) {
      printf("FAILED: %s did not start\n", c[i].name);
      kill_children(0);
      return 2;
    }
  if (!share(c)) {
    printf("FAILED: the flag region could not be shared\n");
    kill_children(0);
    return 2;
  }
  for (int i = 0; i < (idle ? 2 : 3); i++)
    if (!command(&c[i], i == 2 && own ? CMD_SPIN_OWN : CMD_SPIN, "spin")) {
      printf("FAILED: %s's kernel does not spin\n", c[i].name);
      kill_children(0);
      return 2;
    }

  struct child *victim = &c[2];
  if (faulting) {
    printf("-- the victim runs a kernel that stores to address 16\n");
    command(victim, CMD_FAULT, "fault");
  } else {
    printf("-- the victim is killed (SIGKILL) %s\n", idle  ? "with no kernel running"
                                                     : own ? "while its kernel spins on its own memory"
                                                           : "while its kernel spins on the shared flag");
    kill(victim->pid, SIGKILL);
    reap(victim, "after SIGKILL");
  }
  observe(c, 2, "right after");
  if (faulting) {
    command(victim, CMD_EXIT, "exit");
    reap(victim, "after exiting");
    sleep_ms(1000);
    observe(c, 2, "after the victim exited, 1 s later");
  } else {
    sleep_ms(1000);
    observe(c, 2, "1 s later");
  }
  probe("while the survivors live");
  printf("-- survivors: release the spinning kernels\n");
  for (int i = 0; i < 2; i++) command(&c[i], CMD_RELEASE, "release");
  printf("-- survivors: new work\n");
  for (int i = 0; i < 2; i++) command(&c[i], CMD_CONTINUE, "continue");
  printf("-- survivors exit\n");
  for (int i = 0; i < 2; i++) {
    command(&c[i], CMD_EXIT, "exit");
    reap(&c[i], "exiting");
  }
  probe("after all clients exited");
  printf("== gpu_mps_fault %s %s: done\n", argv[1], label);
  return 0;
}
