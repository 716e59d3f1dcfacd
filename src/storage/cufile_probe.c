/* cuFile loaded at run time (storage/cufile_probe.h). */
#include "storage/cufile_probe.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

/* cufile.h's types, as its ABI has them: an error is the cuFile code and a CUresult, returned by value; a
 * descriptor names a file by its descriptor (type 1, CU_FILE_HANDLE_TYPE_OPAQUE_FD). */
struct cufile_error {
  int err; /* CUfileOpError: 0 success, 5000 and up failures */
  int cu_err;
};
struct cufile_descr {
  int type;
  union {
    int fd;
    void *handle;
  } handle;
  const void *fs_ops;
};
#define CUFILE_HANDLE_TYPE_OPAQUE_FD 1

static struct {
  pthread_once_t once;
  struct cufile_error (*handle_register)(void **handle, struct cufile_descr *descr);
  void (*handle_deregister)(void *handle);
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
  if (!driver_open || !lib.handle_register || !lib.handle_deregister) {
    snprintf(lib.why, sizeof(lib.why), "libcufile.so.0 lacks cuFileDriverOpen or cuFileHandleRegister");
    return;
  }
  struct cufile_error e = driver_open();
  if (e.err != 0) snprintf(lib.why, sizeof(lib.why), "cuFileDriverOpen failed: cuFile error %d, CUDA %d", e.err,
                           e.cu_err);
  /* The library stays loaded and its driver open for the process: closing may wait for the device. */
}

int dccl_cufile_accepts(int fd, char *why, size_t len) {
  pthread_once(&lib.once, open_driver);
  if (lib.why[0]) {
    snprintf(why, len, "%s", lib.why);
    return 0;
  }
  struct cufile_descr d = {.type = CUFILE_HANDLE_TYPE_OPAQUE_FD, .handle.fd = fd};
  void *handle = NULL;
  struct cufile_error e = lib.handle_register(&handle, &d);
  if (e.err != 0) {
    snprintf(why, len, "cuFileHandleRegister refused the file: cuFile error %d, CUDA %d", e.err, e.cu_err);
    return 0;
  }
  lib.handle_deregister(handle);
  snprintf(why, len, "cuFile registers the file");
  return 1;
}
