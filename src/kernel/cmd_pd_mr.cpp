// Protection domains, memory regions and windows, XRC domains, address
// handles and multicast attachment. Kernel structs: <rdma/ib_user_verbs.h>;
// ioctl methods: UVERBS_OBJECT_PD/MR/MW/XRCD/AH (<rdma/ib_user_ioctl_cmds.h>).
#include "kernel/commands.h"

#include "core/context_private.h"

#include <cerrno>

namespace ov::kernel {

namespace {

// A destroy: the ioctl DESTROY method of `object`, else the write command
// `legacy` carrying only the handle.
template <class Core>
int destroy_object(struct ibv_context *ctx, unsigned int bit, uint16_t object, uint16_t method,
		   uint16_t handle_attr, uint32_t handle, uint32_t legacy, Core core) noexcept
{
	if (!ctx)
		return fail(EINVAL);
	LegacyReq<Core> req = {};
	req.core = core;
	int ret;
	destroy_handle(ctx, bit, object, method, handle_attr, handle, legacy, req, DestroyAnswer{}, &ret);
	return ret;
}

} // namespace

int cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd, void *cmd, size_t cmd_size,
		 struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size) noexcept
{
	if (!context || !pd || !cmd || !resp)
		return fail(EINVAL);
	// The provider's buffer must hold at least the command's head.
	if (cmd_size < kLegacySize<ib_uverbs_alloc_pd>)
		return fail(EINVAL);
	core_of<ib_uverbs_alloc_pd>(cmd)->response = ptr_to_u64(resp);
	int ret = send_write(context, IB_USER_VERBS_CMD_ALLOC_PD, cmd, kLegacySize<ib_uverbs_alloc_pd>, cmd_size,
			     resp, sizeof(*resp), resp_size);
	if (ret)
		return ret;
	pd->handle = resp->pd_handle;
	pd->context = context;
	return 0;
}

int cmd_dealloc_pd(struct ibv_pd *pd) noexcept
{
	if (!pd)
		return fail(EINVAL);
	struct ib_uverbs_dealloc_pd core = {};
	core.pd_handle = pd->handle;
	return destroy_object(pd->context, OV_FALLBACK_BIT(dealloc_pd), UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY,
			      UVERBS_ATTR_DESTROY_PD_HANDLE, pd->handle, IB_USER_VERBS_CMD_DEALLOC_PD, core);
}

int cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va, int access,
	       struct verbs_mr *vmr, void *cmd, size_t cmd_size, struct ib_uverbs_reg_mr_resp *resp,
	       size_t resp_size) noexcept
{
	if (!pd || !vmr || !cmd || !resp)
		return fail(EINVAL);
	// The provider's buffer must hold at least the command's head.
	if (cmd_size < kLegacySize<ib_uverbs_reg_mr>)
		return fail(EINVAL);
	auto *core = core_of<ib_uverbs_reg_mr>(cmd);
	core->response = ptr_to_u64(resp);
	core->start = ptr_to_u64(addr);
	core->length = length;
	core->hca_va = hca_va;
	core->pd_handle = pd->handle;
	core->access_flags = (uint32_t)access;
	int ret = send_write(pd->context, IB_USER_VERBS_CMD_REG_MR, cmd, kLegacySize<ib_uverbs_reg_mr>, cmd_size,
			     resp, sizeof(*resp), resp_size);
	if (ret)
		return ret;
	vmr->ibv_mr.handle = resp->mr_handle;
	vmr->ibv_mr.lkey = resp->lkey;
	vmr->ibv_mr.rkey = resp->rkey;
	vmr->ibv_mr.context = pd->context;
	vmr->mr_type = IBV_MR_TYPE_MR;
	vmr->access = access;
	return 0;
}

int cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags, void *addr, size_t length, uint64_t hca_va,
		 int access, struct ibv_pd *pd, void *cmd, size_t cmd_sz, struct ib_uverbs_rereg_mr_resp *resp,
		 size_t resp_sz) noexcept
{
	if (!vmr || !cmd || !resp || ((flags & IBV_REREG_MR_CHANGE_PD) && !pd))
		return fail(EINVAL);
	// The provider's buffer must hold at least the command's head.
	if (cmd_sz < kLegacySize<ib_uverbs_rereg_mr>)
		return fail(EINVAL);
	auto *core = core_of<ib_uverbs_rereg_mr>(cmd);
	core->response = ptr_to_u64(resp);
	core->mr_handle = vmr->ibv_mr.handle;
	core->flags = flags;
	core->start = ptr_to_u64(addr);
	core->length = length;
	core->hca_va = hca_va;
	core->pd_handle = (flags & IBV_REREG_MR_CHANGE_PD) ? pd->handle : 0;
	core->access_flags = (uint32_t)access;
	int ret = send_write(vmr->ibv_mr.context, IB_USER_VERBS_CMD_REREG_MR, cmd, kLegacySize<ib_uverbs_rereg_mr>,
			     cmd_sz, resp, sizeof(*resp), resp_sz);
	if (ret)
		return ret;
	vmr->ibv_mr.lkey = resp->lkey;
	vmr->ibv_mr.rkey = resp->rkey;
	if (flags & IBV_REREG_MR_CHANGE_PD)
		vmr->ibv_mr.context = pd->context;
	return 0;
}

int cmd_dereg_mr(struct verbs_mr *vmr) noexcept
{
	if (!vmr)
		return fail(EINVAL);
	struct ib_uverbs_dereg_mr core = {};
	core.mr_handle = vmr->ibv_mr.handle;
	return destroy_object(vmr->ibv_mr.context, OV_FALLBACK_BIT(dereg_mr), UVERBS_OBJECT_MR,
			      UVERBS_METHOD_MR_DESTROY, UVERBS_ATTR_DESTROY_MR_HANDLE, vmr->ibv_mr.handle,
			      IB_USER_VERBS_CMD_DEREG_MR, core);
}

int cmd_query_mr(struct ibv_pd *pd, struct verbs_mr *vmr, uint32_t mr_handle) noexcept
{
	if (!pd || !vmr)
		return fail(EINVAL);
	CommandBuffer cmdb(UVERBS_OBJECT_MR, UVERBS_METHOD_QUERY_MR, 5);
	if (!cmdb.ok())
		return fail(ENOMEM);
	uint32_t lkey = 0, rkey = 0;
	uint64_t length = 0, iova = 0;
	cmdb.in_obj(UVERBS_ATTR_QUERY_MR_HANDLE, mr_handle);
	cmdb.out_ptr(UVERBS_ATTR_QUERY_MR_RESP_LKEY, &lkey);
	cmdb.out_ptr(UVERBS_ATTR_QUERY_MR_RESP_RKEY, &rkey);
	cmdb.out_ptr(UVERBS_ATTR_QUERY_MR_RESP_LENGTH, &length);
	cmdb.out_ptr(UVERBS_ATTR_QUERY_MR_RESP_IOVA, &iova);
	int ret = run_ioctl(pd->context, cmdb.get());
	if (ret)
		return ret;
	struct ibv_mr *mr = &vmr->ibv_mr;
	mr->handle = mr_handle;
	mr->lkey = lkey;
	mr->rkey = rkey;
	mr->length = (size_t)length;
	mr->addr = (void *)(uintptr_t)iova;
	mr->context = pd->context;
	mr->pd = pd;
	vmr->mr_type = IBV_MR_TYPE_IMPORTED_MR;
	return 0;
}

int cmd_advise_mr(struct ibv_pd *pd, enum ib_uverbs_advise_mr_advice advice, uint32_t flags,
		  struct ibv_sge *sg_list, uint32_t num_sge) noexcept
{
	if (!pd || (num_sge && !sg_list))
		return fail(EINVAL);
	CommandBuffer cmdb(UVERBS_OBJECT_MR, UVERBS_METHOD_ADVISE_MR, 4);
	if (!cmdb.ok())
		return fail(ENOMEM);
	cmdb.in_obj(UVERBS_ATTR_ADVISE_MR_PD_HANDLE, pd->handle);
	cmdb.const_in(UVERBS_ATTR_ADVISE_MR_ADVICE, (uint64_t)advice);
	cmdb.in_u32(UVERBS_ATTR_ADVISE_MR_FLAGS, flags);
	cmdb.in(UVERBS_ATTR_ADVISE_MR_SGE_LIST, sg_list, (size_t)num_sge * sizeof(*sg_list));
	return run_ioctl(pd->context, cmdb.get());
}

int cmd_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access,
		      struct verbs_mr *vmr, struct ibv_command_buffer *driver) noexcept
{
	if (!pd || !vmr)
		return fail(EINVAL);
	CommandBuffer cmdb(UVERBS_OBJECT_MR, UVERBS_METHOD_REG_DMABUF_MR, 9, driver);
	if (!cmdb.ok())
		return fail(ENOMEM);
	uint32_t lkey = 0, rkey = 0;
	struct ib_uverbs_attr *handle = cmdb.out_obj(UVERBS_ATTR_REG_DMABUF_MR_HANDLE);
	cmdb.out_ptr(UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, &lkey);
	cmdb.out_ptr(UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, &rkey);
	cmdb.in_obj(UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, pd->handle);
	cmdb.in_u64(UVERBS_ATTR_REG_DMABUF_MR_OFFSET, offset);
	cmdb.in_u64(UVERBS_ATTR_REG_DMABUF_MR_LENGTH, length);
	cmdb.in_u64(UVERBS_ATTR_REG_DMABUF_MR_IOVA, iova);
	cmdb.in_u32(UVERBS_ATTR_REG_DMABUF_MR_FD, (uint32_t)fd);
	cmdb.in_u32(UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS, (uint32_t)access);
	int ret = run_ioctl(pd->context, cmdb.get());
	if (ret)
		return ret;
	vmr->ibv_mr.handle = read_obj(handle);
	vmr->ibv_mr.context = pd->context;
	vmr->ibv_mr.lkey = lkey;
	vmr->ibv_mr.rkey = rkey;
	vmr->ibv_mr.pd = pd;
	vmr->ibv_mr.addr = (void *)(uintptr_t)offset;
	vmr->ibv_mr.length = length;
	vmr->mr_type = IBV_MR_TYPE_DMABUF_MR;
	return 0;
}

int cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type, struct ibv_mw *mw, void *cmd, size_t cmd_size,
		 struct ib_uverbs_alloc_mw_resp *resp, size_t resp_size) noexcept
{
	if (!pd || !mw || !cmd || !resp)
		return fail(EINVAL);
	// The provider's buffer must hold at least the command's head.
	if (cmd_size < kLegacySize<ib_uverbs_alloc_mw>)
		return fail(EINVAL);
	auto *core = core_of<ib_uverbs_alloc_mw>(cmd);
	core->response = ptr_to_u64(resp);
	core->pd_handle = pd->handle;
	core->mw_type = (uint8_t)type;
	std::memset(core->reserved, 0, sizeof(core->reserved));
	int ret = send_write(pd->context, IB_USER_VERBS_CMD_ALLOC_MW, cmd, kLegacySize<ib_uverbs_alloc_mw>, cmd_size,
			     resp, sizeof(*resp), resp_size);
	if (ret)
		return ret;
	mw->context = pd->context;
	mw->pd = pd;
	mw->rkey = resp->rkey;
	mw->handle = resp->mw_handle;
	mw->type = type;
	return 0;
}

int cmd_dealloc_mw(struct ibv_mw *mw) noexcept
{
	if (!mw)
		return fail(EINVAL);
	struct ib_uverbs_dealloc_mw core = {};
	core.mw_handle = mw->handle;
	return destroy_object(mw->context, OV_FALLBACK_BIT(dealloc_mw), UVERBS_OBJECT_MW, UVERBS_METHOD_MW_DESTROY,
			      UVERBS_ATTR_DESTROY_MW_HANDLE, mw->handle, IB_USER_VERBS_CMD_DEALLOC_MW, core);
}

int cmd_open_xrcd(struct ibv_context *context, struct verbs_xrcd *xrcd, int vxrcd_size,
		  struct ibv_xrcd_init_attr *attr, void *cmd, size_t cmd_size,
		  struct ib_uverbs_open_xrcd_resp *resp, size_t resp_size) noexcept
{
	if (!context || !xrcd || !attr || !cmd || !resp)
		return fail(EINVAL);
	// The provider's buffer must hold at least the command's head.
	if (cmd_size < kLegacySize<ib_uverbs_open_xrcd>)
		return fail(EINVAL);
	if (attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED)
		return fail(EOPNOTSUPP);
	if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) || !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS))
		return fail(EINVAL);
	auto *core = core_of<ib_uverbs_open_xrcd>(cmd);
	core->response = ptr_to_u64(resp);
	core->fd = (uint32_t)attr->fd;
	core->oflags = (uint32_t)attr->oflags;
	int ret = send_write(context, IB_USER_VERBS_CMD_OPEN_XRCD, cmd, kLegacySize<ib_uverbs_open_xrcd>, cmd_size,
			     resp, sizeof(*resp), resp_size);
	if (ret)
		return ret;
	xrcd->xrcd.context = context;
	xrcd->comp_mask = 0;
	// Old providers pass a smaller verbs_xrcd without the handle field.
	if (offsetof(struct verbs_xrcd, handle) < (size_t)vxrcd_size) {
		xrcd->comp_mask = VERBS_XRCD_HANDLE;
		xrcd->handle = resp->xrcd_handle;
	}
	return 0;
}

int cmd_close_xrcd(struct verbs_xrcd *xrcd) noexcept
{
	if (!xrcd)
		return fail(EINVAL);
	struct ib_uverbs_close_xrcd core = {};
	core.xrcd_handle = xrcd->handle;
	return destroy_object(xrcd->xrcd.context, OV_FALLBACK_BIT(close_xrcd), UVERBS_OBJECT_XRCD,
			      UVERBS_METHOD_XRCD_DESTROY, UVERBS_ATTR_DESTROY_XRCD_HANDLE, xrcd->handle,
			      IB_USER_VERBS_CMD_CLOSE_XRCD, core);
}

int cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah, struct ibv_ah_attr *attr,
		  struct ib_uverbs_create_ah_resp *resp, size_t resp_size) noexcept
{
	if (!pd || !ah || !attr || !resp)
		return fail(EINVAL);
	LegacyReq<ib_uverbs_create_ah> req = {};
	struct ib_uverbs_create_ah &c = req.core;
	c.response = ptr_to_u64(resp);
	c.user_handle = ptr_to_u64(ah);
	c.pd_handle = pd->handle;
	c.attr.dlid = attr->dlid;
	c.attr.sl = attr->sl;
	c.attr.src_path_bits = attr->src_path_bits;
	c.attr.static_rate = attr->static_rate;
	c.attr.is_global = attr->is_global;
	c.attr.port_num = attr->port_num;
	c.attr.grh.flow_label = attr->grh.flow_label;
	c.attr.grh.sgid_index = attr->grh.sgid_index;
	c.attr.grh.hop_limit = attr->grh.hop_limit;
	c.attr.grh.traffic_class = attr->grh.traffic_class;
	std::memcpy(c.attr.grh.dgid, attr->grh.dgid.raw, sizeof(c.attr.grh.dgid));
	int ret = send_write(pd->context, IB_USER_VERBS_CMD_CREATE_AH, &req, sizeof(req), sizeof(req), resp,
			     sizeof(*resp), resp_size);
	if (ret)
		return ret;
	ah->handle = resp->ah_handle;
	ah->context = pd->context;
	return 0;
}

int cmd_destroy_ah(struct ibv_ah *ah) noexcept
{
	if (!ah)
		return fail(EINVAL);
	struct ib_uverbs_destroy_ah core = {};
	core.ah_handle = ah->handle;
	return destroy_object(ah->context, OV_FALLBACK_BIT(destroy_ah), UVERBS_OBJECT_AH, UVERBS_METHOD_AH_DESTROY,
			      UVERBS_ATTR_DESTROY_AH_HANDLE, ah->handle, IB_USER_VERBS_CMD_DESTROY_AH, core);
}

namespace {

int mcast(uint32_t command, struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) noexcept
{
	if (!qp || !gid)
		return fail(EINVAL);
	static_assert(sizeof(struct ib_uverbs_attach_mcast) == sizeof(struct ib_uverbs_detach_mcast),
		      "attach and detach share one layout");
	LegacyReq<ib_uverbs_attach_mcast> req = {};
	std::memcpy(req.core.gid, gid->raw, sizeof(req.core.gid));
	req.core.qp_handle = qp->handle;
	req.core.mlid = lid;
	return send_write(qp->context, command, &req, sizeof(req), sizeof(req), nullptr, 0, 0);
}

} // namespace

int cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) noexcept
{
	return mcast(IB_USER_VERBS_CMD_ATTACH_MCAST, qp, gid, lid);
}

int cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) noexcept
{
	return mcast(IB_USER_VERBS_CMD_DETACH_MCAST, qp, gid, lid);
}

} // namespace ov::kernel
