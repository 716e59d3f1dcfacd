#!/bin/sh
# Gives every MPI rank its own pretend host (DCCL_HOSTID=host<rank>), so every pair of ranks is "between hosts"
# and uses a network transport: mpirun -np 4 sh own_host_wrapper.sh PROGRAM ARGS...
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-}}}
if [ -z "$rank" ]; then
  echo "own_host_wrapper.sh: no MPI rank in the environment (OMPI_COMM_WORLD_RANK)" >&2
  exit 2
fi
DCCL_HOSTID=host$rank
export DCCL_HOSTID
exec "$@"
