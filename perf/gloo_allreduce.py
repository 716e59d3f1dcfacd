"""PyTorch's gloo backend all-reducing CUDA tensors: what a user has when NCCL refuses two ranks on one GPU, and
the peer DCCL's device path is compared with (perf/gloo_vs_dccl.sh). Launched by mpirun, one process per rank,
each on GPU (local rank % GPUs). Prints one JSON line per size on rank 0: the slowest rank's median time per
all-reduce (float32 sum) over several timed batches, and the algorithm bandwidth.
Usage: mpirun -np N python3 perf/gloo_allreduce.py [port] [sizes in bytes...]"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 29531
    sizes = [int(s) for s in sys.argv[2:]] or [8, 1 << 20, 16 << 20, 128 << 20]
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    nranks = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", rank))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=nranks)
    for size in sizes:
        count = max(1, size // 4)
        t = torch.full((count,), float(rank + 1), device="cuda")
        iters = max(3, min(200, int(64e6 / max(size, 1))))
        for _ in range(2):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        batches = []
        for _ in range(5):
            t.fill_(float(rank + 1))
            torch.cuda.synchronize()
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(t)
            torch.cuda.synchronize()
            mine = torch.tensor([(time.perf_counter() - start) / iters * 1e6])
            dist.all_reduce(mine, op=dist.ReduceOp.MAX)
            batches.append(mine.item())
        t.fill_(float(rank + 1))
        dist.all_reduce(t)
        ok = bool(torch.equal(t, torch.full_like(t, nranks * (nranks + 1) / 2)))
        batches.sort()
        us = batches[len(batches) // 2]
        if rank == 0:
            print(json.dumps({"library": "gloo", "nranks": nranks, "size_bytes": count * 4, "time_us": us,
                              "algbw_gbs": count * 4 / us / 1e3, "check": ok}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
