// Exported object verbs: PD, MR, completion channels and CQs, SRQs, QPs, AHs,
// multicast, import/unimport, ECE. Thin: argument checks, then the verbs
// core (src/core/verbs/objects.cpp). Int verbs return an errno value (also
// left in errno); pointer verbs return NULL with errno. NULL objects, or
// objects whose context was not made by this library, give EINVAL.
#include "core/domains/domains.h"
#include "core/verbs/verbs.h"
#include "facade/export.h"
#include "facade/verbs_check.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using ov::facade::ctx_ok;
using ov::facade::fail;
using ov::facade::fail_null;
using ov::facade::obj_ok;

// ---- PD ----------------------------------------------------------------------

OV_EXPORT_V11 struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	if (!ctx_ok(context))
		return fail_null<struct ibv_pd>(EINVAL);
	return ov::verbs::alloc_pd(context);
}

OV_EXPORT_V11 int ibv_dealloc_pd(struct ibv_pd *pd)
{
	// First, without touching *pd: a PD (or parent domain) freed already is
	// EINVAL, one still used by a parent domain EBUSY (domains.h).
	if (int busy_or_stale = ov::domains::check_dealloc_pd(pd))
		return fail(busy_or_stale);
	if (!obj_ok(pd))
		return fail(EINVAL);
	return ov::verbs::dealloc_pd(pd);
}

// ---- MR ----------------------------------------------------------------------

// ibv_reg_mr_iova2 (IBVERBS_1.8): NULL with errno; EINVAL for a NULL PD or a
// NULL address with a non-zero length (other than on-demand paging).
OV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, unsigned int access)
{
	if (!obj_ok(pd))
		return fail_null<struct ibv_mr>(EINVAL);
	return ov::verbs::reg_mr_iova2(pd, addr, length, iova, access);
}

OV_EXPORT_V11 struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
				    int access)
{
	if (!obj_ok(pd))
		return fail_null<struct ibv_mr>(EINVAL);
	return ov::verbs::reg_mr_iova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr),
				       static_cast<unsigned int>(access));
}

OV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					 uint64_t iova, int access)
{
	if (!obj_ok(pd))
		return fail_null<struct ibv_mr>(EINVAL);
	return ov::verbs::reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned int>(access));
}

OV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					   uint64_t iova, int fd, int access)
{
	if (!obj_ok(pd) || fd < 0)
		return fail_null<struct ibv_mr>(EINVAL);
	return ov::verbs::reg_dmabuf_mr(pd, offset, length, iova, fd, access);
}

// ibv_rereg_mr(3): 0 or a negative enum ibv_rereg_mr_err_code.
OV_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
			   size_t length, int access)
{
	if (!obj_ok(mr)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	return ov::verbs::rereg_mr(mr, flags, pd, addr, length, access);
}

OV_EXPORT_V11 int ibv_dereg_mr(struct ibv_mr *mr)
{
	if (!obj_ok(mr))
		return fail(EINVAL);
	return ov::verbs::dereg_mr(mr);
}

// ---- import ------------------------------------------------------------------

OV_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	if (!ctx_ok(context))
		return fail_null<struct ibv_pd>(EINVAL);
	return ov::verbs::import_pd(context, pd_handle);
}

OV_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
	if (obj_ok(pd))
		ov::verbs::unimport_pd(pd);
}

OV_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	if (!obj_ok(pd))
		return fail_null<struct ibv_mr>(EINVAL);
	return ov::verbs::import_mr(pd, mr_handle);
}

OV_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
	if (obj_ok(mr))
		ov::verbs::unimport_mr(mr);
}

OV_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	if (!ctx_ok(context))
		return fail_null<struct ibv_dm>(EINVAL);
	return ov::verbs::import_dm(context, dm_handle);
}

OV_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
	if (obj_ok(dm))
		ov::verbs::unimport_dm(dm);
}

// ---- completion channels and CQs ---------------------------------------

OV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	if (!ctx_ok(context))
		return fail_null<struct ibv_comp_channel>(EINVAL);
	return ov::verbs::create_comp_channel(context);
}

// ibv_destroy_comp_channel(3): EBUSY while CQs still use the channel.
OV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	if (!obj_ok(channel))
		return fail(EINVAL);
	return ov::verbs::destroy_comp_channel(channel);
}

OV_EXPORT void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
			     struct ibv_comp_channel *channel, void *cq_context)
{
	if (!cq || !context)
		return;
	ov::verbs::init_cq(cq, context, channel, cq_context);
}

OV_EXPORT_V11 struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
				       struct ibv_comp_channel *channel, int comp_vector)
{
	if (!ctx_ok(context) || (channel && channel->context != context))
		return fail_null<struct ibv_cq>(EINVAL);
	return ov::verbs::create_cq(context, cqe, cq_context, channel, comp_vector);
}

OV_EXPORT_V11 int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	if (!obj_ok(cq))
		return fail(EINVAL);
	return ov::verbs::resize_cq(cq, cqe);
}

OV_EXPORT_V11 int ibv_destroy_cq(struct ibv_cq *cq)
{
	if (!obj_ok(cq))
		return fail(EINVAL);
	return ov::verbs::destroy_cq(cq);
}

// ibv_get_cq_event(3): 0, or -1 with errno (EINVAL for NULL arguments).
OV_EXPORT_V11 int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
			       void **cq_context)
{
	if (!channel || !cq || !cq_context) {
		errno = EINVAL;
		return -1;
	}
	return ov::verbs::get_cq_event(channel, cq, cq_context);
}

OV_EXPORT_V11 void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	if (cq)
		ov::verbs::ack_cq_events(cq, nevents);
}

// ---- SRQ -----------------------------------------------------------------------

OV_EXPORT_V11 struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
					 struct ibv_srq_init_attr *srq_init_attr)
{
	if (!obj_ok(pd) || !srq_init_attr)
		return fail_null<struct ibv_srq>(EINVAL);
	return ov::verbs::create_srq(pd, srq_init_attr);
}

OV_EXPORT_V11 int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
			     int srq_attr_mask)
{
	if (!obj_ok(srq) || !srq_attr)
		return fail(EINVAL);
	return ov::verbs::modify_srq(srq, srq_attr, srq_attr_mask);
}

OV_EXPORT_V11 int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr)
{
	if (!obj_ok(srq) || !srq_attr)
		return fail(EINVAL);
	return ov::verbs::query_srq(srq, srq_attr);
}

OV_EXPORT_V11 int ibv_destroy_srq(struct ibv_srq *srq)
{
	if (!obj_ok(srq))
		return fail(EINVAL);
	return ov::verbs::destroy_srq(srq);
}

// ---- QP ------------------------------------------------------------------------

OV_EXPORT_V11 struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
				       struct ibv_qp_init_attr *qp_init_attr)
{
	if (!obj_ok(pd) || !qp_init_attr)
		return fail_null<struct ibv_qp>(EINVAL);
	return ov::verbs::create_qp(pd, qp_init_attr);
}

OV_EXPORT_V11 int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
			   struct ibv_qp_init_attr *init_attr)
{
	if (!obj_ok(qp) || !attr || !init_attr)
		return fail(EINVAL);
	return ov::verbs::query_qp(qp, attr, attr_mask, init_attr);
}

OV_EXPORT_V11 int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	if (!obj_ok(qp) || !attr)
		return fail(EINVAL);
	return ov::verbs::modify_qp(qp, attr, attr_mask);
}

OV_EXPORT_V11 int ibv_destroy_qp(struct ibv_qp *qp)
{
	if (!obj_ok(qp))
		return fail(EINVAL);
	return ov::verbs::destroy_qp(qp);
}

// ibv_qp_to_qp_ex (IBVERBS_1.6): the extended QP, or NULL if the QP was not
// created with ibv_create_qp_ex() and send_ops_flags.
OV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	if (!qp)
		return fail_null<struct ibv_qp_ex>(EINVAL);
	return ov::verbs::qp_to_qp_ex(qp);
}

OV_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	if (!obj_ok(qp) || !ece)
		return fail(EINVAL);
	return ov::verbs::query_ece(qp, ece);
}

OV_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	if (!obj_ok(qp) || !ece)
		return fail(EINVAL);
	return ov::verbs::set_ece(qp, ece);
}

OV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
					 uint32_t flags)
{
	if (!obj_ok(qp))
		return 0; // "not in order": the safe answer (the verb has no error value)
	return ov::verbs::query_qp_data_in_order(qp, op, flags);
}

// ---- AH and multicast ------------------------------------------------------

OV_EXPORT_V11 struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	if (!obj_ok(pd) || !attr)
		return fail_null<struct ibv_ah>(EINVAL);
	return ov::verbs::create_ah(pd, attr);
}

OV_EXPORT_V11 int ibv_destroy_ah(struct ibv_ah *ah)
{
	if (!obj_ok(ah))
		return fail(EINVAL);
	return ov::verbs::destroy_ah(ah);
}

// ibv_init_ah_from_wc(3): 0, or -1 with errno.
OV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
				  struct ibv_wc *wc, struct ibv_grh *grh,
				  struct ibv_ah_attr *ah_attr)
{
	if (!ctx_ok(context) || !wc || !ah_attr) {
		errno = EINVAL;
		return -1;
	}
	return ov::verbs::init_ah_from_wc(context, port_num, wc, grh, ah_attr);
}

OV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
					       struct ibv_grh *grh, uint8_t port_num)
{
	if (!obj_ok(pd) || !wc)
		return fail_null<struct ibv_ah>(EINVAL);
	struct ibv_ah_attr attr;
	if (ov::verbs::init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return nullptr;
	return ov::verbs::create_ah(pd, &attr);
}

// 0, or a negative errno value (RoCE providers call it from create_ah).
OV_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
					  uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t *vid)
{
	if (!ctx_ok(context) || !attr || !eth_mac || !vid) {
		errno = EINVAL;
		return -EINVAL;
	}
	return ov::verbs::resolve_eth_l2_from_gid(context, attr, eth_mac, vid);
}

OV_EXPORT_V11 int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	if (!obj_ok(qp) || !gid)
		return fail(EINVAL);
	return ov::verbs::attach_mcast(qp, gid, lid);
}

OV_EXPORT_V11 int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	if (!obj_ok(qp) || !gid)
		return fail(EINVAL);
	return ov::verbs::detach_mcast(qp, gid, lid);
}

// Default versions of the verbs that also have an @IBVERBS_1.0 twin.
OV_DEFAULT_VERSION_1_1(ibv_ack_cq_events);
OV_DEFAULT_VERSION_1_1(ibv_alloc_pd);
OV_DEFAULT_VERSION_1_1(ibv_attach_mcast);
OV_DEFAULT_VERSION_1_1(ibv_create_ah);
OV_DEFAULT_VERSION_1_1(ibv_create_cq);
OV_DEFAULT_VERSION_1_1(ibv_create_qp);
OV_DEFAULT_VERSION_1_1(ibv_create_srq);
OV_DEFAULT_VERSION_1_1(ibv_dealloc_pd);
OV_DEFAULT_VERSION_1_1(ibv_dereg_mr);
OV_DEFAULT_VERSION_1_1(ibv_destroy_ah);
OV_DEFAULT_VERSION_1_1(ibv_destroy_cq);
OV_DEFAULT_VERSION_1_1(ibv_destroy_qp);
OV_DEFAULT_VERSION_1_1(ibv_destroy_srq);
OV_DEFAULT_VERSION_1_1(ibv_detach_mcast);
OV_DEFAULT_VERSION_1_1(ibv_get_cq_event);
OV_DEFAULT_VERSION_1_1(ibv_modify_qp);
OV_DEFAULT_VERSION_1_1(ibv_modify_srq);
OV_DEFAULT_VERSION_1_1(ibv_query_qp);
OV_DEFAULT_VERSION_1_1(ibv_query_srq);
OV_DEFAULT_VERSION_1_1(ibv_reg_mr);
OV_DEFAULT_VERSION_1_1(ibv_resize_cq);
