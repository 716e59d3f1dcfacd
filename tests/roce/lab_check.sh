#!/usr/bin/env bash
# Self-tests of the soft-RoCE lab, run inside the VM: the device the RDMA tests rely on is there and works.
# Usage: lab_check.sh port|gid|pingpong|resources
set -euo pipefail

dev=rxe0
ip=10.9.0.1
sys=/sys/class/infiniband/$dev/ports/1

fail() {
  echo "lab_check: $*" >&2
  exit 1
}

# Index of the RoCEv2 GID of $ip (the IPv4-mapped IPv6 address) in rxe0's GID table.
rocev2_gid_index() {
  local want path idx
  want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${ip//./ })
  for path in "$sys"/gids/*; do
    idx=${path##*/}
    if [[ $(cat "$path") == "$want" && $(cat "$sys/gid_attrs/types/$idx" 2>/dev/null) == "RoCE v2" ]]; then
      echo "$idx"
      return
    fi
  done
  fail "no RoCE v2 GID $want for $ip on $dev"
}

# Waits until something listens on TCP port $1 (ibv_rc_pingpong's server exchanges QP numbers over TCP).
wait_listening() {
  local i
  for ((i = 0; i < 100; i++)); do
    ss -Htln "sport = :$1" | grep -q . && return
    sleep 0.1
  done
  fail "nothing listens on port $1 after 10 s"
}

# "cq qp mr" of rxe0 from `rdma resource`, e.g. "1 1 0" for "0: rxe0: pd 1 cq 1 qp 1 cm_id 0 mr 0 ctx 0 srq 0".
resource_counts() {
  rdma resource show "$dev" | awk '{ for (i = 1; i < NF; i++) n[$i] = $(i + 1); print n["cq"], n["qp"], n["mr"] }'
}

# Starts an ibv_rc_pingpong server on TCP port $1 in the background ($server), killed when this script exits,
# and waits until it has made its QP and listens for the client.
start_server() {
  timeout 60 ibv_rc_pingpong -d "$dev" -g "$(rocev2_gid_index)" -p "$1" -n 200 &
  server=$!
  trap 'kill "$server" 2>/dev/null || true' EXIT
  wait_listening "$1"
}

check_port() {
  [[ -d /sys/class/infiniband/$dev ]] || fail "no $dev in /sys/class/infiniband"
  grep -q ACTIVE "$sys/state" || fail "$dev port 1 state is '$(cat "$sys/state")', not ACTIVE"
  # libibverbs (rdma-core's rxe provider) sees the same.
  ibv_devinfo -d "$dev" | grep -q 'state:.*PORT_ACTIVE' || fail "ibv_devinfo does not show $dev PORT_ACTIVE"
  echo "$dev port 1: $(cat "$sys/state")"
}

check_gid() {
  echo "$dev RoCE v2 GID of $ip: index $(rocev2_gid_index)"
}

check_pingpong() {
  local port=18515
  start_server "$port"
  timeout 60 ibv_rc_pingpong -d "$dev" -g "$(rocev2_gid_index)" -p "$port" -n 200 "$ip" ||
    fail "ibv_rc_pingpong client failed"
  wait "$server" || fail "ibv_rc_pingpong server failed"
}

# Later tests count QPs, CQs and MRs with `rdma resource` to find leaks: a process's objects must show up in the
# counts while it runs and be gone once it has exited.
check_resources() {
  local before expected during i
  rdma resource
  before=$(resource_counts)
  expected=$(awk '{ print $1 + 1, $2 + 1, $3 + 1 }' <<<"$before")
  start_server 18516
  rdma resource show qp
  rdma resource show qp | grep -q "^link $dev/1 .*comm ibv_rc_pingpong" ||
    fail "rdma resource show qp lists no QP of the pingpong server on $dev"
  rdma resource
  during=$(resource_counts)
  kill "$server"
  wait "$server" || true
  [[ $during == "$expected" ]] ||
    fail "cq qp mr: $before before, $during while one pingpong server runs (expected $expected)"
  # rxe may finish destroying the QP just after the process is gone.
  for ((i = 0; i < 50; i++)); do
    [[ $(resource_counts) == "$before" ]] && return
    sleep 0.1
  done
  fail "cq qp mr: $before before, $(resource_counts) after the pingpong server exited (not released)"
}

case ${1:-} in
  port) check_port ;;
  gid) check_gid ;;
  pingpong) check_pingpong ;;
  resources) check_resources ;;
  *) fail "usage: lab_check.sh port|gid|pingpong|resources" ;;
esac
