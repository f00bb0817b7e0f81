#!/bin/sh
# Debian's unmodified UCX 1.13 and Open MPI 4.1 on soft0, run by ns.sh after the
# set-up step (RDMAV_SOFT_DEVICES=2, our library first on LD_LIBRARY_PATH, UCX's
# default settings and memory hooks).
#
#   clients.sh info [USER]
#       ucx_info -d lists memory domain soft0 with rc_verbs and ud_verbs on soft0:1;
#       with USER, run as that unprivileged user (the set-up is root's once, the
#       use needs no privilege).
#   clients.sh perftest TEST TLS ITERATIONS [SIZE]
#       an ucx_perftest server/client pair over UCX_NET_DEVICES=soft0:1 and
#       UCX_TLS=TLS; both must exit 0. The client runs under strace counting
#       process_vm_readv/writev: the device's slow path for memory it has no
#       mapping of. UCX makes 2 of its own (its CMA probe writes 8 bytes to its
#       own stack); more than FALLBACK_MAX means the device's data path fell back
#       (as it did when UCX's mremap hook moved the device's mappings).
#   clients.sh mpi-ucx TLS PROGRAM
#       mpirun -np 2 --mca pml ucx -x UCX_NET_DEVICES=soft0:1 -x UCX_TLS=TLS PROGRAM
#       (our MPI ping-pong, which checks every byte); UCX must report soft0:1 for
#       the peer's endpoint.
#   clients.sh mpi-openib PROGRAM
#       the same program over Open MPI's openib BTL on soft0:1 (pml ob1).
set -u
FALLBACK_MAX=16
log=$(mktemp -d /tmp/ov-ucx.XXXXXX)
trap 'rm -rf "$log"' EXIT

fail() {
	echo "FAIL: $*"
	exit 1
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

info() {
	set --
	if [ -n "$user" ]; then
		set -- setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups env HOME=/tmp
		lib=${LD_LIBRARY_PATH%%:*}
		if ! "$@" test -r "$lib/libibverbs.so.1"; then
			echo "SKIP: $user cannot read $lib (the build tree's folders are closed to others)"
			exit 77
		fi
	fi
	timeout 120 "$@" ucx_info -d > "$log/info" 2>&1 || { cat "$log/info"; fail "ucx_info -d exited $?"; }
	# The memory domain's block: from its header to the next one.
	awk '/^# Memory domain: /{on = ($4 == "soft0")} on' "$log/info" > "$log/soft0"
	cat "$log/soft0"
	[ -s "$log/soft0" ] || { cat "$log/info"; fail "no memory domain soft0"; }
	for tl in rc_verbs ud_verbs; do
		awk -v tl="$tl" '/Transport: /{t = $3} /Device: /{ if (t == tl && $3 == "soft0:1") f = 1 } END { exit !f }' \
			"$log/soft0" || fail "no transport $tl on device soft0:1"
	done
	echo "PASS: ucx_info -d lists soft0 with rc_verbs and ud_verbs${user:+ (as $user)}"
}

perftest() {
	test=$1 tls=$2 iters=$3 size=${4:-}
	port=$(free_port)
	# VERBS_LOG_LEVEL=3: the device says why a region stays private (peers
	# then reach it with process_vm_*), printed with the pair's output.
	export UCX_NET_DEVICES=soft0:1 UCX_TLS="$tls" VERBS_LOG_LEVEL=3
	set -- -t "$test" -n "$iters"
	[ -n "$size" ] && set -- "$@" -s "$size"
	timeout 300 ucx_perftest -p "$port" > "$log/server" 2>&1 &
	spid=$!
	hex=$(printf ':%04X ' "$port")
	i=0
	while [ $i -lt 400 ] && ! grep -q "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null; do
		kill -0 $spid 2>/dev/null || break
		sleep 0.05
		i=$((i + 1))
	done
	timeout 300 strace -f -qq --seccomp-bpf -c -o "$log/strace" \
		-e trace=process_vm_readv,process_vm_writev \
		ucx_perftest -p "$port" "$@" localhost > "$log/client" 2>&1
	crc=$?
	wait $spid
	src=$?
	echo "== server: exit $src"
	cat "$log/server"
	echo "== client (ucx_perftest $* localhost, UCX_TLS=$tls): exit $crc"
	cat "$log/client"
	if [ $src != 0 ] || [ $crc != 0 ]; then fail "ucx_perftest pair exited $src/$crc"; fi
	grep -q '^Final:' "$log/client" || fail "the client printed no final result"
	calls=$(awk '/process_vm_(readv|writev)/ { n += $4 } END { print n + 0 }' "$log/strace")
	echo "process_vm_readv/writev calls in the client: $calls"
	[ "$calls" -le $FALLBACK_MAX ] || fail "$calls process_vm_* calls: the data path fell back"
	echo "PASS: $test over $tls on soft0:1"
}

# mpi_run MPIRUN_ARGS... PROGRAM: two ranks; the ping-pong must report PASS.
mpi_run() {
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # the tests run as root
	export OMPI_MCA_btl_openib_warn_no_device_params_found=0
	timeout 300 mpirun -np 2 -x LD_LIBRARY_PATH -x RDMAV_SOFT_DEVICES "$@" > "$log/out" 2>&1
	rc=$?
	cat "$log/out"
	[ $rc = 0 ] || fail "mpirun exited $rc"
	grep -q '^pingpong: PASS' "$log/out" || fail "the ping-pong did not report PASS"
}

mpi_ucx() {
	tls=$1 prog=$2
	mpi_run --mca pml ucx -x UCX_NET_DEVICES=soft0:1 -x UCX_TLS="$tls" -x UCX_LOG_LEVEL=info "$prog"
	# Each rank's endpoint to the other rank (ep_cfg[1]: the first is its own, over self).
	n=$(grep -c 'ep_cfg\[[0-9]*\]: tag([a-z_]*/soft0:1' "$log/out")
	[ "$n" -ge 2 ] || fail "UCX did not report soft0:1 for both ranks' peer endpoints"
	echo "PASS: Open MPI over UCX ($tls) on soft0:1"
}

mpi_openib() {
	prog=$1
	mpi_run --mca pml ob1 --mca btl openib,self --mca btl_openib_allow_ib 1 \
		--mca btl_openib_if_include soft0:1 --mca btl_base_verbose 10 "$prog"
	n=$(grep -c 'openib: using port soft0:1' "$log/out")
	[ "$n" -ge 2 ] || fail "the openib BTL did not report port soft0:1 for both ranks"
	grep -q 'Using openib btl for send' "$log/out" || fail "the openib BTL carried no traffic"
	echo "PASS: Open MPI's openib BTL on soft0:1"
}

cmd=$1
shift
case $cmd in
info)
	user=${1:-}
	info
	;;
perftest) perftest "$@" ;;
mpi-ucx) mpi_ucx "$@" ;;
mpi-openib) mpi_openib "$@" ;;
*) fail "unknown command $cmd" ;;
esac
