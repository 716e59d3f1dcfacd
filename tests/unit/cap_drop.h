/* Drops CAP_SYS_ADMIN from this process (effective and permitted: for good), so /proc/self/pagemap, opened
 * afterwards, hides page frame numbers. Shared by the registration cache tests (unit and on a real device). */
#ifndef DCCL_TEST_CAP_DROP_H_
#define DCCL_TEST_CAP_DROP_H_

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

/* 0 on success, -1 if the capabilities could not be read or set. */
static int drop_cap_sys_admin(void) {
  struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct data[2];
  if (syscall(SYS_capget, &header, data) != 0) return -1;
  data[0].effective &= ~(1u << CAP_SYS_ADMIN);
  data[0].permitted &= ~(1u << CAP_SYS_ADMIN);
  return syscall(SYS_capset, &header, data) == 0 ? 0 : -1;
}

#endif
