// Internals of libibumad.so.3 (openverbs).  Nothing here is exported: the
// exported surface is libibumad.symbols.
//
// Layering inside src/umad:
//   sysfs_attr.cpp  paths (with the test/container root overrides) and the
//                   sysfs attribute readers and parsers (fuzzed)
//   devices.cpp     CA/port discovery: umad_get_ca/port, device lists, issm
//   port_io.cpp     umad character device: open, register, send/recv, MAD
//                   buffer helpers, debug dumps
//   kabi.cpp        the ioctls, the only file that sees <rdma/ib_user_mad.h>
//   str.cpp         the *_str helpers
//
// umad2sim (Debian's fabric simulator preload) interposes only open, close,
// read, write, ioctl, poll, opendir, readdir, closedir and scandir on the
// literal paths /sys/class/infiniband*, /dev/infiniband/*: every file access
// of this library goes through exactly those calls.
#pragma once

#include <infiniband/umad.h>

#include <cstddef>
#include <cstdint>

namespace ov::umad {

// ---- paths ---------------------------------------------------------------
// Root that replaces "/sys" (env OPENVERBS_UMAD_SYSFS_ROOT, ignored when
// setuid/setgid); "/sys" by default so that default paths are literal.
const char *sys_root() noexcept;
// Root that replaces "/dev" (env OPENVERBS_UMAD_DEV_ROOT, same rules).
const char *dev_root() noexcept;

// Path buffers: long enough for any override root plus a sysfs path.
constexpr size_t kPathMax = 4096;

// snprintf into out; false when the result does not fit.
bool make_path(char *out, size_t len, const char *fmt, ...) noexcept
	__attribute__((format(printf, 3, 4)));

// ---- sysfs attributes ----------------------------------------------------
// Reads <dir>/<name> with one read() of at most max_len bytes, NUL-terminates
// (keeping at most max_len - 1 bytes) and cuts at the last '\n'.
// Returns 0 or -errno of open()/read().
int read_string(const char *dir, const char *name, char *str, int max_len) noexcept;

// Leading unsigned integer, strtoul(text, NULL, 0) semantics ("4: ACTIVE" -> 4,
// "0x1a" -> 26, "100 Gb/sec" -> 100, junk -> 0), truncated to unsigned.
unsigned parse_uint(const char *text) noexcept;

// Splits text at each of ':', ' ', '\t', '\n' (an empty field counts) and
// parses the first `count` fields as hexadecimal 16-bit groups into out
// (host order).  -EINVAL when text has fewer than `count` fields.
int parse_hex_groups(const char *text, uint16_t *out, int count) noexcept;

// "xxxx:xxxx:xxxx:xxxx" -> GUID in network byte order; -EINVAL if malformed.
int parse_guid(const char *text, __be64 *net_guid) noexcept;
// "xxxx:...:xxxx" (8 groups) -> GID in network byte order; -EINVAL if malformed.
int parse_gid(const char *text, union umad_gid *gid) noexcept;

int read_uint(const char *dir, const char *name, unsigned *value) noexcept;
int read_guid(const char *dir, const char *name, __be64 *net_guid) noexcept;
int read_gid(const char *dir, const char *name, union umad_gid *gid) noexcept;

// ---- diagnostics ---------------------------------------------------------
// Level set by umad_debug(); 0 = quiet.
int debug_level() noexcept;
void set_debug_level(int level) noexcept;
// "ibwarn: [pid] func: message\n" on stderr, as rdma-core's libibumad prints.
void warn(const char *func, const char *fmt, ...) noexcept
	__attribute__((format(printf, 2, 3)));

// ---- kernel ioctls (kabi.cpp) --------------------------------------------
// Each returns the ioctl() result (0, or -1 with errno set).
int ioctl_enable_pkey(int fd) noexcept;
int ioctl_register(int fd, uint32_t *id, uint8_t qpn, uint8_t mgmt_class,
		   uint8_t mgmt_class_version, const uint8_t oui[3],
		   uint8_t rmpp_version, const void *method_mask16) noexcept;
int ioctl_register2(int fd, uint32_t *id, uint32_t *flags, uint32_t qpn,
		    uint8_t mgmt_class, uint8_t mgmt_class_version,
		    const uint64_t method_mask[2], uint32_t oui,
		    uint8_t rmpp_version) noexcept;
int ioctl_unregister(int fd, uint32_t *id) noexcept;

// ---- devices (devices.cpp) -------------------------------------------------
// (ca, port) -> index N of /dev/infiniband/umadN, choosing defaults as
// umad_open_port does; with smi_only only SMI ports (is_smi_port) count.
// 0, -ENODEV (nothing to choose), -EINVAL (no umad device for the port).
int resolve_umad_id(const char *ca_name, int portnum, int *umad_id, bool smi_only) noexcept;
// False when the port's capability mask has IsSMDisabled (bit 10): its
// subnet management goes through another device's port.
bool is_smi_port(const umad_port_t *port) noexcept;

// ---- shared state --------------------------------------------------------
// True once umad_open_port saw a kernel with the P_Key-index capable header
// (ABI > 5 or IB_USER_MAD_ENABLE_PKEY accepted); selects umad_size() 64 vs 56.
bool new_user_mad_api() noexcept;
void set_new_user_mad_api(bool on) noexcept;

} // namespace ov::umad

// Every exported function: default visibility on top of -fvisibility=hidden.
// Definitions carry no noexcept: they must match the C declarations of
// <infiniband/umad.h> (clang rejects the mismatch; -fno-exceptions already
// keeps them from throwing).
#define UMAD_EXPORT extern "C" __attribute__((visibility("default")))
