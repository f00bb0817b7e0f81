// Device, port, GID and P_Key queries (ibv_query_device(3), ibv_query_port(3),
// ibv_query_gid(3), ibv_query_gid_ex(3), ibv_query_gid_table(3),
// ibv_query_pkey(3), ibv_get_pkey_index(3)).
//
// GIDs are read with the kernel's UVERBS_METHOD_QUERY_GID_ENTRY/_TABLE ioctls;
// when the kernel has no such method (no ioctl framework, or the method is
// unknown) they are read from sysfs under the device's ibdev_path:
// ports/N/gids/I, ports/N/gid_attrs/types/I and ports/N/gid_attrs/ndevs/I.
#include "core/verbs/verbs.h"
#include "core/verbs/lib_ops.h"
#include "core/context_private.h"
#include <infiniband/openverbs.h>

#include <infiniband/openverbs.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <unistd.h>

// execute_ioctl() belongs to the kernel transport (src/kernel). It is bound
// weakly so that the verbs layer links on its own (unit tests, partial
// builds); without it every GID query takes the sysfs path.
#pragma weak execute_ioctl

namespace ov::verbs {

namespace {
int run_ioctl(struct ibv_context *ctx, struct ibv_command_buffer *cmdb)
{
	// No transport linked, or no kernel behind the context (software
	// devices): answer like a kernel without ioctl support.
	if (!&execute_ioctl || !kernel_cmd_fd(ctx))
		return ENOTTY;
	return execute_ioctl(ctx, cmdb);
}
// The soft provider's hook table when ctx is a software device that
// publishes one (version 1 or later), else nullptr.
const struct openverbs_soft_hooks *soft_hooks(struct ibv_context *ctx)
{
	struct verbs_device *vdev = verbs_get_device(ctx->device);
	if (!vdev || !vdev->sysfs || !(vdev->sysfs->flags & VSYSFS_SOFT) || !vdev->sysfs->match)
		return nullptr;
	auto *hooks = static_cast<const struct openverbs_soft_hooks *>(vdev->sysfs->match->driver_data);
	if (!hooks || hooks->version < 1)
		return nullptr;
	return hooks;
}
} // namespace

int read_ibdev_file(struct ibv_device *dev, char *buf, size_t size, const char *fmt, ...) noexcept
{
	char rel[256];
	char path[sizeof(dev->ibdev_path) + sizeof(rel) + 2];
	va_list ap;

	if (!size) {
		errno = EINVAL;
		return -1;
	}
	va_start(ap, fmt);
	int n = vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	if (n < 0 || static_cast<size_t>(n) >= sizeof(rel)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (snprintf(path, sizeof(path), "%s/%s", dev->ibdev_path, rel) >= static_cast<int>(sizeof(path))) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t len = read(fd, buf, size - 1);
	int saved = errno;
	close(fd);
	if (len < 0) {
		errno = saved;
		return -1;
	}
	buf[len] = '\0';
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	return static_cast<int>(len);
}

int query_device(struct ibv_context *ctx, struct ibv_device_attr *attr) noexcept
{
	// The basic attributes are the head of struct ibv_device_attr_ex: the
	// provider fills only as many bytes as we say we have.
	return get_ops(ctx)->query_device_ex(ctx, nullptr,
					     reinterpret_cast<struct ibv_device_attr_ex *>(attr),
					     sizeof(*attr));
}

int query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr,
	       size_t attr_len) noexcept
{
	if (attr_len < sizeof(struct ibv_port_attr)) {
		// An older, shorter struct: let the provider fill a full one.
		struct ibv_port_attr full;
		memset(&full, 0, sizeof(full));
		int ret = get_ops(ctx)->query_port(ctx, port, &full);
		if (ret)
			return ret;
		memcpy(attr, &full, attr_len);
		return 0;
	}
	memset(attr, 0, attr_len);
	return get_ops(ctx)->query_port(ctx, port, attr);
}

// ---- sysfs fallback for GIDs --------------------------------------------

static int sysfs_gid(struct ibv_context *ctx, uint32_t port, uint32_t index, union ibv_gid *gid)
{
	char text[48];

	if (read_ibdev_file(ctx->device, text, sizeof(text), "ports/%u/gids/%u", port, index) < 0)
		return -1;
	// Eight groups of four hex digits separated by ':'.
	for (int i = 0; i < 8; i++) {
		unsigned int group;
		if (sscanf(text + i * 5, "%4x", &group) != 1)
			return -1;
		gid->raw[2 * i] = static_cast<uint8_t>(group >> 8);
		gid->raw[2 * i + 1] = static_cast<uint8_t>(group);
	}
	return 0;
}

// The type strings the kernel writes into gid_attrs/types/I.
static constexpr const char kTypeV1[] = "IB/RoCE v1";
static constexpr const char kTypeV2[] = "RoCE v2";

static int sysfs_gid_type(struct ibv_context *ctx, uint32_t port, uint32_t index,
			  enum ibv_gid_type_sysfs *type)
{
	char text[16];
	// errno is cleared to tell an empty read from a failed one; a caller
	// that succeeds gets its own errno back (no call sets errno to 0).
	const int saved = errno;
	auto found = [&](enum ibv_gid_type_sysfs t) {
		*type = t;
		errno = saved;
		return 0;
	};

	errno = 0;
	if (read_ibdev_file(ctx->device, text, sizeof(text), "ports/%u/gid_attrs/types/%u", port,
			    index) <= 0) {
		// IB ports answer EINVAL: their GIDs carry no RoCE type.
		if (errno == EINVAL)
			return found(IBV_GID_TYPE_SYSFS_IB_ROCE_V1);
		char dir[sizeof(ctx->device->ibdev_path) + 64];
		snprintf(dir, sizeof(dir), "%s/ports/%u/gid_attrs", ctx->device->ibdev_path, port);
		DIR *d = opendir(dir);
		if (!d) {
			// Kernels without gid_attrs only know IB/RoCE v1.
			if (errno == ENOENT)
				return found(IBV_GID_TYPE_SYSFS_IB_ROCE_V1);
			return -1;
		}
		closedir(d);
		errno = EFAULT;
		return -1;
	}
	if (!strcmp(text, kTypeV1))
		return found(IBV_GID_TYPE_SYSFS_IB_ROCE_V1);
	if (!strcmp(text, kTypeV2))
		return found(IBV_GID_TYPE_SYSFS_ROCE_V2);
	errno = ENOTSUP;
	return -1;
}

static int sysfs_gid_ifindex(struct ibv_context *ctx, uint32_t port, uint32_t index,
			     uint32_t *ifindex)
{
	char name[IF_NAMESIZE + 2];

	if (read_ibdev_file(ctx->device, name, sizeof(name), "ports/%u/gid_attrs/ndevs/%u", port,
			    index) <= 0) {
		*ifindex = 0; // no net device behind this GID
		return 0;
	}
	*ifindex = if_nametoindex(name);
	return *ifindex ? 0 : errno;
}

static bool gid_is_zero(const union ibv_gid *gid)
{
	static const union ibv_gid zero = {};
	return memcmp(gid, &zero, sizeof(zero)) == 0;
}

// One GID entry from sysfs; link_layer < 0 means "ask the port when needed".
// 0, ENODATA for an empty slot, or an errno value.
static int sysfs_gid_entry(struct ibv_context *ctx, uint32_t port, uint32_t index,
			   struct ibv_gid_entry *entry, uint32_t mask, int link_layer)
{
	entry->gid_index = index;
	entry->port_num = port;

	// The GID is always read: an all-zero GID marks an empty slot, which
	// the kernel's GID ioctls report as ENODATA whatever was asked.
	if (sysfs_gid(ctx, port, index, &entry->gid))
		return EINVAL;
	if (gid_is_zero(&entry->gid))
		return ENODATA;
	if (mask & VERBS_QUERY_GID_ATTR_TYPE) {
		enum ibv_gid_type_sysfs type;
		if (sysfs_gid_type(ctx, port, index, &type))
			return EINVAL;
		if (type == IBV_GID_TYPE_SYSFS_ROCE_V2) {
			entry->gid_type = IBV_GID_TYPE_ROCE_V2;
		} else {
			if (link_layer < 0) {
				struct ibv_port_attr pattr;
				int ret = query_port(ctx, static_cast<uint8_t>(port), &pattr,
						     sizeof(pattr));
				if (ret)
					return ret;
				link_layer = pattr.link_layer;
			}
			entry->gid_type = link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_GID_TYPE_ROCE_V1
										: IBV_GID_TYPE_IB;
		}
	}
	if (mask & VERBS_QUERY_GID_ATTR_NDEV_IFINDEX)
		return sysfs_gid_ifindex(ctx, port, index, &entry->ndev_ifindex);
	return 0;
}

// One GID entry of a software device from its provider's hooks: 0,
// ENODATA for an empty slot, or the hook's errno value (EINVAL for a bad
// port or index).
static int soft_gid_entry(struct ibv_context *ctx, const struct openverbs_soft_hooks *hooks,
			  uint32_t port, uint32_t index, struct ibv_gid_entry *entry)
{
	if (hooks->version >= 2 && hooks->size >= sizeof(struct openverbs_soft_hooks) &&
	    hooks->query_gid_entry)
		return hooks->query_gid_entry(ctx, port, index, entry);
	if (!hooks->query_gid)
		return EOPNOTSUPP;
	if (port > UINT8_MAX || index > INT32_MAX)
		return EINVAL;
	entry->gid_index = index;
	entry->port_num = port;
	int ret = hooks->query_gid(ctx, static_cast<uint8_t>(port), static_cast<int>(index),
				   &entry->gid);
	if (ret)
		return ret;
	if (gid_is_zero(&entry->gid))
		return ENODATA;
	entry->gid_type = IBV_GID_TYPE_IB;
	entry->ndev_ifindex = 0;
	return 0;
}

// One entry for the table walk: software devices ask their provider, the
// others read sysfs.
static int table_gid_entry(struct ibv_context *ctx, const struct openverbs_soft_hooks *hooks,
			   uint32_t port, uint32_t index, struct ibv_gid_entry *entry,
			   uint32_t mask, int link_layer)
{
	if (hooks)
		return soft_gid_entry(ctx, hooks, port, index, entry);
	return sysfs_gid_entry(ctx, port, index, entry, mask, link_layer);
}

// The kernel has no GID query method: use sysfs. rdma-core keys this on the
// query_port op's ioctl support bit.
static bool gid_ioctl_unsupported(struct ibv_context *ctx, int ret)
{
	auto *priv = verbs_get_ctx(ctx)->priv;
	const unsigned bit = OV_CMD_BIT(query_port);
	if (ret == ENOTTY) {
		for (auto &word : priv->unsupported_ioctls)
			word = ~uint64_t{0};
		return true;
	}
	if (ret == EPROTONOSUPPORT || ret == EOPNOTSUPP) {
		priv->unsupported_ioctls[bit / 64] |= uint64_t{1} << (bit % 64);
		return true;
	}
	return false;
}

static bool gid_ioctl_known_unsupported(struct ibv_context *ctx)
{
	auto *priv = verbs_get_ctx(ctx)->priv;
	const unsigned bit = OV_CMD_BIT(query_port);
	return priv->unsupported_ioctls[bit / 64] & (uint64_t{1} << (bit % 64));
}

int query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
		 struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size,
		 uint32_t fallback_mask) noexcept
{
	if (!entry || entry_size < sizeof(*entry))
		return EINVAL;
	if (auto *hooks = soft_hooks(ctx)) {
		if (flags)
			return EOPNOTSUPP;
		return soft_gid_entry(ctx, hooks, port, index, entry);
	}

	int ret = 0;
	if (!gid_ioctl_known_unsupported(ctx)) {
		DECLARE_COMMAND_BUFFER(cmdb, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_ENTRY, 4);
		// Port and index are kernel "const" attributes: always 64 bits wide.
		fill_attr_const_in(cmdb, UVERBS_ATTR_QUERY_GID_ENTRY_PORT, port);
		fill_attr_const_in(cmdb, UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, index);
		fill_attr_in_uint32(cmdb, UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, flags);
		fill_attr_out(cmdb, UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, entry,
			      sizeof(struct ib_uverbs_gid_entry));
		ret = run_ioctl(ctx, cmdb);
		if (!gid_ioctl_unsupported(ctx, ret))
			return ret;
	}
	if (flags)
		return EOPNOTSUPP;
	return sysfs_gid_entry(ctx, port, index, entry, fallback_mask, -1);
}

static ssize_t walk_gid_table(struct ibv_context *ctx, const struct openverbs_soft_hooks *hooks,
			      struct ibv_gid_entry *entries, size_t max_entries, size_t entry_size)
{
	struct ibv_device_attr dattr;
	int ret = query_device(ctx, &dattr);
	if (ret)
		return -ret;

	size_t count = 0;
	const uint32_t all = VERBS_QUERY_GID_ATTR_GID | VERBS_QUERY_GID_ATTR_TYPE |
			     VERBS_QUERY_GID_ATTR_NDEV_IFINDEX;
	for (uint32_t port = 1; port <= dattr.phys_port_cnt; port++) {
		struct ibv_port_attr pattr;
		ret = query_port(ctx, static_cast<uint8_t>(port), &pattr, sizeof(pattr));
		if (ret)
			return -ret;
		for (int i = 0; i < pattr.gid_tbl_len; i++) {
			struct ibv_gid_entry scratch;
			// Past max_entries keep reading into scratch: the call only
			// fails if a further non-empty entry exists.
			auto *slot = count < max_entries
					     ? reinterpret_cast<struct ibv_gid_entry *>(
						       reinterpret_cast<char *>(entries) +
						       count * entry_size)
					     : &scratch;
			ret = table_gid_entry(ctx, hooks, port, static_cast<uint32_t>(i), slot,
					      all, pattr.link_layer);
			if (ret == ENODATA)
				continue;
			if (ret)
				return -ret;
			if (count >= max_entries)
				return -EINVAL;
			count++;
		}
	}
	return static_cast<ssize_t>(count);
}

ssize_t query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries,
			size_t max_entries, uint32_t flags, size_t entry_size) noexcept
{
	if (entry_size < sizeof(struct ibv_gid_entry) || (max_entries && !entries))
		return -EINVAL;
	if (max_entries > SIZE_MAX / entry_size)
		return -EINVAL;
	if (auto *hooks = soft_hooks(ctx)) {
		if (flags)
			return -EOPNOTSUPP;
		return walk_gid_table(ctx, hooks, entries, max_entries, entry_size);
	}

	if (!gid_ioctl_known_unsupported(ctx)) {
		uint64_t num = 0;
		DECLARE_COMMAND_BUFFER(cmdb, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_TABLE, 4);
		fill_attr_const_in(cmdb, UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, entry_size);
		fill_attr_in_uint32(cmdb, UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, flags);
		fill_attr_out(cmdb, UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, entries,
			      entry_size * max_entries);
		fill_attr_out_ptr(cmdb, UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, &num);
		int ret = run_ioctl(ctx, cmdb);
		if (!gid_ioctl_unsupported(ctx, ret))
			return ret ? -ret : static_cast<ssize_t>(num);
	}
	if (flags)
		return -EOPNOTSUPP;
	return walk_gid_table(ctx, nullptr, entries, max_entries, entry_size);
}

int query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid) noexcept
{
	struct ibv_gid_entry entry;
	memset(&entry, 0, sizeof(entry));
	int ret = query_gid_ex(ctx, port, static_cast<uint32_t>(index), &entry, 0, sizeof(entry),
			       VERBS_QUERY_GID_ATTR_GID);
	if (ret == ENODATA) {
		// An empty slot reads as the zero GID, as it always has.
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (ret) {
		errno = ret;
		return -1;
	}
	memcpy(gid, &entry.gid, sizeof(*gid));
	return 0;
}

int query_gid_type(struct ibv_context *ctx, uint8_t port, unsigned int index,
		   enum ibv_gid_type_sysfs *type) noexcept
{
	struct ibv_gid_entry entry;
	memset(&entry, 0, sizeof(entry));
	int ret = query_gid_ex(ctx, port, index, &entry, 0, sizeof(entry), VERBS_QUERY_GID_ATTR_TYPE);
	if (ret == ENODATA) {
		*type = IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
		return 0;
	}
	if (ret) {
		errno = ret;
		return -1;
	}
	*type = entry.gid_type == IBV_GID_TYPE_ROCE_V2 ? IBV_GID_TYPE_SYSFS_ROCE_V2
						       : IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

int find_gid_index(struct ibv_context *ctx, uint8_t port, const union ibv_gid *gid,
		   enum ibv_gid_type_sysfs type) noexcept
{
	for (int i = 0;; i++) {
		union ibv_gid cur;
		enum ibv_gid_type_sysfs cur_type = IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
		int ret = query_gid(ctx, port, i, &cur);
		if (!ret)
			ret = query_gid_type(ctx, port, static_cast<unsigned>(i), &cur_type);
		if (ret)
			return ret;
		if (!memcmp(&cur, gid, sizeof(cur)) && cur_type == type)
			return i;
	}
}

int query_pkey(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey) noexcept
{
	char text[16];
	unsigned int value;

	if (auto *hooks = soft_hooks(ctx)) {
		int ret = hooks->query_pkey ? hooks->query_pkey(ctx, port, index, pkey) : EOPNOTSUPP;
		if (ret) {
			errno = ret;
			return -1;
		}
		return 0;
	}
	if (read_ibdev_file(ctx->device, text, sizeof(text), "ports/%u/pkeys/%d", port, index) < 0)
		return -1;
	if (sscanf(text, "%x", &value) != 1 || value > 0xffff) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(static_cast<uint16_t>(value));
	return 0;
}

int get_pkey_index(struct ibv_context *ctx, uint8_t port, __be16 pkey) noexcept
{
	for (int i = 0;; i++) {
		__be16 cur;
		if (query_pkey(ctx, port, i, &cur))
			return -1;
		if (cur == pkey)
			return i;
	}
}

} // namespace ov::verbs

namespace ov {

int lib_query_port(struct ibv_context *context, uint8_t port_num,
		   struct ibv_port_attr *port_attr, size_t port_attr_len) noexcept
{
	if (!context || !port_attr)
		return EINVAL;
	return verbs::query_port(context, port_num, port_attr, port_attr_len);
}

} // namespace ov
