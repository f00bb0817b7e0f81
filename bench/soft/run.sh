#!/bin/sh
# Software device benchmarks, printed side by side in one run:
#   - perftest (Debian's, unmodified) on soft0 through our libibverbs:
#     ib_write_lat / ib_send_lat / ib_read_lat at 8 B (t_typical, the median
#     of one run; the figure compared is the median over BENCH_ROUNDS runs,
#     default 7, interleaved with UCX's latency runs),
#     ib_write_bw at 64 KiB and 1 MiB (BW average), each beside UCX's
#     ucp_put_bw of the same size in BENCH_BW_ROUNDS rounds (default 3):
#     the ratio of each round, median (one pair each swung across the 0.8
#     target from run to run at 1 MiB: 0.73 to 1.00 within minutes);
#   - anchors measured in the same run: single-thread memcpy bandwidth
#     (soft_memcpy_bw) and UCX's shared-memory transport (ucx_perftest with
#     UCX_TLS=posix,self, Debian's libraries): ucp_put_lat 8 B, ucp_put_bw.
#   - qperf (Debian's) on soft0, polling (-cp1): rc_lat and
#     rc_rdma_write_lat (1 B, qperf's default), in the same rounds as
#     ib_write_lat, which runs just before and just after qperf: its
#     anchor is the mean t_avg of the two, and a round whose two differ
#     by more than 1.5x (the host changed latency mode during the round:
#     it is bimodal) is printed but left out of the qperf ratios;
#   - ibv_reg_mr + ibv_dereg_mr on soft0 of touched private memory
#     (soft_reg_cost: median pair), 1 GiB and 4 KiB;
#   - the cache-line floor under the latencies (soft_line_floor, before and
#     after the latency rounds, information): ib_write_lat's pattern and the
#     least an RC SEND needs, through bare cache lines between the two CPUs.
# Targets (issue 4): write_lat <= 1.0 us, send/read_lat <= 1.5 us,
# write_bw(64K) >= 10 GB/s, write_bw(1M) >= 0.5 x memcpy(1M),
# bandwidth >= 0.8 x UCX, latency <= 2 x UCX. Issue 14: qperf rc_lat and
# rc_rdma_write_lat <= 0.3 us and <= 2 x ib_write_lat (ratio per round,
# median); reg+dereg 1 GiB <= 100 ms, 4 KiB <= 20 us.
#   usage: bench/soft/run.sh BUILD_DIR
set -u
B=${1:-build}
B=$(cd "$B" && pwd)
LIB=$B/lib
ITERS=${BENCH_ITERS:-10000}
ROUNDS=${BENCH_ROUNDS:-7}
tmp=$(mktemp -d /tmp/ovsoft-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_listen() {
  hex=$(printf ':%04X ' "$1"); i=0
  while [ $i -lt 200 ] && ! grep -q "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null; do sleep 0.05; i=$((i+1)); done
}
# pair OUTFILE PROG ARGS...: server + client on soft0, client output kept.
pair() {
  out=$1; shift; p=$(port)
  env LD_LIBRARY_PATH="$LIB" RDMAV_SOFT_DEVICES=1 timeout 120 "$@" -d soft0 -p "$p" > "$tmp/srv" 2>&1 &
  s=$!; wait_listen "$p"
  env LD_LIBRARY_PATH="$LIB" RDMAV_SOFT_DEVICES=1 timeout 120 "$@" -d soft0 -p "$p" localhost > "$out" 2>&1
  wait $s
}
ucx_pair() {
  out=$1; shift; p=$(port)
  env UCX_TLS=posix,self timeout 120 ucx_perftest -p "$p" > "$tmp/usrv" 2>&1 &
  s=$!; wait_listen "$p"
  env UCX_TLS=posix,self timeout 120 ucx_perftest localhost -p "$p" "$@" > "$out" 2>&1
  wait $s
}
lat() { awk '/^ *#bytes/ {getline; print $5; exit}' "$1"; }           # t_typical, us
avg() { awk '/^ *#bytes/ {getline; print $6; exit}' "$1"; }           # t_avg, us
bw() { awk '/^ *#bytes/ {getline; printf "%.2f", $4/1000; exit}' "$1"; } # GB/s
ucx_lat() { awk '/^Final:/ {print $3}' "$1"; }
# qperf_pair OUTFILE TEST...: qperf server + client on soft0, latencies in ns (-uu).
qperf_pair() {
  out=$1; shift; p=$(port)
  env LD_LIBRARY_PATH="$LIB" RDMAV_SOFT_DEVICES=1 timeout 120 qperf -lp "$p" > "$tmp/qsrv" 2>&1 &
  s=$!; wait_listen "$p"
  env LD_LIBRARY_PATH="$LIB" RDMAV_SOFT_DEVICES=1 timeout 120 qperf -lp "$p" localhost -cp1 -uu -t 2 "$@" > "$out" 2>&1
  kill $s 2>/dev/null; wait $s 2>/dev/null
}
# qperf_lat FILE TEST: that test's latency in us.
qperf_lat() { awk -v t="$2:" '$1 == t {getline; if ($4 == "ns") printf "%.3f", $3 / 1000; else if ($4 == "us") print $3; exit}' "$1"; }
ucx_bw() { awk '/^Final:/ {printf "%.2f", $6/1000}' "$1"; } # BW average

echo "openverbs soft device benchmarks ($(date -u +%FT%TZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
mc64=$("$B/bin/soft_memcpy_bw" 65536 | cut -d' ' -f2)
mc1m=$("$B/bin/soft_memcpy_bw" 1048576 | cut -d' ' -f2)
floor1=$("$B/bin/soft_line_floor")
# Latencies: ROUNDS rounds, ours and UCX back to back within each round so
# both meet the same machine; the latency rows are medians over the rounds.
# A single run can land in a mode of its own on a shared 2-core host: UCX
# at 0.03 us in about one run of ten (pinning the two processes does not
# change that) and either side at 0.24 us now and then. The UCX target is
# judged on the ratio of each round (ours and UCX ran back to back, so
# both met the same machine), median over the rounds; the ratio of the
# fastest run of each side (best of rounds) is printed for information.
med() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
wls= sls= rls= uls= qls= qwls= was= was2=
r=0
while [ $r -lt "$ROUNDS" ]; do
  pair "$tmp/wl" ib_write_lat -s 8 -n "$ITERS"
  qperf_pair "$tmp/ql" rc_lat rc_rdma_write_lat
  pair "$tmp/wl2" ib_write_lat -s 8 -n "$ITERS"
  qls="$qls $(qperf_lat "$tmp/ql" rc_lat)"; qwls="$qwls $(qperf_lat "$tmp/ql" rc_rdma_write_lat)"
  was="$was $(avg "$tmp/wl")"; was2="$was2 $(avg "$tmp/wl2")"
  ucx_pair "$tmp/ul" -t ucp_put_lat -s 8 -n 100000
  pair "$tmp/sl" ib_send_lat -s 8 -n "$ITERS"
  pair "$tmp/rl" ib_read_lat -s 8 -n "$ITERS"
  wls="$wls $(lat "$tmp/wl")"; uls="$uls $(ucx_lat "$tmp/ul")"
  sls="$sls $(lat "$tmp/sl")"; rls="$rls $(lat "$tmp/rl")"
  r=$((r + 1))
done
floor2=$("$B/bin/soft_line_floor")
wb64s= wb1ms= ub64s= ub1ms=
r=0
while [ $r -lt "${BENCH_BW_ROUNDS:-3}" ]; do
  pair "$tmp/wb64" ib_write_bw -s 65536 -n 5000
  ucx_pair "$tmp/ub64" -t ucp_put_bw -s 65536 -n 20000
  pair "$tmp/wb1m" ib_write_bw -s 1048576 -n 2000
  ucx_pair "$tmp/ub1m" -t ucp_put_bw -s 1048576 -n 2000
  wb64s="$wb64s $(bw "$tmp/wb64")"; ub64s="$ub64s $(ucx_bw "$tmp/ub64")"
  wb1ms="$wb1ms $(bw "$tmp/wb1m")"; ub1ms="$ub1ms $(ucx_bw "$tmp/ub1m")"
  r=$((r + 1))
done

# Registration: 1 GiB (3 pairs) and 4 KiB (2001 pairs), medians.
regs=$(env LD_LIBRARY_PATH="$LIB" RDMAV_SOFT_DEVICES=1 "$B/bin/soft_reg_cost" 1073741824 3)
reg1g=$(echo "$regs" | awk '{printf "%.3f", $5 / 1000}')   # ms
regs=$(env LD_LIBRARY_PATH="$LIB" RDMAV_SOFT_DEVICES=1 "$B/bin/soft_reg_cost" 4096 2001)
reg4k=$(echo "$regs" | awk '{print $5}')                   # us
wl=$(echo "$wls" | med); sl=$(echo "$sls" | med); rl=$(echo "$rls" | med)
ul=$(echo "$uls" | med)
wb64=$(echo "$wb64s" | med); wb1m=$(echo "$wb1ms" | med)
ub64=$(echo "$ub64s" | med); ub1m=$(echo "$ub1ms" | med)
ql=$(echo "$qls" | med); qwl=$(echo "$qwls" | med)
echo "latency rounds (us): ib_write_lat$wls | UCX put_lat$uls | ib_send_lat$sls | ib_read_lat$rls"
echo "qperf rounds (us, mean of the run): rc_lat$qls | rc_rdma_write_lat$qwls | ib_write_lat t_avg before$was | after$was2"
echo "bandwidth rounds (GB/s): ib_write_bw 64K$wb64s | UCX 64K$ub64s | ib_write_bw 1M$wb1ms | UCX 1M$ub1ms"
for v in wl sl rl wb64 wb1m ul ub64 ub1m mc64 mc1m ql qwl reg1g reg4k was2 floor1 floor2; do
  eval "x=\${$v}"; [ -n "$x" ] || { echo "missing result: $v (logs in $tmp)"; cat "$tmp"/*; trap - EXIT; exit 1; }
done
python3 - "$wl" "$sl" "$rl" "$wb64" "$wb1m" "$ul" "$ub64" "$ub1m" "$mc64" "$mc1m" "$wls" "$uls" \
  "$ql" "$qwl" "$reg1g" "$reg4k" "$qls" "$qwls" "$was" "$was2" "$floor1" "$floor2" \
  "$wb64s" "$ub64s" "$wb1ms" "$ub1ms" <<'PY'
import statistics, sys
wl, sl, rl, wb64, wb1m, ul, ub64, ub1m, mc64, mc1m = map(float, sys.argv[1:11])
ql, qwl, reg1g, reg4k = map(float, sys.argv[13:17])
# qperf against ib_write_lat: the ratio of each round, median. qperf
# reports the mean latency of its run, so it is judged against perftest's
# mean (t_avg) of the same round, run just before and just after qperf
# (the mean of the two); rounds whose two anchors differ by more than 1.5x
# met two machine states and are left out (all are kept if none is left).
# Against perftest's t_typical (median, which leaves out the scheduling
# stalls of a loaded host) for information.
before, after = [float(x) for x in sys.argv[19].split()], [float(x) for x in sys.argv[20].split()]
anchor = [(a + b) / 2 for a, b in zip(before, after)]
steady = [max(a, b) <= 1.5 * min(a, b) for a, b in zip(before, after)]
if not any(steady):
    steady = [True] * len(anchor)
def per_round(ours, anchor):
    return statistics.median(float(a) / float(b) for a, b, k in zip(ours.split(), anchor, steady) if k)
qr, qwr = per_round(sys.argv[17], anchor), per_round(sys.argv[18], anchor)
typ = [float(x) for x in sys.argv[11].split()]
qr_t, qwr_t = per_round(sys.argv[17], typ), per_round(sys.argv[18], typ)
print("qperf / ib_write_lat per round (rc_lat, rc_rdma_write_lat; * = anchors disagree, left out): " +
      " ".join("%.2f,%.2f%s" % (float(q) / a, float(w) / a, "" if k else "*")
               for q, w, a, k in zip(sys.argv[17].split(), sys.argv[18].split(), anchor, steady)))
# Latency against UCX: the ratio of each round (ours and UCX ran back to
# back), median over the rounds.
ratios = [float(a) / float(b) for a, b in zip(sys.argv[11].split(), sys.argv[12].split())]
lr = statistics.median(ratios)
# For information: the fastest run of each side (their rare modes need not
# meet in one round).
best = min(map(float, sys.argv[11].split())) / min(map(float, sys.argv[12].split()))
print("write_lat / UCX put_lat per round: " + " ".join("%.2f" % r for r in ratios))
# Bandwidth against UCX: ours and UCX's of the same size ran back to back in
# each round; the ratio of each round, median over the rounds.
def bw_ratios(ours, ucx):
    return [float(a) / float(b) for a, b in zip(ours.split(), ucx.split())]
r64, r1m = bw_ratios(sys.argv[23], sys.argv[24]), bw_ratios(sys.argv[25], sys.argv[26])
br64, br1m = statistics.median(r64), statistics.median(r1m)
print("write_bw / UCX put_bw per round: 64K " + " ".join("%.2f" % r for r in r64) +
      " | 1M " + " ".join("%.2f" % r for r in r1m))
rows = [
  ("ib_write_lat 8 B median (us)", wl, "<= 1.0", wl <= 1.0),
  ("ib_send_lat 8 B median (us)", sl, "<= 1.5", sl <= 1.5),
  ("ib_read_lat 8 B median (us)", rl, "<= 1.5", rl <= 1.5),
  ("ib_write_bw 64 KiB (GB/s)", wb64, ">= 10", wb64 >= 10),
  ("ib_write_bw 1 MiB (GB/s)", wb1m, ">= %.2f (0.5 x memcpy %.2f)" % (mc1m / 2, mc1m), wb1m >= mc1m / 2),
  ("write_lat / UCX put_lat (median per round)", lr, "<= 2.0", lr <= 2.0),
  ("write_lat / UCX put_lat (median / median)", wl / ul, "(information)", True),
  ("write_lat / UCX put_lat (best of rounds)", best, "(information)", True),
  ("write_bw 64K / UCX put_bw (median per round)", br64, ">= 0.8", br64 >= 0.8),
  ("write_bw 1M / UCX put_bw (median per round)", br1m, ">= 0.8", br1m >= 0.8),
  ("qperf rc_lat median (us)", ql, "<= 0.3", ql <= 0.3),
  ("qperf rc_rdma_write_lat median (us)", qwl, "<= 0.3", qwl <= 0.3),
  ("qperf rc_lat / ib_write_lat t_avg (per round)", qr, "<= 2.0", qr <= 2.0),
  ("qperf rc_rdma_write_lat / ib_write_lat t_avg", qwr, "<= 2.0", qwr <= 2.0),
  ("qperf rc_lat / ib_write_lat t_typical", qr_t, "(information)", True),
  ("qperf rc_rdma_write_lat / ib_write_lat t_typical", qwr_t, "(information)", True),
  ("reg+dereg 1 GiB touched (ms)", reg1g, "<= 100", reg1g <= 100),
  ("reg+dereg 4 KiB (us)", reg4k, "<= 20", reg4k <= 20),
]
print("%-50s %10s  %-30s %s" % ("measure", "value", "target", "met"))
for name, v, t, ok in rows:
    print("%-50s %10.3f  %-30s %s" % (name, v, t, "yes" if ok else "NO"))
print("memcpy single thread: 64 KiB %.2f GB/s, 1 MiB %.2f GB/s; UCX put_lat median %.3f us" % (mc64, mc1m, ul))
(fw1, fs1), (fw2, fs2) = [map(float, a.split()) for a in sys.argv[21:23]]
print("cache-line floor, no verbs (soft_line_floor, before / after the rounds), ns one way: "
      "ib_write_lat's pattern %.0f / %.0f, an RC SEND's least %.0f / %.0f; "
      "qperf rc_lat median / that SEND floor %.2f" % (fw1, fw2, fs1, fs2, ql * 1000 / ((fs1 + fs2) / 2)))
PY
