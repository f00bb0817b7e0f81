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

// Socket-path spelling of an address: hex of its bytes, or any4/any6.
std::string addr_key(const sockaddr *sa);

} // namespace ov::usercm
