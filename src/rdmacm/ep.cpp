// The endpoint helpers (rdma-core 44 cma.c: rdma_create_ep, ucma_passive_ep,
// rdma_destroy_ep, rdma_get_request): synchronous ids that resolve, create
// their QP and wait for their own events.
#include "cm.h"

#include <cstdlib>
#include <cstring>

namespace ov::cm {
namespace {

int passive_ep(Id &id, const rdma_addrinfo &res, ibv_pd *pd, ibv_qp_init_attr *init) noexcept
{
	socklen_t len = af_ib_support() ? res.ai_src_len : addrlen(res.ai_src_addr);
	if (!len || !res.ai_src_addr)
		return fail(EINVAL);
	if (bind_addr(id, res.ai_src_addr, len))
		return -1;
	if (pd)
		id.pub.pd = pd;
	if (init) {
		id.qp_init_attr.reset(new (std::nothrow) ibv_qp_init_attr(*init));
		if (!id.qp_init_attr)
			return fail(ENOMEM);
		id.qp_init_attr->qp_type = static_cast<ibv_qp_type>(res.ai_qp_type);
	}
	return 0;
}

} // namespace

int create_ep(rdma_cm_id **out, const rdma_addrinfo *res, ibv_pd *pd,
	      ibv_qp_init_attr *init) noexcept
{
	rdma_cm_id *pub = nullptr;
	if (create_id(nullptr, &pub, nullptr, static_cast<rdma_port_space>(res->ai_port_space),
		      static_cast<ibv_qp_type>(res->ai_qp_type)))
		return -1;
	Id &id = *priv(pub);
	int ret;
	if (res->ai_flags & RAI_PASSIVE) {
		ret = passive_ep(id, *res, pd, init);
		if (ret)
			goto err;
		*out = pub;
		return 0;
	}
	{
		socklen_t dlen = af_ib_support() ? res->ai_dst_len : addrlen(res->ai_dst_addr);
		socklen_t slen = af_ib_support() ? res->ai_src_len : addrlen(res->ai_src_addr);
		if (!dlen || (res->ai_src_addr && !slen)) {
			ret = fail(EINVAL);
			goto err;
		}
		ret = resolve_addr(id, res->ai_src_addr, slen, res->ai_dst_addr, dlen, 2000);
	}
	if (ret)
		goto err;
	if (res->ai_route_len) {
		ret = set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, res->ai_route,
				 res->ai_route_len);
		if (!ret)
			ret = complete(id);
	} else {
		ret = resolve_route(id, 2000);
	}
	if (ret)
		goto err;
	if (init) {
		init->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
		ret = create_qp(id, pd, *init);
		if (ret)
			goto err;
	}
	if (res->ai_connect_len) {
		if (res->ai_connect_len > kMaxPrivateData) {
			ret = fail(EINVAL);
			goto err;
		}
		try {
			auto *p = static_cast<const uint8_t *>(res->ai_connect);
			id.connect.assign(p, p + res->ai_connect_len);
		} catch (...) {
			ret = fail(ENOMEM);
			goto err;
		}
	}
	*out = pub;
	return 0;
err:
	int err = errno;
	destroy_ep(id);
	return fail(err);
}

void destroy_ep(Id &id) noexcept
{
	if (id.pub.qp)
		destroy_qp(id);
	if (id.pub.srq)
		destroy_srq(id);
	id.qp_init_attr.reset();
	destroy_id(id);
}

int get_request(Id &listen, rdma_cm_id **out) noexcept
{
	if (!listen.sync)
		return fail(EINVAL);
	if (listen.pub.event) {
		ack_event(listen.pub.event);
		listen.pub.event = nullptr;
	}
	rdma_cm_event *ev = nullptr;
	if (get_event(listen.pub.channel, &ev))
		return -1;
	int ret;
	if (ev->event == RDMA_CM_EVENT_REJECTED) {
		ret = fail(ECONNREFUSED);
	} else if (ev->status) {
		ret = fail(-ev->status);
	} else if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		ret = fail(EINVAL);
	} else {
		ret = 0;
		if (listen.qp_init_attr) {
			ibv_qp_init_attr attr = *listen.qp_init_attr;
			ret = create_qp(*priv(ev->id), listen.pub.pd, attr);
		}
		if (!ret) {
			*out = ev->id;
			(*out)->event = ev;
			return 0;
		}
	}
	listen.pub.event = ev;
	return ret;
}

} // namespace ov::cm
