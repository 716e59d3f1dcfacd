#!/usr/bin/env bash
# PyTorch's torch.distributed on DCCL's libnccl.so.2, every rank on GPU 0 (tests/dropin/torch_ddp.py). Through
# LD_PRELOAD, since PyTorch's RPATH finds its bundled copy before LD_LIBRARY_PATH; it reaches every process
# torchrun starts. LIBNCCL "none" runs without it (the gloo reference). Run it under tests/cuda/with_mps.sh (ranks
# of different processes on one GPU). Exits 77 (skipped) where PyTorch with CUDA is missing.
# Usage: torch_ddp.sh LIBNCCL|none [NPROC=2] [torch_ddp.py arguments...]
set -euo pipefail
lib=$1
n=${2:-2}
shift $(($# < 2 ? $# : 2))
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" > /dev/null 2>&1 ||
  { echo "SKIP: no PyTorch with CUDA"; exit 77; }
script=$(dirname "${BASH_SOURCE[0]}")/torch_ddp.py
if [ "$lib" = none ]; then
  exec python3 -m torch.distributed.run --standalone --nproc-per-node "$n" "$script" "$@"
fi
lib=$(readlink -f "$lib")
export DCCL_LIBNCCL=$lib
exec env LD_PRELOAD="$lib" python3 -m torch.distributed.run --standalone --nproc-per-node "$n" "$script" "$@"
