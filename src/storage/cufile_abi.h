/* The few types of cufile.h that DCCL passes to libcufile.so.0, as its ABI has them (DCCL declares them rather than
 * needing cuFile's header to build): an error is the cuFile code and a CUresult, returned by value; a descriptor
 * names a file by its descriptor (type 1, CU_FILE_HANDLE_TYPE_OPAQUE_FD). */
#ifndef DCCL_STORAGE_CUFILE_ABI_H_
#define DCCL_STORAGE_CUFILE_ABI_H_

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

#endif
