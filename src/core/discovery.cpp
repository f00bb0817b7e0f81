#include "core/discovery.h"

#include "common/log.h"
#include "core/settings.h"
#include "core/sysfs.h"

#include <infiniband/openverbs.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <rdma/rdma_netlink.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <mutex>
#include <string_view>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>

namespace ov::core {
namespace {

constexpr uint32_t kUverbsAbiNetlink = 6; // facts 1.3: netlink mode forces ABI 6

// Copies a NUL-terminated string into a fixed field; false if it does not fit.
template <size_t N> bool copy_name(char (&dst)[N], std::string_view src)
{
	if (src.empty() || src.size() >= N)
		return false;
	memcpy(dst, src.data(), src.size());
	dst[src.size()] = '\0';
	return true;
}

bool set_path(char *dst, size_t n, const std::string &a, const char *mid, const char *b)
{
	int len = snprintf(dst, n, "%s%s%s", a.c_str(), mid, b);
	return len > 0 && static_cast<size_t>(len) < n;
}

// A netlink string attribute: non-empty and terminated inside the payload.
const char *nla_string(const nlattr *a)
{
	if (!a)
		return nullptr;
	int len = nla_len(a);
	const char *s = static_cast<const char *>(nla_data(a));
	if (len <= 0 || !memchr(s, '\0', static_cast<size_t>(len)) || s[0] == '\0')
		return nullptr;
	return s;
}

bool nla_uint(const nlattr *a, uint64_t *out)
{
	if (!a)
		return false;
	switch (nla_len(a)) {
	case 1: *out = *static_cast<const uint8_t *>(nla_data(a)); return true;
	case 2: { uint16_t v; memcpy(&v, nla_data(a), 2); *out = v; return true; }
	case 4: { uint32_t v; memcpy(&v, nla_data(a), 4); *out = v; return true; }
	case 8: { uint64_t v; memcpy(&v, nla_data(a), 8); *out = v; return true; }
	default: return false;
	}
}

bool parse_attrs(const nlmsghdr *hdr, nlattr **tb)
{
	return nlmsg_parse(const_cast<nlmsghdr *>(hdr), 0, tb, RDMA_NLDEV_ATTR_MAX - 1,
			   nullptr) == 0;
}

// RAII netlink socket bound to NETLINK_RDMA.
struct NlSocket {
	nl_sock *sk = nullptr;
	~NlSocket() { if (sk) nl_socket_free(sk); }
	int open()
	{
		sk = nl_socket_alloc();
		if (!sk)
			return -ENOMEM;
		nl_socket_disable_auto_ack(sk);
		if (nl_connect(sk, NETLINK_RDMA) < 0)
			return -EOPNOTSUPP;
		return 0;
	}
};

struct DumpState {
	SysfsDevList *out;
	bool oom = false;
};

int on_device(nl_msg *msg, void *arg)
{
	auto *st = static_cast<DumpState *>(arg);
	SysfsDevPtr dev = new_sysfs_dev();
	if (!dev) {
		st->oom = true;
		return NL_STOP;
	}
	if (!parse_nldev_device(nlmsg_hdr(msg), dev.get())) {
		log(LOG_WARN, "libibverbs: skipping a malformed RDMA_NLDEV_CMD_GET entry\n");
		return NL_OK;
	}
	try {
		st->out->push_back(std::move(dev));
	} catch (...) {
		st->oom = true;
		return NL_STOP;
	}
	return NL_OK;
}

struct ReplyState {
	verbs_sysfs_dev *dev;
	bool *flag;
	bool ok = false;
};

int on_chardev(nl_msg *msg, void *arg)
{
	auto *st = static_cast<ReplyState *>(arg);
	st->ok = parse_nldev_chardev(nlmsg_hdr(msg), st->dev);
	return NL_OK;
}

int on_sys(nl_msg *msg, void *arg)
{
	auto *st = static_cast<ReplyState *>(arg);
	st->ok = parse_nldev_sys(nlmsg_hdr(msg), st->flag);
	return NL_OK;
}

// One request/answer exchange on `sock`; 0 or a negative errno.
int request(NlSocket &sock, int cmd, uint32_t dev_index, bool with_index, nl_recvmsg_msg_cb_t cb,
	    void *arg)
{
	nl_msg *msg = nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd), 0);
	if (!msg)
		return -ENOMEM;
	int rc = 0;
	if (with_index &&
	    (nla_put_u32(msg, RDMA_NLDEV_ATTR_DEV_INDEX, dev_index) < 0 ||
	     nla_put_string(msg, RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs") < 0))
		rc = -ENOMEM;
	if (!rc && nl_socket_modify_cb(sock.sk, NL_CB_VALID, NL_CB_CUSTOM, cb, arg) < 0)
		rc = -ENOMEM;
	if (!rc && nl_send_auto(sock.sk, msg) < 0)
		rc = -EIO;
	nlmsg_free(msg);
	if (!rc && nl_recvmsgs_default(sock.sk) < 0)
		rc = -EIO;
	return rc;
}

// Per-process cache of the sysfs scan, keyed by uverbs name.
struct SysfsCacheEntry {
	ino_t ino;
	timespec ctime;
	verbs_sysfs_dev dev;
};
std::mutex g_sysfs_cache_lock;
std::unordered_map<std::string, SysfsCacheEntry> g_sysfs_cache;

// Reads one class/infiniband_verbs/<name> entry: ibdev, dev, abi_version
// (opened relative to the class directory: no per-entry directory fd), then
// <ibdev_path>/node_type.
bool read_uverbs_entry(int class_fd, const char *name, const std::string &sysfs_root,
		       const struct stat &st, verbs_sysfs_dev *dev)
{
	char buf[256];
	char rel[128];
	unsigned maj = 0, min = 0;
	char extra;
	auto attr = [&](const char *a) {
		snprintf(rel, sizeof(rel), "%s/%s", name, a);
		return read_attr_at(class_fd, rel, buf, sizeof(buf));
	};
	if (strlen(name) > 64)
		return false;
	if (attr("ibdev") <= 0) {
		log(LOG_WARN, "libibverbs: %s/class/infiniband_verbs/%s: no readable ibdev, skipped\n",
		    sysfs_root.c_str(), name);
		return false;
	}
	if (!copy_name(dev->ibdev_name, buf)) {
		log(LOG_WARN, "libibverbs: %s: malformed ibdev '%s', skipped\n", name, buf);
		return false;
	}
	if (attr("dev") <= 0 || sscanf(buf, "%u:%u%c", &maj, &min, &extra) != 2) {
		log(LOG_WARN, "libibverbs: %s: missing or malformed dev attribute, skipped\n", name);
		return false;
	}
	if (!copy_name(dev->sysfs_name, name) ||
	    !set_path(dev->ibdev_path, sizeof(dev->ibdev_path), sysfs_root, "/class/infiniband/",
		      dev->ibdev_name)) {
		log(LOG_WARN, "libibverbs: %s: name or path too long, skipped\n", name);
		return false;
	}
	dev->sysfs_cdev = makedev(maj, min);
	unsigned long v = 0;
	if (attr("abi_version") > 0 && leading_uint(buf, &v))
		dev->abi_ver = static_cast<uint32_t>(v);
	else
		log(LOG_INFO, "libibverbs: %s: no abi_version attribute\n", name);
	dev->time_created = st.st_ctim;
	unsigned long type = 0;
	std::string path = std::string(dev->ibdev_path) + "/node_type";
	if (read_attr_at(AT_FDCWD, path.c_str(), buf, sizeof(buf)) > 0 && leading_uint(buf, &type))
		dev->node_type = static_cast<ibv_node_type>(decode_node_type(type));
	else
		dev->node_type = IBV_NODE_UNKNOWN;
	return true;
}

} // namespace

SysfsDevPtr new_sysfs_dev() noexcept
{
	auto *p = static_cast<verbs_sysfs_dev *>(calloc(1, sizeof(verbs_sysfs_dev)));
	if (p) {
		p->ibdev_idx = -1;
		p->node_type = IBV_NODE_UNKNOWN;
	}
	return SysfsDevPtr(p);
}

int decode_node_type(unsigned long t)
{
	// rdma_node_type 1..7 map one to one onto IBV_NODE_CA..IBV_NODE_UNSPECIFIED.
	if (t >= IBV_NODE_CA && t <= IBV_NODE_UNSPECIFIED)
		return static_cast<int>(t);
	return IBV_NODE_UNKNOWN;
}

bool parse_nldev_device(const nlmsghdr *hdr, verbs_sysfs_dev *dev)
{
	nlattr *tb[RDMA_NLDEV_ATTR_MAX] = {};
	if (!parse_attrs(hdr, tb))
		return false;
	uint64_t idx = 0;
	const char *name = nla_string(tb[RDMA_NLDEV_ATTR_DEV_NAME]);
	if (!nla_uint(tb[RDMA_NLDEV_ATTR_DEV_INDEX], &idx) || idx > INT32_MAX || !name ||
	    !copy_name(dev->ibdev_name, name))
		return false;
	dev->ibdev_idx = static_cast<int>(idx);
	uint64_t v = 0;
	if (nla_uint(tb[RDMA_NLDEV_ATTR_NODE_GUID], &v)) {
		dev->node_guid = v;
		dev->flags |= VSYSFS_READ_NODE_GUID;
	}
	if (nla_uint(tb[RDMA_NLDEV_ATTR_DEV_NODE_TYPE], &v))
		dev->node_type = static_cast<ibv_node_type>(decode_node_type(v));
	if (nla_uint(tb[RDMA_NLDEV_ATTR_PORT_INDEX], &v))
		dev->num_ports = static_cast<uint32_t>(v);
	return true;
}

bool parse_nldev_chardev(const nlmsghdr *hdr, verbs_sysfs_dev *dev)
{
	nlattr *tb[RDMA_NLDEV_ATTR_MAX] = {};
	if (!parse_attrs(hdr, tb))
		return false;
	const char *name = nla_string(tb[RDMA_NLDEV_ATTR_CHARDEV_NAME]);
	uint64_t cdev = 0, abi = 0;
	if (!name || !nla_uint(tb[RDMA_NLDEV_ATTR_CHARDEV], &cdev) ||
	    !nla_uint(tb[RDMA_NLDEV_ATTR_CHARDEV_ABI], &abi) || !copy_name(dev->sysfs_name, name))
		return false;
	dev->sysfs_cdev = static_cast<dev_t>(cdev);
	dev->abi_ver = static_cast<uint32_t>(abi);
	uint64_t id = 0;
	if (nla_uint(tb[RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID], &id))
		dev->driver_id = static_cast<uint32_t>(id);
	return true;
}

bool parse_nldev_sys(const nlmsghdr *hdr, bool *copy_on_fork)
{
	nlattr *tb[RDMA_NLDEV_ATTR_MAX] = {};
	if (!parse_attrs(hdr, tb))
		return false;
	uint64_t v = 0;
	if (!nla_uint(tb[RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK], &v))
		return false;
	*copy_on_fork = v != 0;
	return true;
}

int discover_netlink(SysfsDevList &out)
{
	out.clear();
	NlSocket sock;
	if (int rc = sock.open())
		return rc;
	DumpState st{&out};
	if (nl_socket_modify_cb(sock.sk, NL_CB_VALID, NL_CB_CUSTOM, on_device, &st) < 0)
		return -ENOMEM;
	if (nl_send_simple(sock.sk, RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET), NLM_F_DUMP,
			   nullptr, 0) < 0 ||
	    nl_recvmsgs_default(sock.sk) < 0 || st.oom) {
		out.clear();
		return st.oom ? -ENOMEM : -EIO;
	}
	const std::string &root = settings().sysfs_root;
	SysfsDevList kept;
	kept.reserve(out.size());
	for (auto &dev : out) {
		ReplyState rs{dev.get(), nullptr};
		int rc = request(sock, RDMA_NLDEV_CMD_GET_CHARDEV, static_cast<uint32_t>(dev->ibdev_idx),
				 true, on_chardev, &rs);
		if (rc == -ENOMEM) {
			out.clear();
			return rc;
		}
		if (rc || !rs.ok) {
			// Not a verbs device (no uverbs chardev) or a malformed answer.
			log(LOG_INFO, "libibverbs: %s has no usable uverbs character device, skipped\n",
			    dev->ibdev_name);
			continue;
		}
		if (!set_path(dev->ibdev_path, sizeof(dev->ibdev_path), root, "/class/infiniband/",
			      dev->ibdev_name)) {
			log(LOG_WARN, "libibverbs: %s: sysfs path too long, skipped\n", dev->ibdev_name);
			continue;
		}
		(void)kUverbsAbiNetlink;
		kept.push_back(std::move(dev));
	}
	out = std::move(kept);
	return 0;
}

int discover_sysfs(const std::string &sysfs_root, SysfsDevList &out)
{
	out.clear();
	std::string class_dir = sysfs_root + "/class/infiniband_verbs";
	DIR *dir = opendir(class_dir.c_str());
	if (!dir)
		return errno == ENOMEM ? -ENOMEM : -ENOSYS;
	int class_fd = dirfd(dir);
	std::lock_guard<std::mutex> guard(g_sysfs_cache_lock);
	std::unordered_set<std::string> seen;
	int rc = 0;
	try {
		while (dirent *de = readdir(dir)) {
			if (de->d_name[0] == '.' || de->d_type == DT_REG)
				continue;
			struct stat st;
			if (fstatat(class_fd, de->d_name, &st, 0) || !S_ISDIR(st.st_mode))
				continue;
			std::string name = de->d_name;
			SysfsDevPtr dev = new_sysfs_dev();
			if (!dev) {
				rc = -ENOMEM;
				break;
			}
			auto it = g_sysfs_cache.find(name);
			if (it != g_sysfs_cache.end() && it->second.ino == st.st_ino &&
			    it->second.ctime.tv_sec == st.st_ctim.tv_sec &&
			    it->second.ctime.tv_nsec == st.st_ctim.tv_nsec) {
				*dev = it->second.dev;
			} else {
				if (!read_uverbs_entry(class_fd, de->d_name, sysfs_root, st, dev.get()))
					continue;
				g_sysfs_cache[name] = SysfsCacheEntry{st.st_ino, st.st_ctim, *dev};
			}
			seen.insert(name);
			out.push_back(std::move(dev));
		}
		for (auto it = g_sysfs_cache.begin(); it != g_sysfs_cache.end();)
			it = seen.count(it->first) ? std::next(it) : g_sysfs_cache.erase(it);
	} catch (...) {
		rc = -ENOMEM;
	}
	closedir(dir);
	if (rc)
		out.clear();
	return rc;
}

int read_uverbs_abi(const std::string &sysfs_root, unsigned *abi)
{
	char buf[32];
	unsigned long v = 0;
	std::string path = sysfs_root + "/class/infiniband_verbs/abi_version";
	if (read_attr_at(AT_FDCWD, path.c_str(), buf, sizeof(buf)) <= 0 || !leading_uint(buf, &v))
		return -ENOSYS;
	*abi = static_cast<unsigned>(v);
	return 0;
}

void filter_accessible(const std::string &cdev_dir, SysfsDevList &devs)
{
	bool need = false;
	for (auto &d : devs)
		need |= !(d->flags & VSYSFS_SOFT);
	if (!need)
		return;
	// One directory read instead of one stat() per device.
	std::unordered_set<std::string> present;
	if (DIR *dir = opendir(cdev_dir.c_str())) {
		int dfd = dirfd(dir);
		while (dirent *de = readdir(dir)) {
			if (de->d_type == DT_LNK || de->d_type == DT_UNKNOWN) {
				struct stat st;
				if (fstatat(dfd, de->d_name, &st, 0))
					continue; // dangling link: stat() would fail too
			}
			present.insert(de->d_name);
		}
		closedir(dir);
	}
	SysfsDevList kept;
	kept.reserve(devs.size());
	for (auto &d : devs) {
		if (!(d->flags & VSYSFS_SOFT) && !present.count(d->sysfs_name)) {
			log(LOG_INFO, "libibverbs: %s: %s/%s is not accessible, device hidden\n",
			    d->ibdev_name, cdev_dir.c_str(), d->sysfs_name);
			continue;
		}
		kept.push_back(std::move(d));
	}
	devs = std::move(kept);
}

// One synthesised software device entry (no kernel node, no sysfs).
static SysfsDevPtr soft_entry(const char *name, const std::string &sysfs_root, unsigned flags,
			      uint64_t guid)
{
	SysfsDevPtr dev = new_sysfs_dev();
	if (!dev)
		return dev;
	snprintf(dev->ibdev_name, sizeof(dev->ibdev_name), "%s", name);
	// ibv_device.dev_name (the node's name under /dev/infiniband) is the device's
	// name: no kernel node exists, but clients that look for one (UCX 1.13 stats
	// /dev/infiniband/<dev_name>) find the placeholder openverbs-soft-setup(8)
	// makes. Nothing in the library opens it.
	snprintf(dev->sysfs_name, sizeof(dev->sysfs_name), "%s", dev->ibdev_name);
	set_path(dev->ibdev_path, sizeof(dev->ibdev_path), sysfs_root, "/class/infiniband/",
		 dev->ibdev_name);
	dev->flags = VSYSFS_SOFT | VSYSFS_READ_NODE_GUID | flags;
	dev->driver_id = OPENVERBS_DRIVER_SOFT;
	dev->node_type = IBV_NODE_CA;
	dev->node_guid = guid;
	dev->num_ports = 1;
	dev->abi_ver = 1;
	return dev;
}

void add_soft_devices(unsigned n, const std::string &sysfs_root, SysfsDevList &out)
{
	for (unsigned i = 0; i < n; ++i) {
		char name[32];
		snprintf(name, sizeof(name), OPENVERBS_SOFT_NAME "%u", i);
		// "OV" in the top bytes, then the device number: stable per index.
		SysfsDevPtr dev = soft_entry(name, sysfs_root, 0, (uint64_t{0x4f56} << 48) | i);
		if (!dev)
			return;
		out.push_back(std::move(dev));
	}
}

// The node GUID a RoCE device reports: the EUI-64 of its interface's MAC
// (<sysfs>/class/net/IFNAME/address), or 0 when it cannot be read.
static uint64_t interface_eui64(const std::string &sysfs_root, const std::string &ifname)
{
	char buf[64];
	std::string path = sysfs_root + "/class/net/" + ifname + "/address";
	unsigned m[6];
	if (read_attr_at(AT_FDCWD, path.c_str(), buf, sizeof(buf)) <= 0 ||
	    sscanf(buf, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6)
		return 0;
	uint64_t g = uint64_t(m[0] ^ 2) << 56 | uint64_t(m[1]) << 48 | uint64_t(m[2]) << 40 |
		     uint64_t(0xfffe) << 24 | uint64_t(m[3]) << 16 | uint64_t(m[4]) << 8 | m[5];
	return g;
}

void add_soft_roce_devices(const std::vector<std::string> &ifnames, const std::string &sysfs_root,
			   SysfsDevList &out)
{
	unsigned i = 0;
	for (const auto &ifname : ifnames) {
		char name[32];
		snprintf(name, sizeof(name), OPENVERBS_SOFT_ROCE_NAME "%u", i);
		// The EUI-64 of the interface's MAC, as the provider reports it
		// (rxe does the same); a placeholder when the interface is absent.
		uint64_t guid = interface_eui64(sysfs_root, ifname);
		SysfsDevPtr dev = soft_entry(name, sysfs_root, VSYSFS_SOFT_ROCE,
					     guid ? guid : (uint64_t{0x4f56} << 48) | (uint64_t{1} << 40) | i);
		if (!dev)
			return;
		snprintf(dev->modalias, sizeof(dev->modalias), OPENVERBS_SOFT_ROCE_MODALIAS "%s",
			 ifname.c_str());
		out.push_back(std::move(dev));
		i++;
	}
}

int netlink_copy_on_fork(bool *on)
{
	NlSocket sock;
	if (int rc = sock.open())
		return rc;
	ReplyState rs{nullptr, on};
	if (int rc = request(sock, RDMA_NLDEV_CMD_SYS_GET, 0, false, on_sys, &rs))
		return rc;
	return rs.ok ? 0 : -EOPNOTSUPP;
}

} // namespace ov::core
