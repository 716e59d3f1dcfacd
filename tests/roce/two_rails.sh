#!/usr/bin/env bash
# Inside the soft-RoCE VM: a second RDMA port (rxe1 on its own veth pair, 10.10.0.1) for this test only, and 2
# ranks on pretend hosts with 2 channels. Each process lists both ports as rails (soft-RoCE has no PCI device for
# hwloc to place, so both are as near), lane 0's links run on rxe0 and lane 1's on rxe1, and every collective of
# the suite is right. rxe1 is removed afterwards, so the other guest tests see one port.
# Usage: two_rails.sh MPIEXEC COLL_SUITE
set -euo pipefail
mpiexec=$1 suite=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cleanup() {
  rdma link delete rxe1 2>/dev/null || true
  ip link delete v2 2>/dev/null || true
}
trap cleanup EXIT
ip link add v2 type veth peer name v3
ip addr add 10.10.0.1/24 dev v2
ip link set v2 up
ip link set v3 up
rdma link add rxe1 type rxe netdev v2
for _ in $(seq 10); do grep -q ACTIVE /sys/class/infiniband/rxe1/ports/1/state && break; sleep 1; done
grep -q ACTIVE /sys/class/infiniband/rxe1/ports/1/state || { echo "two_rails: rxe1 is not ACTIVE"; exit 1; }

log=$(mktemp)
status=0
env DCCL_TRANSPORT=ib DCCL_SOCKET_IFNAME=v0 DCCL_TIMEOUT=60 DCCL_NCHANNELS=2 DCCL_ALGO=ring DCCL_DEBUG=INFO \
  DCCL_DEBUG_SUBSYS=NET "$mpiexec" --allow-run-as-root --oversubscribe --bind-to none -np 2 \
  sh "$here/own_host_wrapper.sh" "$suite" --colls allreduce,allgather,sendrecv --types float --ops sum \
  --sizes 1,1000,1048579 --no-big >"$log" 2>&1 || status=$?
grep -E "rails|net_ib link" "$log" | sort | uniq -c | head -20
if [ "$status" -ne 0 ]; then
  tail -30 "$log"
  echo "two_rails: the suite failed (status $status)"
  exit 1
fi
fail=0
grep -q "rails (lane mod 2): rxe0:1, rxe1:1" "$log" || { echo "two_rails: the processes did not list both rails"; fail=1; }
for dev in rxe0 rxe1; do
  grep -q "net_ib link to rank 1: $dev port 1" "$log" || { echo "two_rails: no link to rank 1 on $dev"; fail=1; }
  grep -q "net_ib link from rank 0: $dev port 1" "$log" || { echo "two_rails: no link from rank 0 on $dev"; fail=1; }
done
rm -f "$log"
[ "$fail" -eq 0 ] && echo "two_rails: lanes spread over rxe0 and rxe1, every collective right"
exit "$fail"
