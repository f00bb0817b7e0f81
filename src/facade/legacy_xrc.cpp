// Exported entry points of the legacy OFED XRC API (version node
// OPENVERBS_XRC_1.0). Semantics: include/infiniband/legacy_xrc.h and
// man/ibv_reg_xrc_rcv_qp.3; the logic is in src/core/xrc/.
//
// The definitions match the C declarations of the public header (which has
// no exception specification); each body is an exception firewall instead.
#include "core/xrc/legacy_xrc.h"
#include "facade/export.h"

#include <cerrno>

namespace lx = ov::legacy_xrc;

// int-returning verbs return an errno value and also leave it in errno.
static int ret_errno(int ret)
{
	if (ret)
		errno = ret;
	return ret;
}

OV_EXPORT ibv_xrc_domain *ibv_open_xrc_domain(ibv_context *context, int fd,
					      int oflag)
{
	try {
		return lx::open_domain(context, fd, oflag);
	} catch (...) {
		errno = ENOMEM;
		return nullptr;
	}
}

OV_EXPORT int ibv_close_xrc_domain(ibv_xrc_domain *d)
{
	try {
		return ret_errno(lx::close_domain(d));
	} catch (...) {
		return ret_errno(ENOMEM);
	}
}

OV_EXPORT ibv_srq *ibv_create_xrc_srq(ibv_pd *pd, ibv_xrc_domain *xrc_domain,
				      ibv_cq *xrc_cq,
				      ibv_srq_init_attr *srq_init_attr)
{
	try {
		return lx::create_srq(pd, xrc_domain, xrc_cq, srq_init_attr);
	} catch (...) {
		errno = ENOMEM;
		return nullptr;
	}
}

OV_EXPORT uint32_t ibv_xrc_srq_num(ibv_srq *srq)
{
	uint32_t num = 0;
	if (!srq) {
		errno = EINVAL;
		return 0;
	}
	int ret = ibv_get_srq_num(srq, &num);
	if (ret) {
		errno = ret;
		return 0;
	}
	return num;
}

OV_EXPORT int ibv_create_xrc_rcv_qp(ibv_xrc_rcv_qp_init_attr *init_attr,
				    uint32_t *xrc_rcv_qpn)
{
	try {
		return ret_errno(lx::create_rcv_qp(init_attr, xrc_rcv_qpn));
	} catch (...) {
		return ret_errno(ENOMEM);
	}
}

OV_EXPORT int ibv_modify_xrc_rcv_qp(ibv_xrc_domain *xrc_domain,
				    uint32_t xrc_qp_num, ibv_qp_attr *attr,
				    int attr_mask)
{
	try {
		return ret_errno(lx::modify_rcv_qp(xrc_domain, xrc_qp_num, attr, attr_mask));
	} catch (...) {
		return ret_errno(ENOMEM);
	}
}

OV_EXPORT int ibv_query_xrc_rcv_qp(ibv_xrc_domain *xrc_domain,
				   uint32_t xrc_qp_num, ibv_qp_attr *attr,
				   int attr_mask,
				   ibv_xrc_rcv_qp_init_attr *init_attr)
{
	try {
		return ret_errno(lx::query_rcv_qp(xrc_domain, xrc_qp_num, attr,
						  attr_mask, init_attr));
	} catch (...) {
		return ret_errno(ENOMEM);
	}
}

OV_EXPORT int ibv_reg_xrc_rcv_qp(ibv_xrc_domain *xrc_domain,
				 uint32_t xrc_qp_num)
{
	try {
		return ret_errno(lx::reg_rcv_qp(xrc_domain, xrc_qp_num));
	} catch (...) {
		return ret_errno(ENOMEM);
	}
}

OV_EXPORT int ibv_unreg_xrc_rcv_qp(ibv_xrc_domain *xrc_domain,
				   uint32_t xrc_qp_num)
{
	try {
		return ret_errno(lx::unreg_rcv_qp(xrc_domain, xrc_qp_num));
	} catch (...) {
		return ret_errno(ENOMEM);
	}
}
