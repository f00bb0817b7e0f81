#!/bin/bash
# The kernel transport on the real uverbs ABI (qemu test bed): Debian's rxe
# and siw providers on our library, every object's life cycle in the three
# transport modes (ioctl, every op legacy with INVOKE_WRITE, plain write()),
# plus an RC send over a loopback QP pair on rxe.
# Run: tests/vm/run.sh --group "$PWD/tests/unit/kernel/vm-group-kernel-transport.sh"
. "$OV_REPO/tests/vm/lib.sh"
prog=$OV_BUILD_DIR/bin/kernel_transport_real
if [ "$OV_MODE" = baseline ] || [ ! -x "$prog" ]; then
  t0=$(ov_now)
  ov_result SKIP transport-all "$t0" "needs the project's library and $prog"
  exit 0
fi
for mode in ioctl tunnel write; do
  ov_run "rxe-$mode" --expect "$mode: all passed" -- "$prog" "$RXE_DEV" "$RXE_GID_INDEX" "$mode" rc
  ov_run "siw-$mode" --expect "$mode: all passed" -- "$prog" "$SIW_DEV" 0 "$mode"
done
exit "$ov_failed"
