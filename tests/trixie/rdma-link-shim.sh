#!/bin/sh
# rdma-link-shim.sh: stands in for iproute2's `rdma` inside the Debian 13
# root of tests/trixie, in front of the real one on PATH (as /usr/local/sbin/rdma).
#
# rdma-core 56's Python test suite (tests/base.py, RDMATestCase.get_net_name)
# runs `rdma link show -j` while it sets up every test, to find the network
# device of the RDMA port. `rdma` asks the kernel over RDMA netlink
# (NETLINK_RDMA), which knows nothing of the software devices (they exist only
# in user space) and which this machine's kernel may not offer at all ("Failed
# to open NETLINK_RDMA socket", exit 1), so every test errors before it starts.
#
# For exactly `rdma link show -j` this prints, as JSON in iproute2's format,
# one row per port of every device our libibverbs lists, read with Debian's
# unmodified ibv_devinfo (ifindex, ifname, port, state, physical_state; no
# netdev: soft devices have none, which is what the suite then concludes from
# the row). Anything else is passed to the real /usr/sbin/rdma.
set -eu
if [ "$#" = 3 ] && [ "$1" = link ] && [ "$2" = show ] && [ "$3" = -j ]; then
    ibv_devinfo 2>/dev/null | awk '
        function flush() {
            if (port == "") return
            printf "%s{\"ifindex\":%d,\"ifname\":\"%s\",\"port\":%d,\"state\":\"%s\",\"physical_state\":\"%s\"}",
                sep, idx, dev, port, state, phys
            sep = ","; port = ""
        }
        BEGIN { printf "["; sep = ""; idx = -1; port = "" }
        /^hca_id:/ { flush(); dev = $2; idx++ }
        /^[ \t]*port:/ { flush(); port = $2 }
        /^[ \t]*state:/ { state = $2; sub(/^PORT_/, "", state) }
        /^[ \t]*phys_state:/ { phys = $2 }
        END { flush(); print "]" }'
    exit 0
fi
exec /usr/sbin/rdma "$@"
