// Exported query verbs: ibv_query_device, ibv_query_port, ibv_query_gid,
// ibv_query_pkey, ibv_get_pkey_index, _ibv_query_gid_ex, _ibv_query_gid_table
// and the private ibv_query_gid_type. Each checks its arguments and calls the
// verbs core (src/core/verbs); the errno contract of each is the man page's.
#include "core/verbs/verbs.h"
#include "facade/export.h"
#include "facade/verbs_check.h"

#include <cerrno>

#undef ibv_query_port

namespace {
// sizeof(struct _compat_ibv_port_attr) of rdma-core 44: the port attributes
// up to `flags`, what binaries calling the exported symbol directly pass.
constexpr size_t kCompatPortAttrSize = 48;
static_assert(offsetof(struct ibv_port_attr, port_cap_flags2) == kCompatPortAttrSize);
} // namespace

using ov::facade::ctx_ok;
static inline int fail_int(int err) noexcept { return ov::facade::fail(err); }

// ibv_query_device(3): 0 or errno value (EINVAL: NULL context or attr).
OV_EXPORT_V11 int ibv_query_device(struct ibv_context *context,
			       struct ibv_device_attr *device_attr)
{
	if (!ctx_ok(context) || !device_attr)
		return fail_int(EINVAL);
	return ov::verbs::query_device(context, device_attr);
}

// ibv_query_port(3), the exported function: fills the 48-byte legacy head of
// struct ibv_port_attr. The ibv_query_port() macro of verbs.h reaches the
// full struct through verbs_context::query_port instead.
OV_EXPORT_V11 int ibv_query_port(struct ibv_context *context, uint8_t port_num,
			     struct _compat_ibv_port_attr *port_attr)
{
	if (!ctx_ok(context) || !port_attr)
		return fail_int(EINVAL);
	return ov::verbs::query_port(context, port_num,
				     reinterpret_cast<struct ibv_port_attr *>(port_attr),
				     kCompatPortAttrSize);
}

// ibv_query_gid(3): 0, or -1 with errno (EINVAL for NULL arguments or a
// negative index). An empty table slot reads as the zero GID.
OV_EXPORT_V11 int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
			    union ibv_gid *gid)
{
	if (!ctx_ok(context) || !gid || index < 0) {
		errno = EINVAL;
		return -1;
	}
	return ov::verbs::query_gid(context, port_num, index, gid);
}

// ibv_query_pkey(3): 0, or -1 with errno. The P_Key is in network order.
OV_EXPORT_V11 int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index,
			     __be16 *pkey)
{
	if (!ctx_ok(context) || !pkey || index < 0) {
		errno = EINVAL;
		return -1;
	}
	return ov::verbs::query_pkey(context, port_num, index, pkey);
}

// ibv_get_pkey_index(3): the index of pkey (network order) or -1 with errno.
OV_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num,
				 __be16 pkey)
{
	if (!ctx_ok(context)) {
		errno = EINVAL;
		return -1;
	}
	return ov::verbs::get_pkey_index(context, port_num, pkey);
}

// Behind the inline ibv_query_gid_ex(3): 0 or errno value; ENODATA for an
// empty slot, EINVAL for NULL or a short entry_size.
OV_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
				uint32_t gid_index, struct ibv_gid_entry *entry, uint32_t flags,
				size_t entry_size)
{
	if (!ctx_ok(context) || !entry || entry_size < sizeof(*entry))
		return fail_int(EINVAL);
	int ret = ov::verbs::query_gid_ex(context, port_num, gid_index, entry, flags, entry_size,
					  VERBS_QUERY_GID_ATTR_GID | VERBS_QUERY_GID_ATTR_TYPE |
						  VERBS_QUERY_GID_ATTR_NDEV_IFINDEX);
	if (ret)
		errno = ret;
	return ret;
}

// Behind the inline ibv_query_gid_table(3): number of entries or -errno.
OV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context,
				       struct ibv_gid_entry *entries, size_t max_entries,
				       uint32_t flags, size_t entry_size)
{
	if (!ctx_ok(context)) {
		errno = EINVAL;
		return -EINVAL;
	}
	ssize_t ret = ov::verbs::query_gid_table(context, entries, max_entries, flags, entry_size);
	if (ret < 0)
		errno = static_cast<int>(-ret);
	return ret;
}

// Private (IBVERBS_PRIVATE_34): RoCE type of a GID as sysfs names it.
// 0, or -1 with errno.
OV_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
				 unsigned int index, enum ibv_gid_type_sysfs *type)
{
	if (!ctx_ok(context) || !type) {
		errno = EINVAL;
		return -1;
	}
	return ov::verbs::query_gid_type(context, port_num, index, type);
}

// Default versions of the verbs that also have an @IBVERBS_1.0 twin.
OV_DEFAULT_VERSION_1_1(ibv_query_device);
OV_DEFAULT_VERSION_1_1(ibv_query_gid);
OV_DEFAULT_VERSION_1_1(ibv_query_pkey);
OV_DEFAULT_VERSION_1_1(ibv_query_port);
