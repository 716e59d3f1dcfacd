"""PyTorch's torch.distributed on DCCL's libnccl.so.2 (through LD_PRELOAD), every rank on GPU 0.

Run by tests/dropin/torch_ddp.sh under torchrun. Each rank checks, and rank 0 prints one line per check:
- backend "nccl": the NCCL functions this process resolves are DCCL's (DCCL_LIBNCCL): `import torch` maps
  PyTorch's bundled libnccl.so.2 by path too, but LD_PRELOAD put DCCL's first in the global scope, where
  libtorch_cuda.so looks;
- all_reduce (sum, max, avg), broadcast, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single, barrier
  and a ring of send/recv on CUDA tensors give the values computed here (small integers: exact);
- DistributedDataParallel on a small MLP for 20 steps, every rank on its own data, ends with the parameters of a
  model trained in this process on every rank's data (the gradients averaged by hand), within 1e-5;
- --losses FILE: DDP trains the MLP for --steps steps (fp32, fixed seeds) and rank 0 writes every step's loss and
  the median step time to FILE (tests/dropin/compare_losses.py compares a gloo run with an nccl one); the ranks'
  parameters must end bitwise equal;
- --subgroup (3 ranks): a new_group over ranks 0 and 2 runs all_reduce and broadcast among them (with
  --device-id, init_process_group gets the device and PyTorch makes the subgroup with ncclCommSplit).
- --mempool LIB: all_reduce, all_gather_into_tensor and reduce_scatter_tensor of 4 MiB per rank on tensors from a
  torch.cuda.MemPool over ncclMemAlloc (LIB: tests/dropin/torch_nccl_pool.c as a pluggable allocator; cuMem
  segments), in place and out, checked exactly (the ctest that runs it also wants DCCL's log line of a first-use
  mapping). PyTorch's own backend.mem_allocator is refused on GPUs without multicast, such as one H200 alone.
- --expandable: all_reduce of 1, 24 and 100 MiB per rank on tensors in PyTorch's expandable segments (the caller
  sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), each twice, checked exactly; rank 0 prints what the
  driver says of each tensor's memory (its mapped region, the reserved range, handle types, regions spanned).
--backend gloo runs only the training of --losses (the reference for the nccl run's).
Exits 0 when every check passed, 1 otherwise.
"""
import argparse
import ctypes
import json
import os
import sys
import time

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


def model(dev):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8)).to(dev)


def batch(dev, r, step):
    g = torch.Generator(device="cpu").manual_seed(1000 * step + r)
    return torch.randn(32, 64, generator=g).to(dev), torch.randn(32, 8, generator=g).to(dev)


def collectives(dev, rank, world, check):
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
    part = torch.empty(n, device=dev)
    dist.reduce_scatter_tensor(part, torch.cat([mine + k for k in range(world)]))
    check(torch.equal(part, sum(every) + world * rank), "reduce_scatter_tensor")
    a2a = torch.empty(world * n, device=dev)
    dist.all_to_all_single(a2a, torch.cat([mine + 100 * k for k in range(world)]))
    check(torch.equal(a2a, torch.cat([every[r] + 100 * rank for r in range(world)])), "all_to_all_single")
    dist.barrier()
    check(True, "barrier")
    got = torch.empty(n, device=dev)
    ops = [dist.P2POp(dist.isend, mine, (rank + 1) % world), dist.P2POp(dist.irecv, got, (rank - 1) % world)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    check(torch.equal(got, every[(rank - 1) % world]), "send/recv around the ring (batch_isend_irecv)")


def ddp_against_reference(dev, rank, world, check):
    ddp = torch.nn.parallel.DistributedDataParallel(model(dev), device_ids=[0])
    ref = model(dev)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for step in range(20):
        x, y = batch(dev, rank, step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
        ref_opt.zero_grad()
        for r in range(world):  # DDP averages the ranks' gradients: the sum of each loss over world
            xr, yr = batch(dev, r, step)
            (torch.nn.functional.mse_loss(ref(xr), yr) / world).backward()
        ref_opt.step()
    diff = max((p - q).abs().max().item() for p, q in zip(ddp.module.parameters(), ref.parameters()))
    check(diff < 1e-5, f"DDP, 20 steps of a 64-256-8 MLP: parameters within {diff:.2e} of the reference")


def train(dev, rank, world, steps, check, backend):
    ddp = torch.nn.parallel.DistributedDataParallel(model(dev), device_ids=[0])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    losses, times = [], []
    for step in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        x, y = batch(dev, rank, step)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    if backend == "nccl":
        flat = torch.cat([p.detach().flatten() for p in ddp.module.parameters()])
        every = torch.empty(world * flat.numel(), device=dev)
        dist.all_gather_into_tensor(every, flat)
        same = all(torch.equal(every[r * flat.numel():(r + 1) * flat.numel()], flat) for r in range(world))
        check(same, f"after {steps} DDP steps the ranks' parameters are bitwise equal")
    times.sort()
    return losses, 1000 * times[len(times) // 2]


def subgroup(dev, rank, check):
    g = dist.new_group([0, 2])
    if rank in (0, 2):
        t = torch.full((4097,), float(rank + 1), device=dev)
        dist.all_reduce(t, group=g)
        check(torch.equal(t, torch.full_like(t, 4.0)), "all_reduce in new_group([0, 2])")
        t = torch.full((4097,), float(rank), device=dev)
        dist.broadcast(t, src=2, group=g)
        check(torch.equal(t, torch.full_like(t, 2.0)), "broadcast from rank 2 in new_group([0, 2])")
    dist.barrier()
    t = torch.ones(5, device=dev)
    dist.all_reduce(t)
    check(torch.equal(t, torch.full_like(t, 3.0)), "all_reduce over the world after the subgroup's calls")


def mempool(dev, rank, world, check, lib):
    # PyTorch's own backend.mem_allocator wants a GPU with multicast; this is the same allocator by hand.
    alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "dccl_torch_pool_alloc", "dccl_torch_pool_free")
    pool = torch.cuda.MemPool(alloc.allocator())
    n = 1 << 20
    idx = torch.arange(n, device=dev)
    every = [((idx * 5 + r * 7) % 13).float() for r in range(world)]
    with torch.cuda.use_mem_pool(pool):
        t = torch.empty(n, device=dev)
        gathered = torch.empty(world * n, device=dev)
        stacked = torch.cat([every[rank] + k for k in range(world)])
        part = torch.empty(n, device=dev)
    for round in range(3):  # the first call maps the pool's segments; the later ones find them mapped
        t.copy_(every[rank])
        dist.all_reduce(t)
        check(torch.equal(t, sum(every)), f"mem pool: all_reduce of {n} floats, call {round + 1}")
    dist.all_gather_into_tensor(gathered, t.copy_(every[rank]))
    check(torch.equal(gathered, torch.cat(every)), "mem pool: all_gather_into_tensor")
    dist.reduce_scatter_tensor(part, stacked)
    check(torch.equal(part, sum(every) + world * rank), "mem pool: reduce_scatter_tensor")
    torch.cuda.synchronize()
    del t, gathered, stacked, part


def driver_view(ptr, nbytes):
    """What the CUDA driver says of [ptr, +nbytes): the mapped region holding ptr (cuMemGetAddressRange), the
    reserved range (RANGE_START_ADDR/SIZE), the allowed export handle types, the buffer id, and how many mapped
    regions the buffer spans: the facts first-use mapping of expandable segments rests on."""
    cu = ctypes.CDLL("libcuda.so.1")
    def attribute(what, at):
        v = ctypes.c_uint64(0)
        return v.value if cu.cuPointerGetAttribute(ctypes.byref(v), what, ctypes.c_uint64(at)) == 0 else None
    def region(at):
        base, size = ctypes.c_uint64(0), ctypes.c_size_t(0)
        ok = cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(at)) == 0
        return (base.value, size.value) if ok else None
    first = region(ptr)
    regions, at = 0, ptr
    while at < ptr + nbytes and regions < 10000:
        r = region(at)
        if not r:
            break
        regions += 1
        at = r[0] + r[1]
    return {"offset in region": ptr - first[0] if first else None, "region bytes": first[1] if first else None,
            "regions spanned": regions, "reserved bytes": attribute(12, ptr),
            "offset in reservation": ptr - attribute(11, ptr) if attribute(11, ptr) else None,
            "handle types": attribute(14, ptr), "buffer id": attribute(7, ptr)}


def expandable(dev, rank, world, check):
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    check("expandable_segments:True" in conf, f"PYTORCH_CUDA_ALLOC_CONF={conf!r} asks for expandable segments")
    keep = [torch.empty(3 << 20, dtype=torch.uint8, device=dev)]  # so the tensors below start mid-segment
    for n in (1 << 18, 6 << 20, 25 << 20):  # 1 MiB, 24 MiB (a 20 MiB part's worth and more), 100 MiB of floats
        idx = torch.arange(n, device=dev)
        every = [((idx * 5 + r * 7) % 13).float() for r in range(world)]
        t, out = every[rank].clone(), torch.empty(n, device=dev)
        if rank == 0:
            print(f"{4 * n} B tensor: {driver_view(t.data_ptr(), 4 * n)}", flush=True)
        for round in range(2):
            dist.all_reduce(t if round == 0 else out.copy_(every[rank]))
        check(torch.equal(t, sum(every)) and torch.equal(out, sum(every)),
              f"expandable segments: all_reduce of {n} floats, twice")
        keep.append(t)
    torch.cuda.synchronize()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    p.add_argument("--losses", help="train and write the losses here (rank 0)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--subgroup", action="store_true")
    p.add_argument("--device-id", action="store_true", help="pass device_id to init_process_group")
    p.add_argument("--expandable", action="store_true",
                   help="collectives on tensors in expandable segments (PYTORCH_CUDA_ALLOC_CONF), with the driver's view")
    p.add_argument("--mempool", metavar="LIB",
                   help="collectives on tensors from a memory pool over ncclMemAlloc (LIB: torch_nccl_pool.c's)")
    args = p.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    if args.device_id:
        dist.init_process_group(args.backend, device_id=dev)
    else:
        dist.init_process_group(args.backend)
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)
        if rank == 0:
            print(f"{'ok' if ok else 'FAIL'}: {what}", flush=True)

    if args.backend == "nccl":
        want = os.path.realpath(os.environ["DCCL_LIBNCCL"])
        for symbol in ("ncclCommInitRankConfig", "ncclAllReduce", "ncclCommSplit"):
            got = library_of(symbol)
            check(got == want, f"{symbol} resolves to DCCL's libnccl.so.2 ({got})")
    if args.subgroup:
        subgroup(dev, rank, check)
    elif args.mempool:
        mempool(dev, rank, world, check, args.mempool)
    elif args.expandable:
        expandable(dev, rank, world, check)
    elif args.backend == "nccl":
        collectives(dev, rank, world, check)
        ddp_against_reference(dev, rank, world, check)
    if args.losses and not args.subgroup:
        losses, step_ms = train(dev, rank, world, args.steps, check, args.backend)
        if rank == 0:
            with open(args.losses, "w") as f:
                json.dump({"backend": args.backend, "ranks": world, "losses": losses, "step_ms": step_ms}, f)
            print(f"{args.backend}: {args.steps} DDP steps, median step time {step_ms:.3f} ms", flush=True)
    dist.destroy_process_group()
    if failures:
        print(f"rank {rank}: FAILED: {failures}", flush=True)
    elif rank == 0:
        print(f"torch_ddp: {world} ranks, {args.backend}, all checks passed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
