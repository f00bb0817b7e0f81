# Sourced by the test bed groups of the RoCE v2 software device
# (vm-group-roce-rxe.sh, vm-group-roce-cm-rxe.sh, bench/roce/vm-bench.sh; after
# tests/vm/lib.sh).
#
# roce_rxe_link NS RXE KVETH OVETH KIP OIP: a veth pair, KVETH in the guest's
# root namespace with KIP/24 and the kernel's soft-RoCE device RXE on it,
# OVETH in the network namespace NS (made here) with OIP/24, for our sroce0.
# Waits until OVETH is operationally up (our device reports its port down
# before) and sets kgid to RXE's RoCE v2 GID index of KIP (IPv4-mapped).
# Reports the group's "setup" result; exits the group on failure.
# (rxe's UDP socket owns port 4791 of the root namespace: ours needs a
# namespace of its own.)
#
# roce_rxe_gid RXE IP: prints the index of RXE's RoCE v2 GID ::ffff:IP,
# waiting up to 10 s for the kernel to add it; nothing when there is none.
roce_rxe_gid() {
  local sysd=/sys/class/infiniband/$1/ports/1 ip_hex f n
  ip_hex=$(printf '%02x%02x:%02x%02x' ${2//./ })
  for _ in {1..100}; do
    for f in $(grep -l "0000:0000:0000:0000:0000:ffff:$ip_hex" "$sysd"/gids/* 2>/dev/null); do
      n=${f##*/}
      if grep -q 'RoCE v2' "$sysd/gid_attrs/types/$n" 2>/dev/null; then echo "$n"; return 0; fi
    done
    ov_sleep 0.1
  done
  return 1
}

roce_rxe_link() {
  local ns=$1 rxe=$2 kv=$3 ov=$4 kip=$5 oip=$6 t0
  setup_log=$OV_LOGDIR/setup.log
  t0=$(ov_now)
  (
    set -x
    ip netns add "$ns" &&
      ip link add "$kv" type veth peer name "$ov" &&
      ip link set "$ov" netns "$ns" &&
      ip addr add "$kip/24" dev "$kv" &&
      ip -n "$ns" addr add "$oip/24" dev "$ov" &&
      ip link set "$kv" up && ip -n "$ns" link set "$ov" up && ip -n "$ns" link set lo up &&
      rdma link add "$rxe" type rxe netdev "$kv"
  ) >"$setup_log" 2>&1 || {
    ov_result FAIL setup "$t0" "(veth pair or $rxe: $(ov_tail "$setup_log"))"
    exit 1
  }
  for _ in {1..100}; do
    ip -n "$ns" link show "$ov" | grep -q 'state UP' && break
    ov_sleep 0.1
  done
  kgid=$(roce_rxe_gid "$rxe" "$kip")
  [ -n "$kgid" ] || { ov_result FAIL setup "$t0" "(no RoCE v2 GID ::ffff:$kip on $rxe)"; exit 1; }
  ov_result PASS setup "$t0" "($rxe GID index $kgid)"
}
