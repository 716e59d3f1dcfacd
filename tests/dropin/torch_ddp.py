"""PyTorch's torch.distributed, backend "nccl", on DCCL's libnccl.so.2 (through LD_PRELOAD), every rank on GPU 0.

Run by tests/dropin/torch_ddp.sh under torchrun. Each rank checks, and rank 0 prints one line per check:
- the NCCL functions this process resolves are DCCL's (DCCL_LIBNCCL): `import torch` maps PyTorch's bundled
  libnccl.so.2 by path too, but LD_PRELOAD put DCCL's first in the global scope, where libtorch_cuda.so looks;
- all_reduce (sum, max, avg), broadcast, all_gather_into_tensor, reduce_scatter_tensor and all_to_all_single on
  CUDA tensors give the values computed here (small integers: exact);
- DistributedDataParallel on a small MLP for 20 steps, every rank on its own data, ends with the parameters of a
  model trained in this process on every rank's data (the gradients averaged by hand), within 1e-5, and the
  ranks' parameters are bitwise equal.
Exits 0 when every check passed, 1 otherwise.
"""
import ctypes
import os
import sys

import torch
import torch.distributed as dist


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p), ("dli_sname", ctypes.c_char_p),
                ("dli_saddr", ctypes.c_void_p)]


def library_of(symbol):
    """The file the process's global scope resolves `symbol` to (dlsym(RTLD_DEFAULT) + dladdr)."""
    process = ctypes.CDLL(None)
    addr = ctypes.cast(getattr(process, symbol), ctypes.c_void_p)
    info = DlInfo()
    if not process.dladdr(addr, ctypes.byref(info)):
        return None
    return os.path.realpath(info.dli_fname.decode())


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    dist.init_process_group("nccl", device_id=dev)
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)
        if rank == 0:
            print(f"{'ok' if ok else 'FAIL'}: {what}", flush=True)

    want = os.path.realpath(os.environ["DCCL_LIBNCCL"])
    for symbol in ("ncclCommInitRankConfig", "ncclAllReduce", "ncclCommSplit"):
        got = library_of(symbol)
        check(got == want, f"{symbol} resolves to DCCL's libnccl.so.2 ({got})")

    n = 1000003
    idx = torch.arange(n, device=dev)
    mine = ((idx * 7 + rank * 3) % 11).float()
    every = [((idx * 7 + r * 3) % 11).float() for r in range(world)]
    t = mine.clone()
    dist.all_reduce(t)
    check(torch.equal(t, sum(every)), f"all_reduce sum of {n} floats")
    t = mine.clone()
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    check(torch.equal(t, torch.stack(every).max(0).values), "all_reduce max")
    t = mine.clone()
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    check(torch.allclose(t, sum(every) / world), "all_reduce avg")
    t = mine.clone()
    dist.broadcast(t, src=world - 1)
    check(torch.equal(t, every[world - 1]), "broadcast from the last rank")
    out = torch.empty(world * n, device=dev)
    dist.all_gather_into_tensor(out, mine)
    check(torch.equal(out, torch.cat(every)), "all_gather_into_tensor")
    big = torch.cat([mine + k for k in range(world)])
    part = torch.empty(n, device=dev)
    dist.reduce_scatter_tensor(part, big)
    check(torch.equal(part, sum(every) + world * rank), "reduce_scatter_tensor")
    a2a = torch.empty(world * n, device=dev)
    dist.all_to_all_single(a2a, torch.cat([mine + 100 * k for k in range(world)]))
    check(torch.equal(a2a, torch.cat([every[r] + 100 * rank for r in range(world)])), "all_to_all_single")

    # DDP against the same training done by hand in this process.
    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8)).to(dev)

    def batch(r, step):
        g = torch.Generator(device="cpu").manual_seed(1000 * step + r)
        return torch.randn(32, 64, generator=g).to(dev), torch.randn(32, 8, generator=g).to(dev)

    ddp = torch.nn.parallel.DistributedDataParallel(model(), device_ids=[0])
    ref = model()
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for step in range(20):
        x, y = batch(rank, step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
        ref_opt.zero_grad()
        for r in range(world):  # DDP averages the ranks' gradients: the sum of each loss over world
            xr, yr = batch(r, step)
            (torch.nn.functional.mse_loss(ref(xr), yr) / world).backward()
        ref_opt.step()
    diff = max((p - q).abs().max().item() for p, q in zip(ddp.module.parameters(), ref.parameters()))
    check(diff < 1e-5, f"DDP, 20 steps of a 64-256-8 MLP: parameters within {diff:.2e} of the reference")
    flat = torch.cat([p.detach().flatten() for p in ddp.module.parameters()])
    every_flat = torch.empty(world * flat.numel(), device=dev)
    dist.all_gather_into_tensor(every_flat, flat)
    same = all(torch.equal(every_flat[r * flat.numel():(r + 1) * flat.numel()], flat) for r in range(world))
    check(same, "the ranks' DDP parameters are bitwise equal")

    dist.destroy_process_group()
    if failures:
        print(f"rank {rank}: FAILED: {failures}", flush=True)
    elif rank == 0:
        print(f"torch_ddp: {world} ranks, all checks passed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
