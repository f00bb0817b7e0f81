// EX_CREATE_FLOW: an ibv_flow_attr and its ibv_flow_spec_* list translated
// into ib_uverbs_create_flow + ib_uverbs_flow_spec_* records
// (<rdma/ib_user_verbs.h>), followed by the provider's driver data.
#include "kernel/commands.h"

#include <cerrno>
#include <cstdlib>

namespace ov::kernel {

namespace {

// Room for any one kernel spec.
union KernSpec {
	struct ib_uverbs_flow_spec_hdr hdr;
	struct ib_uverbs_flow_spec_eth eth;
	struct ib_uverbs_flow_spec_ipv4 ipv4;
	struct ib_uverbs_flow_spec_ipv6 ipv6;
	struct ib_uverbs_flow_spec_tcp_udp tcp_udp;
	struct ib_uverbs_flow_spec_tunnel tunnel;
	struct ib_uverbs_flow_spec_esp esp;
	struct ib_uverbs_flow_spec_gre gre;
	struct ib_uverbs_flow_spec_mpls mpls;
	struct ib_uverbs_flow_spec_action_tag tag;
	struct ib_uverbs_flow_spec_action_drop drop;
	struct ib_uverbs_flow_spec_action_handle handle;
	struct ib_uverbs_flow_spec_action_count count;
};

constexpr uint32_t kInner = IBV_FLOW_SPEC_INNER;
constexpr size_t kIbHdr = 8; // type (enum) + size, padded: the ibv_flow_spec header

bool all_zero(const unsigned char *p, size_t n) noexcept
{
	for (size_t i = 0; i < n; ++i)
		if (p[i])
			return false;
	return true;
}

// A spec whose user filter may be longer or shorter than the kernel's: the
// user's val and mask are each (size - header) / 2 bytes, at least
// `min_len`; bytes the kernel does not know must be zero in the mask.
template <class Kern>
int copy_variable(const struct ibv_flow_spec *ib, const void *ib_val, Kern *k, size_t min_len) noexcept
{
	size_t ib_len = (ib->hdr.size - kIbHdr) / 2;
	if (ib_len < min_len)
		return EINVAL;
	const auto *val = static_cast<const unsigned char *>(ib_val);
	const unsigned char *mask = val + ib_len;
	if (ib_len > min_len && !all_zero(mask + min_len, ib_len - min_len))
		return EOPNOTSUPP;
	size_t n = ib_len < sizeof(k->val) ? ib_len : sizeof(k->val);
	n = n < min_len ? n : min_len;
	std::memcpy(&k->val, val, n);
	std::memcpy(&k->mask, mask, n);
	k->size = sizeof(*k);
	return 0;
}

// Fixed-size filters copied field for field (same layout on both sides).
template <class Kern, class IbSpec> void copy_fixed(const IbSpec &ib, Kern *k) noexcept
{
	static_assert(sizeof(ib.val) <= sizeof(k->val), "user filter fits the kernel's");
	std::memcpy(&k->val, &ib.val, sizeof(ib.val));
	std::memcpy(&k->mask, &ib.mask, sizeof(ib.mask));
	k->size = sizeof(*k);
}

// `raw` is the user's spec, which may sit at any 4-byte boundary after the
// ibv_flow_attr: its fixed part is read through an aligned copy, variable
// filters byte-wise from `raw`.
int to_kern_spec(const unsigned char *raw, size_t size, KernSpec *k) noexcept
{
	struct ibv_flow_spec copy;
	std::memset(&copy, 0, sizeof(copy));
	std::memcpy(&copy, raw, size < sizeof(copy) ? size : sizeof(copy));
	const struct ibv_flow_spec *ib = &copy;
	auto val_of = [raw](const void *field_in_copy, const struct ibv_flow_spec *base) {
		return raw + (static_cast<const unsigned char *>(field_in_copy) -
			      reinterpret_cast<const unsigned char *>(base));
	};
	uint32_t type = ib->hdr.type;
	k->hdr.type = type;
	k->hdr.reserved = 0;

	switch (type & ~kInner) {
	case IBV_FLOW_SPEC_ETH:
		copy_fixed(ib->eth, &k->eth);
		return 0;
	case IBV_FLOW_SPEC_IPV4:
	{
		// The original IPv4 spec carries only the addresses: header, then
		// an 8-byte value and an 8-byte mask (the kernel sizes the filter
		// from hdr.size).
		auto *raw = reinterpret_cast<unsigned char *>(k);
		std::memcpy(raw + sizeof(k->hdr), &ib->ipv4.val, sizeof(ib->ipv4.val));
		std::memcpy(raw + sizeof(k->hdr) + sizeof(ib->ipv4.val), &ib->ipv4.mask, sizeof(ib->ipv4.mask));
		k->hdr.size = sizeof(k->hdr) + 2 * sizeof(ib->ipv4.val);
		return 0;
	}
	case IBV_FLOW_SPEC_IPV4_EXT:
		// Sent as an IPv4 spec with the full filter.
		k->hdr.type = IBV_FLOW_SPEC_IPV4 | (type & kInner);
		return copy_variable(ib, val_of(&ib->ipv4_ext.val, ib), &k->ipv4,
				     offsetof(struct ib_uverbs_flow_ipv4_filter, flags) +
					     sizeof(k->ipv4.val.flags));
	case IBV_FLOW_SPEC_IPV6:
		return copy_variable(ib, val_of(&ib->ipv6.val, ib), &k->ipv6,
				     offsetof(struct ib_uverbs_flow_ipv6_filter, hop_limit) +
					     sizeof(k->ipv6.val.hop_limit));
	case IBV_FLOW_SPEC_TCP:
	case IBV_FLOW_SPEC_UDP:
		copy_fixed(ib->tcp_udp, &k->tcp_udp);
		return 0;
	case IBV_FLOW_SPEC_VXLAN_TUNNEL:
		return copy_variable(ib, val_of(&ib->tunnel.val, ib), &k->tunnel,
				     offsetof(struct ib_uverbs_flow_tunnel_filter, tunnel_id) +
					     sizeof(k->tunnel.val.tunnel_id));
	case IBV_FLOW_SPEC_ESP:
		return copy_variable(ib, val_of(&ib->esp.val, ib), &k->esp,
				     offsetof(struct ib_uverbs_flow_spec_esp_filter, seq) +
					     sizeof(k->esp.val.seq));
	case IBV_FLOW_SPEC_GRE:
		return copy_variable(ib, val_of(&ib->gre.val, ib), &k->gre,
				     offsetof(struct ib_uverbs_flow_gre_filter, key) + sizeof(k->gre.val.key));
	case IBV_FLOW_SPEC_MPLS:
		return copy_variable(ib, val_of(&ib->mpls.val, ib), &k->mpls,
				     offsetof(struct ib_uverbs_flow_mpls_filter, label) +
					     sizeof(k->mpls.val.label));
	case IBV_FLOW_SPEC_ACTION_TAG:
		if (type & kInner)
			return EINVAL;
		k->tag.size = sizeof(k->tag);
		k->tag.tag_id = ib->flow_tag.tag_id;
		return 0;
	case IBV_FLOW_SPEC_ACTION_DROP:
		if (type & kInner)
			return EINVAL;
		k->drop.size = sizeof(k->drop);
		return 0;
	case IBV_FLOW_SPEC_ACTION_HANDLE: {
		if ((type & kInner) || !ib->handle.action)
			return EINVAL;
		static_assert(offsetof(struct verbs_flow_action, action) == 0, "action leads verbs_flow_action");
		const auto *va = reinterpret_cast<const struct verbs_flow_action *>(ib->handle.action);
		k->handle.size = sizeof(k->handle);
		k->handle.handle = va->handle;
		return 0;
	}
	case IBV_FLOW_SPEC_ACTION_COUNT: {
		if ((type & kInner) || !ib->flow_count.counters)
			return EINVAL;
		static_assert(offsetof(struct verbs_counters, counters) == 0, "counters lead verbs_counters");
		const auto *vc = reinterpret_cast<const struct verbs_counters *>(ib->flow_count.counters);
		k->count.size = sizeof(k->count);
		k->count.handle = vc->handle;
		return 0;
	}
	default:
		return EINVAL;
	}
}

} // namespace

int cmd_create_flow(struct ibv_qp *qp, struct ibv_flow *flow_id, struct ibv_flow_attr *flow_attr, void *ucmd,
		    size_t ucmd_size) noexcept
{
	if (!qp || !flow_id || !flow_attr || (ucmd_size && !ucmd))
		return fail(EINVAL);
	if (!ucmd)
		ucmd_size = 0;

	using Req = LegacyReqEx<ib_uverbs_create_flow>;
	size_t max = sizeof(Req) + (size_t)flow_attr->num_of_specs * sizeof(KernSpec) + ucmd_size;
	auto *req = static_cast<Req *>(std::calloc(1, max));
	if (!req)
		return fail(ENOMEM);

	req->core.qp_handle = qp->handle;
	req->core.flow_attr.type = flow_attr->type;
	req->core.flow_attr.priority = flow_attr->priority;
	req->core.flow_attr.num_of_specs = flow_attr->num_of_specs;
	req->core.flow_attr.port = flow_attr->port;
	req->core.flow_attr.flags = flow_attr->flags;

	auto *kern = reinterpret_cast<unsigned char *>(req + 1);
	const auto *ib = reinterpret_cast<const unsigned char *>(flow_attr + 1);
	size_t specs_size = 0;
	for (unsigned i = 0; i < flow_attr->num_of_specs; ++i) {
		uint16_t spec_size;
		std::memcpy(&spec_size, ib + offsetof(struct ibv_flow_spec, hdr.size), sizeof(spec_size));
		if (spec_size < kIbHdr) {
			std::free(req);
			return fail(EINVAL);
		}
		KernSpec k = {};
		int err = to_kern_spec(ib, spec_size, &k);
		if (err) {
			std::free(req);
			return fail(err);
		}
		std::memcpy(kern, &k, k.hdr.size);
		kern += k.hdr.size;
		specs_size += k.hdr.size;
		ib += spec_size;
	}
	req->core.flow_attr.size = (uint16_t)specs_size;

	size_t core_size = sizeof(Req) + specs_size;
	if (ucmd_size)
		std::memcpy(reinterpret_cast<char *>(req) + core_size, ucmd, ucmd_size);

	struct ib_uverbs_create_flow_resp resp = {};
	int ret = send_write_ex(qp->context, IB_USER_VERBS_EX_CMD_CREATE_FLOW, req, core_size, core_size + ucmd_size,
				&resp, sizeof(resp), sizeof(resp));
	std::free(req);
	if (ret)
		return ret;
	flow_id->context = qp->context;
	flow_id->handle = resp.flow_handle;
	return 0;
}

} // namespace ov::kernel
