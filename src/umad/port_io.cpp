// The umad character device: open/close, agent registration, send/recv/poll,
// the MAD buffer helpers and the debug dumps.  Semantics (return values,
// errno) follow rdma-core 44 and the Debian man pages umad_*(3).
#include "umad/internal.h"

#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

namespace ov::umad {

namespace {
int g_debug = 0;
bool g_new_api = false;

constexpr uint8_t kClassSubnLid = 0x01;
constexpr uint8_t kClassSubnDirected = 0x81;
constexpr int kVendorRange2Start = 0x30;
constexpr int kVendorRange2End = 0x4f;

// QP 0 for the subnet-management classes, QP 1 for everything else.
uint8_t qpn_for_class(int mgmt_class) noexcept
{
	return (mgmt_class == kClassSubnLid || mgmt_class == kClassSubnDirected) ? 0 : 1;
}

// The ABI of the umad device from <sys>/class/infiniband_mad/abi_version;
// 0 when unreadable or older than IB_UMAD_ABI_VERSION.  Like rdma-core, the
// answer (and so the one warning) is kept for the life of the process; it is
// read again only when the sysfs root override changes (tests).
unsigned abi_version() noexcept
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static char cached_dir[kPathMax];
	static bool cached = false;
	static unsigned cached_value = 0;

	char dir[kPathMax];
	if (!make_path(dir, sizeof(dir), "%s/class/infiniband_mad", sys_root()))
		return 0;
	pthread_mutex_lock(&lock);
	if (!cached || strcmp(dir, cached_dir)) {
		unsigned v = 0;
		if (read_uint(dir, IB_UMAD_ABI_FILE, &v) < 0) {
			int e = errno;
			warn("get_abi_version",
			     "can't read ABI version from %s/%s (%s): is ib_umad module loaded?",
			     dir, IB_UMAD_ABI_FILE, strerror(e));
			v = 0;
		}
		cached_value = v < IB_UMAD_ABI_VERSION ? 0 : v;
		snprintf(cached_dir, sizeof(cached_dir), "%s", dir);
		cached = true;
	}
	unsigned v = cached_value;
	pthread_mutex_unlock(&lock);
	return v;
}

int dev_poll(int fd, int timeout_ms) noexcept
{
	struct pollfd p;
	p.fd = fd;
	p.events = POLLIN;
	p.revents = 0;
	int n = poll(&p, 1, timeout_ms);
	if (n == 1)
		return 0;
	return n == 0 ? -ETIMEDOUT : -EIO;
}

struct ib_user_mad *as_mad(void *umad) noexcept { return static_cast<struct ib_user_mad *>(umad); }

} // namespace

int debug_level() noexcept { return g_debug; }
void set_debug_level(int level) noexcept { g_debug = level; }
bool new_user_mad_api() noexcept { return g_new_api; }
void set_new_user_mad_api(bool on) noexcept { g_new_api = on; }

void warn(const char *func, const char *fmt, ...) noexcept
{
	int saved = errno;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "ibwarn: [%d] %s: %s\n", static_cast<int>(getpid()), func, msg);
	errno = saved;
}

} // namespace ov::umad

using namespace ov::umad;

namespace ov::umad {
namespace {
// umad_open_port and umad_open_smi_port: the ABI check, the port choice,
// then O_RDWR|O_NONBLOCK on /dev/infiniband/umadN.
int open_umad_port(const char *func, const char *ca_name, int portnum, bool smi_only) noexcept
{
	unsigned abi = abi_version();
	if (!abi)
		return -EOPNOTSUPP;
	int id = -1;
	if (int r = resolve_umad_id(ca_name, portnum, &id, smi_only))
		return r;
	char path[kPathMax];
	if (!make_path(path, sizeof(path), "%s/infiniband/umad%d", dev_root(), id))
		return -EIO;
	int fd = open(path, O_RDWR | O_NONBLOCK);
	if (fd < 0) {
		if (debug_level())
			warn(func, "open %s failed: %s", path, strerror(errno));
		return -EIO;
	}
	set_new_user_mad_api(abi > IB_UMAD_ABI_VERSION || ioctl_enable_pkey(fd) == 0);
	if (debug_level())
		warn(func, "opened %s fd %d portid %d", path, fd, id);
	return fd;
}
} // namespace
} // namespace ov::umad

UMAD_EXPORT int umad_open_port(const char *ca_name, int portnum)
{
	return open_umad_port("umad_open_port", ca_name, portnum, false);
}

#if _OPENVERBS_ABI >= 56
UMAD_EXPORT int umad_open_smi_port(const char *ca_name, int portnum)
{
	return open_umad_port("umad_open_smi_port", ca_name, portnum, true);
}
#endif

UMAD_EXPORT int umad_close_port(int portid)
{
	close(portid);
	return 0;
}

UMAD_EXPORT void *umad_get_mad(void *umad)
{
	if (!umad)
		return nullptr;
	struct ib_user_mad *mad = as_mad(umad);
	// Old 56-byte header: the MAD starts where pkey_index would be.
	return new_user_mad_api() ? static_cast<void *>(mad->data)
				  : static_cast<void *>(&mad->addr.pkey_index);
}

UMAD_EXPORT size_t umad_size(void)
{
	return new_user_mad_api() ? sizeof(struct ib_user_mad) : sizeof(struct ib_user_mad) - 8;
}

UMAD_EXPORT int umad_set_grh(void *umad, void *mad_addr)
{
	if (!umad)
		return -EINVAL;
	struct ib_user_mad *mad = as_mad(umad);
	if (!mad_addr) {
		mad->addr.grh_present = 0;
		return 0;
	}
	const auto *src = static_cast<const ib_mad_addr_t *>(mad_addr);
	mad->addr.grh_present = 1;
	memcpy(mad->addr.gid, src->gid, sizeof(mad->addr.gid));
	// The caller gives the flow label in host order.
	mad->addr.flow_label = htobe32(static_cast<uint32_t>(src->flow_label));
	mad->addr.hop_limit = src->hop_limit;
	mad->addr.traffic_class = src->traffic_class;
	return 0;
}

UMAD_EXPORT int umad_set_pkey(void *umad, int pkey_index)
{
	if (!umad)
		return -EINVAL;
	if (new_user_mad_api())
		as_mad(umad)->addr.pkey_index = static_cast<uint16_t>(pkey_index);
	return 0;
}

UMAD_EXPORT int umad_get_pkey(void *umad)
{
	if (!umad)
		return -EINVAL;
	return new_user_mad_api() ? as_mad(umad)->addr.pkey_index : 0;
}

UMAD_EXPORT int umad_set_addr(void *umad, int dlid, int dqp, int sl, int qkey)
{
	if (!umad)
		return -EINVAL;
	struct ib_user_mad *mad = as_mad(umad);
	mad->addr.qpn = htobe32(static_cast<uint32_t>(dqp));
	mad->addr.lid = htobe16(static_cast<uint16_t>(dlid));
	mad->addr.qkey = htobe32(static_cast<uint32_t>(qkey));
	mad->addr.sl = static_cast<uint8_t>(sl);
	return 0;
}

UMAD_EXPORT int umad_set_addr_net(void *umad, __be16 dlid, __be32 dqp, int sl, __be32 qkey)
{
	if (!umad)
		return -EINVAL;
	struct ib_user_mad *mad = as_mad(umad);
	mad->addr.qpn = dqp;
	mad->addr.lid = dlid;
	mad->addr.qkey = qkey;
	mad->addr.sl = static_cast<uint8_t>(sl);
	return 0;
}

UMAD_EXPORT int umad_send(int portid, int agentid, void *umad, int length, int timeout_ms,
			  int retries)
{
	if (!umad || length < 0) {
		errno = EINVAL;
		return -EINVAL;
	}
	struct ib_user_mad *mad = as_mad(umad);
	errno = 0;
	mad->timeout_ms = static_cast<uint32_t>(timeout_ms);
	mad->retries = static_cast<uint32_t>(retries);
	mad->agent_id = static_cast<uint32_t>(agentid);
	if (debug_level() > 1)
		umad_dump(mad);
	size_t total = static_cast<size_t>(length) + umad_size();
	ssize_t n = write(portid, mad, total);
	if (n == static_cast<ssize_t>(total))
		return 0;
	if (debug_level())
		warn("umad_send", "write returned %zd != %zu", n, total);
	if (!errno)
		errno = EIO;
	return -EIO;
}

UMAD_EXPORT int umad_recv(int portid, void *umad, int *length, int timeout_ms)
{
	errno = 0;
	if (!umad || !length || *length < 0) {
		errno = EINVAL;
		return -EINVAL;
	}
	struct ib_user_mad *mad = as_mad(umad);
	if (timeout_ms) {
		int r = dev_poll(portid, timeout_ms);
		if (r < 0) {
			if (!errno)
				errno = -r;
			return r;
		}
	}
	size_t hdr = umad_size();
	size_t cap = hdr + static_cast<size_t>(*length);
	ssize_t n = read(portid, mad, cap);
	if (n >= 0 && static_cast<size_t>(n) <= cap) {
		*length = static_cast<size_t>(n) > hdr ? static_cast<int>(static_cast<size_t>(n) - hdr) : 0;
		return static_cast<int>(mad->agent_id);
	}
	if (n == -EWOULDBLOCK) {
		// umad2sim reports "nothing queued" as a negative return value.
		if (!errno)
			errno = EWOULDBLOCK;
		return static_cast<int>(n);
	}
	// ENOSPC: the kernel wrote the header; length tells the size needed.
	*length = static_cast<int>(mad->length - hdr);
	if (!errno)
		errno = EIO;
	return -errno;
}

UMAD_EXPORT int umad_poll(int portid, int timeout_ms)
{
	return dev_poll(portid, timeout_ms);
}

UMAD_EXPORT int umad_get_fd(int portid)
{
	return portid;
}

UMAD_EXPORT int umad_register_oui(int portid, int mgmt_class, uint8_t rmpp_version,
				  uint8_t oui[3], long method_mask[16 / sizeof(long)])
{
	if (mgmt_class < kVendorRange2Start || mgmt_class > kVendorRange2End || !oui)
		return -EINVAL;
	uint32_t id = 0;
	if (ioctl_register(portid, &id, 1, static_cast<uint8_t>(mgmt_class), 1, oui,
			   rmpp_version, method_mask) == 0)
		return static_cast<int>(id);
	if (debug_level())
		warn("umad_register_oui", "fd %d class 0x%x: %s", portid, mgmt_class,
		     strerror(errno));
	return -EPERM;
}

UMAD_EXPORT int umad_register(int portid, int mgmt_class, int mgmt_version, uint8_t rmpp_version,
			      long method_mask[16 / sizeof(long)])
{
	const uint8_t openib_oui[3] = {0x00, 0x14, 0x05};
	uint32_t id = 0;
	if (ioctl_register(portid, &id, qpn_for_class(mgmt_class), static_cast<uint8_t>(mgmt_class),
			   static_cast<uint8_t>(mgmt_version), openib_oui, rmpp_version,
			   method_mask) == 0) {
		if (debug_level())
			warn("umad_register", "fd %d registered agent %u", portid, id);
		return static_cast<int>(id);
	}
	if (debug_level())
		warn("umad_register", "fd %d class 0x%x version %d: %s", portid, mgmt_class,
		     mgmt_version, strerror(errno));
	return -EPERM;
}

UMAD_EXPORT int umad_register2(int port_fd, struct umad_reg_attr *attr, uint32_t *agent_id)
{
	if (!attr || !agent_id)
		return EINVAL;
	if (attr->mgmt_class >= kVendorRange2Start && attr->mgmt_class <= kVendorRange2End &&
	    ((attr->oui & 0x00ffffff) == 0 || (attr->oui & 0xff000000) != 0))
		return EINVAL; // vendor range 2 needs a 24-bit OUI
	uint8_t qpn = qpn_for_class(attr->mgmt_class);
	uint32_t flags = attr->flags;
	uint32_t id = 0;
	if (ioctl_register2(port_fd, &id, &flags, qpn, attr->mgmt_class,
			    attr->mgmt_class_version, attr->method_mask, attr->oui,
			    attr->rmpp_version) == 0) {
		*agent_id = id;
		return 0;
	}
	if (errno == ENOTTY || errno == EINVAL) {
		// Kernel (or simulator) without REGISTER_AGENT2: the old ioctl can
		// do it when no flag is asked for.
		flags = 0;
		if (attr->flags == 0) {
			const uint8_t oui[3] = {static_cast<uint8_t>((attr->oui >> 16) & 0xff),
						static_cast<uint8_t>((attr->oui >> 8) & 0xff),
						static_cast<uint8_t>(attr->oui & 0xff)};
			if (ioctl_register(port_fd, &id, qpn, attr->mgmt_class,
					   attr->mgmt_class_version, oui, attr->rmpp_version,
					   attr->method_mask) == 0) {
				*agent_id = id;
				return 0;
			}
		}
	}
	int rc = errno;
	attr->flags = flags;
	if (debug_level())
		warn("umad_register2", "fd %d class 0x%x failed, flags 0x%x: %s", port_fd,
		     attr->mgmt_class, flags, strerror(rc));
	return rc;
}

UMAD_EXPORT int umad_unregister(int portid, int agentid)
{
	uint32_t id = static_cast<uint32_t>(agentid);
	return ioctl_unregister(portid, &id);
}

UMAD_EXPORT int umad_status(void *umad)
{
	if (!umad)
		return -EINVAL;
	return static_cast<int>(as_mad(umad)->status);
}

UMAD_EXPORT ib_mad_addr_t *umad_get_mad_addr(void *umad)
{
	if (!umad)
		return nullptr;
	return &as_mad(umad)->addr;
}

UMAD_EXPORT int umad_debug(int level)
{
	if (level >= 0)
		set_debug_level(level);
	return debug_level();
}

UMAD_EXPORT void umad_addr_dump(ib_mad_addr_t *addr)
{
	if (!addr)
		return;
	char gid[2 * sizeof(addr->gid) + 1];
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < sizeof(addr->gid); ++i) {
		gid[2 * i] = hex[addr->gid[i] >> 4];
		gid[2 * i + 1] = hex[addr->gid[i] & 0xf];
	}
	gid[sizeof(gid) - 1] = '\0';
	// Same three lines (one "ibwarn:" prefix) as rdma-core prints; flow_label
	// and pkey_index are shown as stored.
	warn("umad_addr_dump",
	     "qpn %d qkey 0x%x lid %u sl %d\n"
	     "grh_present %d gid_index %d hop_limit %d traffic_class %d flow_label 0x%x "
	     "pkey_index 0x%x\nGid 0x%s",
	     static_cast<int>(be32toh(addr->qpn)), be32toh(addr->qkey), be16toh(addr->lid),
	     addr->sl, addr->grh_present, addr->gid_index, addr->hop_limit,
	     addr->traffic_class, addr->flow_label, addr->pkey_index, gid);
}

UMAD_EXPORT void umad_dump(void *umad)
{
	if (!umad)
		return;
	struct ib_user_mad *mad = as_mad(umad);
	warn("umad_dump", "agent id %d status %x timeout %d", static_cast<int>(mad->agent_id),
	     mad->status, static_cast<int>(mad->timeout_ms));
	umad_addr_dump(&mad->addr);
}
