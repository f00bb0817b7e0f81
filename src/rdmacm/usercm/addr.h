// Which addresses the software devices' connection manager serves
// (src/DESIGN.md, "Connection manager for software devices", "Which addresses").
#pragma once

#include <cstdint>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <vector>

namespace ov::usercm {

// One binding "address (or prefix) -> soft device index".
struct AddrBinding {
	int device = 0;
	int family = 0;         // AF_INET, AF_INET6, or AF_UNSPEC for "*"
	uint8_t addr[16] = {};  // network byte order
	int prefix = 0;         // bits
};

// Parses "soft1=10.1.0.0/16,fd00::5;soft0=*" (the OPENVERBS_CM_SOFT_ADDRS
// syntax). Returns false (and leaves `out` alone) on any syntax error.
bool parse_bindings(const char *text, std::vector<AddrBinding> &out);

// The explicit bindings: OPENVERBS_CM_SOFT_ADDRS (ignored when setuid), else
// the `cm_soft_address softN ADDR[/PREFIX]` lines of the libibverbs.d files
// ($OPENVERBS_CONFIG_DIR, then /etc/libibverbs.d). Read once per process.
const std::vector<AddrBinding> &bindings();

// The device an explicit binding gives `sa`, or -1.
int bound_device(const sockaddr *sa);

// True for 127.0.0.0/8, ::1, ::ffff:127.0.0.0/104 and any address of this
// host's interfaces (getifaddrs). The wildcard address counts as local.
bool is_local_address(const sockaddr *sa);

// True for INADDR_ANY / in6addr_any.
bool is_wildcard(const sockaddr *sa);

// The soft device serving `sa` when the kernel owns no device for it:
// an explicit binding, else soft0 for a local address; -1 otherwise.
int soft_device_for(const sockaddr *sa);

// ---- RoCE v2 software devices (sroce<N>): a device per network interface.

// The network interfaces of the sroce devices, in device order: the list of
// RDMAV_SOFT_ROCE (ignored when setuid) as the core reads it, else empty
// (the caller then matches interfaces by the device's GUID).
std::vector<std::string> roce_interfaces_from_env();

// The interface of this network namespace whose MAC's EUI-64 is `guid`
// (network order, as ibv_get_device_guid gives it): the core names an sroce
// device's node GUID so. Empty when none or more than one match.
std::string interface_by_guid(uint64_t guid);

// Which of `ifnames` serves `sa`: the interface that owns the address,
// else the one whose subnet contains it (the longest prefix); -1 if none.
// IPv4-mapped IPv6 addresses count as IPv4.
int roce_interface_for(const sockaddr *sa, const std::vector<std::string> &ifnames);

// The source address on interface `ifname` for a connection to `dst`: an
// address of dst's family whose subnet contains dst, else the first of
// that family (IPv6: not link-local unless dst is). Port 0.
bool roce_source_for(const std::string &ifname, const sockaddr *dst, sockaddr_storage &out);

// The RoCE v2 GID of an IP address: ::ffff:a.b.c.d for IPv4, the address
// itself for IPv6 (openverbs-roce(7), GID table).
void roce_gid_of(const sockaddr *sa, uint8_t gid[16]);

// The IB MTU (enum ibv_mtu, 1..5) the sroce device on `ifname` reports:
// the largest whose biggest packet (IPv6, UDP, BTH, RETH, ImmDt and ICRC
// around the payload: 84 bytes) fits the interface MTU, and at least
// IBV_MTU_256; 0 when the interface is missing. The interface's MTU is
// read at most once a second (an answer may be up to a second old).
uint8_t roce_ib_mtu(const std::string &ifname);

// Socket-path spelling of an address: hex of its bytes, or any4/any6.
std::string addr_key(const sockaddr *sa);

} // namespace ov::usercm
