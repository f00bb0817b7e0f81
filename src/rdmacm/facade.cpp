// The exported rdma_* entry points of librdmacm.so.1 (librdmacm.symbols):
// each checks its arguments, calls the front end (cm.h) and keeps the
// library's convention: int functions return 0, or -1 with errno set;
// pointer functions return NULL with errno set. Where rdma-core 44 would
// dereference a NULL or invalid argument, these answer EINVAL instead.
// Descriptions: the man pages rdma_*(3).
#include "cm.h"

#include <cstring>

#define OV_CM_EXPORT extern "C" __attribute__((visibility("default")))

using namespace ov::cm;

namespace {
// An id that a backend serves (NULL and half-made ids are refused).
inline Id *checked(rdma_cm_id *id) noexcept
{
	if (!id || !priv(id)->be) {
		errno = EINVAL;
		return nullptr;
	}
	return priv(id);
}
} // namespace

OV_CM_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	return create_channel();
}

OV_CM_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (channel)
		destroy_channel(channel);
}

OV_CM_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
				void *context, enum rdma_port_space ps)
{
	if (!id)
		return fail(EINVAL);
	ibv_qp_type qpt = (ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP) ? IBV_QPT_UD : IBV_QPT_RC;
	return create_id(channel, id, context, ps, qpt);
}

OV_CM_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	Id *p = checked(id);
	return p ? destroy_id(*p) : -1;
}

OV_CM_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	Id *p = checked(id);
	if (!p)
		return -1;
	socklen_t len = addrlen(addr);
	if (!len)
		return fail(EINVAL);
	return bind_addr(*p, addr, len);
}

OV_CM_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				   struct sockaddr *dst_addr, int timeout_ms)
{
	Id *p = checked(id);
	if (!p)
		return -1;
	socklen_t dst_len = addrlen(dst_addr);
	if (!dst_len)
		return fail(EINVAL);
	socklen_t src_len = addrlen(src_addr);
	if (src_addr && !src_len)
		return fail(EINVAL);
	return resolve_addr(*p, src_addr, src_len, dst_addr, dst_len, timeout_ms);
}

OV_CM_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	Id *p = checked(id);
	return p ? resolve_route(*p, timeout_ms) : -1;
}

OV_CM_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
				   int *qp_attr_mask)
{
	Id *p = checked(id);
	if (!p)
		return -1;
	if (!qp_attr || !qp_attr_mask)
		return fail(EINVAL);
	return init_qp_attr(*p, *qp_attr, *qp_attr_mask);
}

OV_CM_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	Id *p = checked(id);
	if (!p)
		return -1;
	if (!attr)
		return fail(EINVAL);
	return create_qp_ex(*p, *attr);
}

OV_CM_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
				struct ibv_qp_init_attr *qp_init_attr)
{
	Id *p = checked(id);
	if (!p)
		return -1;
	if (!qp_init_attr)
		return fail(EINVAL);
	return create_qp(*p, pd, *qp_init_attr);
}

OV_CM_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (id)
		destroy_qp(*priv(id));
}

OV_CM_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	Id *p = checked(id);
	if (!p)
		return -1;
	if (!attr)
		return fail(EINVAL);
	return create_srq_ex(*p, *attr);
}

OV_CM_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr)
{
	Id *p = checked(id);
	if (!p)
		return -1;
	if (!attr)
		return fail(EINVAL);
	return create_srq(*p, pd, *attr);
}

OV_CM_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (id)
		destroy_srq(*priv(id));
}

OV_CM_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	Id *p = checked(id);
	return p ? connect(*p, conn_param) : -1;
}

OV_CM_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	Id *p = checked(id);
	return p ? establish(*p) : -1;
}

OV_CM_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	Id *p = checked(id);
	return p ? listen(*p, backlog) : -1;
}

OV_CM_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	Id *p = checked(listen);
	if (!p)
		return -1;
	if (!id)
		return fail(EINVAL);
	return get_request(*p, id);
}

OV_CM_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	Id *p = checked(id);
	return p ? accept(*p, conn_param) : -1;
}

OV_CM_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			     uint8_t private_data_len)
{
	Id *p = checked(id);
	return p ? reject(*p, private_data, private_data_len, 0) : -1;
}

OV_CM_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
				 uint8_t private_data_len)
{
	// IBTA's CM_REJ_VENDOR_OPTION_NOT_SUPPORTED (35), as rdma-core sends.
	Id *p = checked(id);
	return p ? reject(*p, private_data, private_data_len, 35) : -1;
}

OV_CM_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	Id *p = checked(id);
	return p ? notify(*p, event) : -1;
}

OV_CM_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	Id *p = checked(id);
	return p ? disconnect(*p) : -1;
}

OV_CM_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	Id *p = checked(id);
	if (!p)
		return -1;
	socklen_t len = addrlen(addr);
	if (!len)
		return fail(EINVAL);
	return join_multicast(*p, addr, len, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

OV_CM_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id,
					struct rdma_cm_join_mc_attr_ex *mc_join_attr, void *context)
{
	Id *p = checked(id);
	if (!p)
		return -1;
	if (!mc_join_attr)
		return fail(EINVAL);
	if (mc_join_attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return fail(ENOTSUP);
	if (!(mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS))
		return fail(EINVAL);
	if (!(mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    mc_join_attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return fail(EINVAL);
	socklen_t len = addrlen(mc_join_attr->addr);
	if (!len)
		return fail(EINVAL);
	return join_multicast(*p, mc_join_attr->addr, len,
			      static_cast<uint16_t>(mc_join_attr->join_flags), context);
}

OV_CM_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	Id *p = checked(id);
	if (!p)
		return -1;
	socklen_t len = addrlen(addr);
	if (!len)
		return fail(EINVAL);
	return leave_multicast(*p, addr, len);
}

OV_CM_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel,
				   struct rdma_cm_event **event)
{
	if (!channel)
		return fail(EINVAL);
	return get_event(channel, event);
}

OV_CM_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return fail(EINVAL);
	return ack_event(event);
}

namespace {
__be16 port_of(const sockaddr *addr) noexcept
{
	switch (addr->sa_family) {
	case AF_INET:
		return reinterpret_cast<const sockaddr_in *>(addr)->sin_port;
	case AF_INET6:
		return reinterpret_cast<const sockaddr_in6 *>(addr)->sin6_port;
	case 27: { // AF_IB: the port is the low 16 bits of the service ID
		uint64_t sid;
		memcpy(&sid, reinterpret_cast<const uint8_t *>(addr) + 32, sizeof(sid));
		return htobe16(static_cast<uint16_t>(be64toh(sid)));
	}
	default:
		return 0;
	}
}
} // namespace

OV_CM_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id ? port_of(&id->route.addr.src_addr) : 0;
}

OV_CM_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id ? port_of(&id->route.addr.dst_addr) : 0;
}

OV_CM_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	return get_devices(num_devices);
}

OV_CM_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

OV_CM_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
	    "RDMA_CM_EVENT_ADDR_RESOLVED",    "RDMA_CM_EVENT_ADDR_ERROR",
	    "RDMA_CM_EVENT_ROUTE_RESOLVED",   "RDMA_CM_EVENT_ROUTE_ERROR",
	    "RDMA_CM_EVENT_CONNECT_REQUEST",  "RDMA_CM_EVENT_CONNECT_RESPONSE",
	    "RDMA_CM_EVENT_CONNECT_ERROR",    "RDMA_CM_EVENT_UNREACHABLE",
	    "RDMA_CM_EVENT_REJECTED",	      "RDMA_CM_EVENT_ESTABLISHED",
	    "RDMA_CM_EVENT_DISCONNECTED",     "RDMA_CM_EVENT_DEVICE_REMOVAL",
	    "RDMA_CM_EVENT_MULTICAST_JOIN",   "RDMA_CM_EVENT_MULTICAST_ERROR",
	    "RDMA_CM_EVENT_ADDR_CHANGE",      "RDMA_CM_EVENT_TIMEWAIT_EXIT",
#if _OPENVERBS_ABI >= 64
	    // rdma-core 64 names these two; USER and INTERNAL stay unknown.
	    "RDMA_CM_EVENT_ADDRINFO_RESOLVED", "RDMA_CM_EVENT_ADDRINFO_ERROR",
#endif
	};
	unsigned i = static_cast<unsigned>(event);
	return i < sizeof(names) / sizeof(names[0]) ? names[i] : "UNKNOWN EVENT";
}

OV_CM_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
				 size_t optlen)
{
	Id *p = checked(id);
	return p ? set_option(*p, level, optname, optval, optlen) : -1;
}

OV_CM_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	Id *p = checked(id);
	return p ? migrate_id(*p, channel) : -1;
}

OV_CM_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
				  const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	return getaddrinfo(node, service, hints, res);
}

OV_CM_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	freeaddrinfo(res);
}

OV_CM_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
				struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	if (!id || !res)
		return fail(EINVAL);
	return create_ep(id, res, pd, qp_init_attr);
}

OV_CM_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (id && priv(id)->be)
		destroy_ep(*priv(id));
}

OV_CM_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece || ece->comp_mask)
		return fail(EINVAL);
	priv(id)->local_ece.vendor_id = ece->vendor_id;
	priv(id)->local_ece.options = ece->options;
	return 0;
}

OV_CM_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece)
		return fail(EINVAL);
	ece->vendor_id = priv(id)->remote_ece.vendor_id;
	ece->options = priv(id)->remote_ece.options;
	ece->comp_mask = 0;
	return 0;
}

#if _OPENVERBS_ABI >= 64
// RDMACM_1.4 (rdma-core 64): rdma_resolve_addrinfo(3), rdma_query_addrinfo(3),
// rdma_write_cm_event(3).
OV_CM_EXPORT int rdma_resolve_addrinfo(struct rdma_cm_id *id, const char *node,
				       const char *service, const struct rdma_addrinfo *hints)
{
	Id *p = checked(id);
	return p ? resolve_addrinfo(*p, node, service, hints) : -1;
}

OV_CM_EXPORT int rdma_query_addrinfo(struct rdma_cm_id *id, struct rdma_addrinfo **info)
{
	Id *p = checked(id);
	if (!p || !info)
		return fail(EINVAL);
	return query_addrinfo(*p, info);
}

OV_CM_EXPORT int rdma_write_cm_event(struct rdma_cm_id *id, enum rdma_cm_event_type event,
				     int status, uint64_t arg)
{
	Id *p = checked(id);
	if (!p || event != RDMA_CM_EVENT_USER)
		return fail(EINVAL);
	return write_cm_event(*p, event, status, arg);
}
#endif
