#!/bin/sh
# Splits the ranks of one machine into two pretend hosts for DCCL: even ranks are host "A", odd ranks host "B",
# so a ring alternates hosts and crosses between shared memory and sockets. mpirun cannot set a variable per
# rank, so each rank runs this first: mpirun -np 4 sh hostid_wrapper.sh PROGRAM ARGS...
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-}}}
if [ -z "$rank" ]; then
  echo "hostid_wrapper.sh: no MPI rank in the environment (OMPI_COMM_WORLD_RANK)" >&2
  exit 2
fi
if [ $((rank % 2)) -eq 0 ]; then
  DCCL_HOSTID=A
else
  DCCL_HOSTID=B
fi
export DCCL_HOSTID
exec "$@"
