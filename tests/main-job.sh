#!/bin/sh
# The main job: build openverbs, then run Debian's unmodified ibv_devinfo and an
# ibv_rc_pingpong pair on our libibverbs.so.1, and an rping pair (rdma_cm) on
# our librdmacm.so.1.
#
# With the software device (providers/soft) built, this runs right here, with
# no RDMA kernel support and no root: RDMAV_SOFT_DEVICES=1 presents soft0.
# Without it, the same programs run on kernel rxe inside the qemu test bed.
set -e
cd "$(dirname "$0")/.."
sh tests/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"

LIB="$PWD/build/lib"
if [ -f "$LIB/libibverbs/libsoft-rdmav34.so" ]; then
  export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export RDMAV_SOFT_DEVICES=1
  echo "== ibv_devinfo on the software device (our libibverbs: $LIB)"
  ibv_devinfo
  PORT=$((20000 + $$ % 20000))
  echo "== ibv_rc_pingpong pair on soft0 (TCP port $PORT)"
  timeout 60 ibv_rc_pingpong -d soft0 -p "$PORT" -n 1000 > build/main-job-server.log 2>&1 &
  SERVER=$!
  # wait for the server's TCP listener
  i=0
  while [ $i -lt 100 ] && ! grep -q "$(printf ':%04X ' "$PORT")" /proc/net/tcp /proc/net/tcp6 2>/dev/null; do
    kill -0 $SERVER 2>/dev/null || break
    sleep 0.1; i=$((i + 1))
  done
  status=0
  timeout 60 ibv_rc_pingpong -d soft0 -p "$PORT" -n 1000 localhost || status=$?
  wait $SERVER || status=$?
  echo "-- server:"; cat build/main-job-server.log
  if [ $status -eq 0 ] && [ -f "$LIB/librdmacm.so.1" ]; then
    # rdma_cm through the software devices' connection manager: the server
    # is ready once its CM socket exists.
    echo "== rping pair on soft0 (rdma_cm, 127.0.0.1 port $PORT)"
    timeout 60 rping -s -a 127.0.0.1 -p "$PORT" -C 100 -v > build/main-job-rping.log 2>&1 &
    SERVER=$!
    i=0
    while [ $i -lt 100 ] && ! ls "/dev/shm/openverbs-$(id -u)/cm" 2>/dev/null | grep -q "tcp-$PORT-"; do
      kill -0 $SERVER 2>/dev/null || break
      sleep 0.1; i=$((i + 1))
    done
    timeout 60 rping -c -a 127.0.0.1 -p "$PORT" -C 100 -v > build/main-job-rping-client.log 2>&1 || status=$?
    tail -3 build/main-job-rping-client.log
    wait $SERVER || status=$?
    echo "-- server:"; tail -3 build/main-job-rping.log
  fi
  if [ $status -eq 0 ]; then echo "main job: PASS"; else echo "main job: FAIL ($status)"; fi
  exit $status
else
  echo "== software device not built: running on kernel rxe in the qemu test bed"
  exec sh tests/vm/run.sh --lib "$LIB" --only main
fi
