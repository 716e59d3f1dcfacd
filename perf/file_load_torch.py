"""What a PyTorch user does to put a file on the GPU: numpy.fromfile, then torch.from_numpy(...).cuda(); the
baseline beside perf/file_load_gpu_perf (docs/storage.md, issue 16). Times it warm (the page cache holds the file)
and cold (its pages dropped first: drop_caches as root, else posix_fadvise(POSIX_FADV_DONTNEED)), `rounds` each,
and prints the medians in seconds and GB/s.
Usage: python3 perf/file_load_torch.py FILE [rounds=3]"""
import os
import statistics
import sys
import time

import numpy
import torch


def drop_cache(path):
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1")
    except OSError:
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def load(path):
    start = time.monotonic()
    tensor = torch.from_numpy(numpy.fromfile(path, dtype=numpy.uint8)).cuda()
    torch.cuda.synchronize()
    return time.monotonic() - start, tensor


def main():
    path = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    size = os.path.getsize(path)
    torch.cuda.init()
    _, first = load(path)  # the CUDA context and the allocator warmed up, outside the timing
    expected = numpy.fromfile(path, dtype=numpy.uint8, count=min(size, 1 << 20))
    if not numpy.array_equal(first[: len(expected)].cpu().numpy(), expected):
        sys.exit("FAIL: the tensor's first bytes differ from the file's")
    del first
    for cold in (True, False):
        times = []
        for _ in range(rounds):
            if cold:
                drop_cache(path)
            seconds, tensor = load(path)
            times.append(seconds)
            del tensor
        t = statistics.median(times)
        print(f"numpy.fromfile + torch .cuda(), {'cold' if cold else 'warm'}: {t:.3f} s, {size / t / 1e9:.2f} GB/s")


if __name__ == "__main__":
    main()
