/* cuFile loaded at run time (storage/cufile.h). */
#include "storage/cufile.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "storage/cufile_abi.h"

static struct {
  pthread_once_t once;
  struct cufile_error (*handle_register)(void **handle, struct cufile_descr *descr);
  void (*handle_deregister)(void *handle);
  /* bytes read, -1 with errno set, or minus a CUfileOpError */
  ssize_t (*read)(void *handle, void *base, size_t size, off_t file_offset, off_t base_offset);
  char why[256]; /* empty: the driver is open */
} lib = {.once = PTHREAD_ONCE_INIT};

static void open_driver(void) {
  void *so = dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    snprintf(lib.why, sizeof(lib.why), "cannot load libcufile.so.0 (%s)", dlerror());
    return;
  }
  struct cufile_error (*driver_open)(void) = (struct cufile_error (*)(void))dlsym(so, "cuFileDriverOpen");
  lib.handle_register = (struct cufile_error (*)(void **, struct cufile_descr *))dlsym(so, "cuFileHandleRegister");
  lib.handle_deregister = (void (*)(void *))dlsym(so, "cuFileHandleDeregister");
  lib.read = (ssize_t (*)(void *, void *, size_t, off_t, off_t))dlsym(so, "cuFileRead");
  if (!driver_open || !lib.handle_register || !lib.handle_deregister || !lib.read) {
    snprintf(lib.why, sizeof(lib.why), "libcufile.so.0 lacks cuFileDriverOpen, cuFileHandleRegister or cuFileRead");
    return;
  }
  struct cufile_error e = driver_open();
  if (e.err != 0) snprintf(lib.why, sizeof(lib.why), "cuFileDriverOpen failed: cuFile error %d, CUDA %d", e.err,
                           e.cu_err);
  /* The library stays loaded and its driver open for the process: closing may wait for the device. */
}

int dccl_cufile_gpudirect_loaded(void) { return access("/sys/module/nvidia_fs", F_OK) == 0; }

void *dccl_cufile_open(int fd, char *why, size_t len) {
  pthread_once(&lib.once, open_driver);
  if (lib.why[0]) {
    snprintf(why, len, "%s", lib.why);
    return NULL;
  }
  struct cufile_descr d = {.type = CUFILE_HANDLE_TYPE_OPAQUE_FD, .handle.fd = fd};
  void *handle = NULL;
  struct cufile_error e = lib.handle_register(&handle, &d);
  if (e.err != 0) {
    snprintf(why, len, "cuFileHandleRegister refused the file: cuFile error %d, CUDA %d", e.err, e.cu_err);
    return NULL;
  }
  snprintf(why, len, "cuFile registers the file");
  return handle;
}

ssize_t dccl_cufile_read(void *handle, void *base, size_t n, size_t file_offset, size_t base_offset, char *why,
                         size_t len) {
  errno = 0;
  ssize_t got = lib.read(handle, base, n, (off_t)file_offset, (off_t)base_offset);
  if (got >= 0) return got;
  if (got == -1) snprintf(why, len, "cuFileRead: %s", strerror(errno ? errno : EIO));
  else snprintf(why, len, "cuFileRead: cuFile error %zd", -got);
  return -1;
}

void dccl_cufile_close(void *handle) {
  if (handle) lib.handle_deregister(handle);
}
