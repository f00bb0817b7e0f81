// The ibv_cmd_* of the private provider ABI (IBVERBS_PRIVATE_34), implemented
// by the kernel transport. src/facade/cmd_exports.cpp exports each under its
// rdma-core name; the prototypes there (driver.h) are the contract.
//
// Conventions (as rdma-core 44): every function returns 0 or a positive errno
// value (errno is set too), except poll_cq (count or -1 with errno). The
// legacy request structs (struct ibv_<cmd> of kern-abi.h: an
// ib_uverbs_cmd_hdr, or hdr + ib_uverbs_ex_cmd_hdr, then the kernel's core
// struct, then the provider's driver data) are taken as `void *cmd` with the
// provider's full `cmd_size`; anything past the core struct is sent as UHW.
#pragma once

#include "kernel/transport.h"

#include <cerrno>

struct verbs_create_cq_prov_attr; // rdma-core 64 (driver.h)

namespace ov::kernel {

// A destroy that exists only as an ioctl method: 0 or the errno value (a
// disassociated device's EIO counts as success when allowed).
int destroy_ioctl_only(struct ibv_context *ctx, uint16_t object, uint16_t method, uint16_t attr,
		       uint32_t handle) noexcept;

// device
// fds/nfds: rdma-core 64's fd array (UVERBS_ATTR_GET_CONTEXT_FD_ARR, ioctl
// only); NULL/0 for none, which is the command of earlier releases.
int cmd_get_context(struct verbs_context *context_ex, void *cmd, size_t cmd_size,
		    struct ib_uverbs_get_context_resp *resp, size_t resp_size, const int *fds = nullptr,
		    uint32_t nfds = 0) noexcept;
int cmd_query_context(struct ibv_context *context, struct ibv_command_buffer *driver) noexcept;
int cmd_query_device_any(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
			 struct ibv_device_attr_ex *attr, size_t attr_size,
			 struct ib_uverbs_ex_query_device_resp *resp, size_t *resp_size) noexcept;
int cmd_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *port_attr,
		   void *cmd, size_t cmd_size) noexcept;

// pd / mr / mw
int cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd, void *cmd, size_t cmd_size,
		 struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size) noexcept;
int cmd_dealloc_pd(struct ibv_pd *pd) noexcept;
int cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va, int access,
	       struct verbs_mr *vmr, void *cmd, size_t cmd_size, struct ib_uverbs_reg_mr_resp *resp,
	       size_t resp_size) noexcept;
int cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags, void *addr, size_t length, uint64_t hca_va,
		 int access, struct ibv_pd *pd, void *cmd, size_t cmd_sz,
		 struct ib_uverbs_rereg_mr_resp *resp, size_t resp_sz) noexcept;
int cmd_dereg_mr(struct verbs_mr *vmr) noexcept;
int cmd_query_mr(struct ibv_pd *pd, struct verbs_mr *vmr, uint32_t mr_handle) noexcept;
int cmd_advise_mr(struct ibv_pd *pd, enum ib_uverbs_advise_mr_advice advice, uint32_t flags,
		  struct ibv_sge *sg_list, uint32_t num_sge) noexcept;
// driver: the provider's own attributes (rdma-core 56's eighth argument),
// linked after ours; NULL for none.
int cmd_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd,
		      int access, struct verbs_mr *vmr, struct ibv_command_buffer *driver) noexcept;
int cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type, struct ibv_mw *mw, void *cmd, size_t cmd_size,
		 struct ib_uverbs_alloc_mw_resp *resp, size_t resp_size) noexcept;
int cmd_dealloc_mw(struct ibv_mw *mw) noexcept;

// xrcd
int cmd_open_xrcd(struct ibv_context *context, struct verbs_xrcd *xrcd, int vxrcd_size,
		  struct ibv_xrcd_init_attr *attr, void *cmd, size_t cmd_size,
		  struct ib_uverbs_open_xrcd_resp *resp, size_t resp_size) noexcept;
int cmd_close_xrcd(struct verbs_xrcd *xrcd) noexcept;

// cq
int cmd_create_cq(struct ibv_context *context, int cqe, struct ibv_comp_channel *channel, int comp_vector,
		  struct ibv_cq *cq, void *cmd, size_t cmd_size, struct ib_uverbs_create_cq_resp *resp,
		  size_t resp_size) noexcept;
// driver: the provider's own attributes (ibv_cmd_create_cq_ex2 of
// rdma-core 56), linked after the legacy request's; NULL for none.
// prov_attr: rdma-core 64's CQ ring allocated by the provider, used when
// cmd_flags has CREATE_CQ_CMD_FLAGS_WITH_MEM_VA/_DMABUF (ioctl only; EINVAL
// when those flags come without it).
int cmd_create_cq_ex(struct ibv_context *context, const struct ibv_cq_init_attr_ex *cq_attr,
		     struct verbs_cq *cq, void *cmd, size_t cmd_size, struct ib_uverbs_ex_create_cq_resp *resp,
		     size_t resp_size, uint32_t cmd_flags, struct ibv_command_buffer *driver,
		     const struct verbs_create_cq_prov_attr *prov_attr = nullptr) noexcept;
int cmd_destroy_cq(struct ibv_cq *cq) noexcept;
int cmd_resize_cq(struct ibv_cq *cq, int cqe, void *cmd, size_t cmd_size, struct ib_uverbs_resize_cq_resp *resp,
		  size_t resp_size) noexcept;
int cmd_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr, void *cmd, size_t cmd_size) noexcept;
int cmd_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc) noexcept;
int cmd_req_notify_cq(struct ibv_cq *ibcq, int solicited_only) noexcept;

// srq
int cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq, struct ibv_srq_init_attr *attr, void *cmd,
		   size_t cmd_size, struct ib_uverbs_create_srq_resp *resp, size_t resp_size) noexcept;
int cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq, struct ibv_srq_init_attr_ex *attr_ex,
		      void *cmd, size_t cmd_size, struct ib_uverbs_create_srq_resp *resp,
		      size_t resp_size) noexcept;
int cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask, void *cmd,
		   size_t cmd_size) noexcept;
int cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, void *cmd, size_t cmd_size) noexcept;
int cmd_destroy_srq(struct ibv_srq *srq) noexcept;
int cmd_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr) noexcept;

// qp
int cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp, struct ibv_qp_init_attr *attr, void *cmd,
		  size_t cmd_size, struct ib_uverbs_create_qp_resp *resp, size_t resp_size) noexcept;
int cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp, struct ibv_qp_init_attr_ex *attr_ex,
		     void *cmd, size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
		     size_t resp_size) noexcept;
// driver: the provider's own attributes (rdma-core 64's last argument),
// linked after the legacy request's; NULL for none.
int cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp, struct ibv_qp_init_attr_ex *attr_ex,
		      void *cmd, size_t cmd_size, struct ib_uverbs_ex_create_qp_resp *resp,
		      size_t resp_size, struct ibv_command_buffer *driver = nullptr) noexcept;
int cmd_open_qp(struct ibv_context *context, struct verbs_qp *qp, int vqp_sz, struct ibv_qp_open_attr *attr,
		void *cmd, size_t cmd_size, struct ib_uverbs_create_qp_resp *resp, size_t resp_size) noexcept;
int cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, struct ibv_qp_init_attr *init_attr,
		 void *cmd, size_t cmd_size) noexcept;
int cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, void *cmd,
		  size_t cmd_size) noexcept;
int cmd_modify_qp_ex(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, void *cmd, size_t cmd_size,
		     struct ib_uverbs_ex_modify_qp_resp *resp, size_t resp_size) noexcept;
int cmd_destroy_qp(struct ibv_qp *qp) noexcept;
int cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr) noexcept;
int cmd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr) noexcept;

// ah / mcast
int cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah, struct ibv_ah_attr *attr,
		  struct ib_uverbs_create_ah_resp *resp, size_t resp_size) noexcept;
int cmd_destroy_ah(struct ibv_ah *ah) noexcept;
int cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) noexcept;
int cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) noexcept;

// flow steering
int cmd_create_flow(struct ibv_qp *qp, struct ibv_flow *flow_id, struct ibv_flow_attr *flow_attr, void *ucmd,
		    size_t ucmd_size) noexcept;
int cmd_destroy_flow(struct ibv_flow *flow_id) noexcept;
int cmd_create_flow_action_esp(struct ibv_context *ctx, struct ibv_flow_action_esp_attr *attr,
			       struct verbs_flow_action *flow_action, struct ibv_command_buffer *driver) noexcept;
int cmd_modify_flow_action_esp(struct verbs_flow_action *flow_action, struct ibv_flow_action_esp_attr *attr,
			       struct ibv_command_buffer *driver) noexcept;
int cmd_destroy_flow_action(struct verbs_flow_action *action) noexcept;

// wq / rwq indirection tables
int cmd_create_wq(struct ibv_context *context, struct ibv_wq_init_attr *wq_init_attr, struct ibv_wq *wq,
		  void *cmd, size_t cmd_size, struct ib_uverbs_ex_create_wq_resp *resp, size_t resp_size) noexcept;
int cmd_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr, void *cmd, size_t cmd_size) noexcept;
int cmd_destroy_wq(struct ibv_wq *wq) noexcept;
int cmd_create_rwq_ind_table(struct ibv_context *context, struct ibv_rwq_ind_table_init_attr *init_attr,
			     struct ibv_rwq_ind_table *rwq_ind_table,
			     struct ib_uverbs_ex_create_rwq_ind_table_resp *resp, size_t resp_size) noexcept;
int cmd_destroy_rwq_ind_table(struct ibv_rwq_ind_table *rwq_ind_table) noexcept;

// counters / device memory (ioctl only)
int cmd_create_counters(struct ibv_context *context, struct ibv_counters_init_attr *init_attr,
			struct verbs_counters *vcounters, struct ibv_command_buffer *link) noexcept;
int cmd_destroy_counters(struct verbs_counters *vcounters) noexcept;
int cmd_read_counters(struct verbs_counters *vcounters, uint64_t *counters_value, uint32_t ncounters,
		      uint32_t flags, struct ibv_command_buffer *link) noexcept;
int cmd_alloc_dm(struct ibv_context *ctx, const struct ibv_alloc_dm_attr *dm_attr, struct verbs_dm *dm,
		 struct ibv_command_buffer *link) noexcept;
int cmd_free_dm(struct verbs_dm *dm) noexcept;
int cmd_reg_dm_mr(struct ibv_pd *pd, struct verbs_dm *dm, uint64_t offset, size_t length, unsigned int access,
		  struct verbs_mr *vmr, struct ibv_command_buffer *link) noexcept;

// Size of the kern-abi.h request head for a kernel core struct.
template <class Core> inline constexpr size_t kLegacySize = kHdrSize + sizeof(Core);
template <class Core> inline constexpr size_t kLegacyExSize = kExHdrSize + sizeof(Core);

// The kernel core struct inside a provider's legacy request.
template <class Core> inline Core *core_of(void *cmd) noexcept
{
	return reinterpret_cast<Core *>(static_cast<char *>(cmd) + kHdrSize);
}
template <class Core> inline Core *core_of_ex(void *cmd) noexcept
{
	return reinterpret_cast<Core *>(static_cast<char *>(cmd) + kExHdrSize);
}

// A compat command buffer for a provider's legacy request/response: two
// attributes (UHW_IN/UHW_OUT) describing the driver data, with headroom for
// the legacy request to be rebuilt in place.
template <class Core, class Resp> struct CompatBuffer : CommandBuffer {
	CompatBuffer(uint16_t object, uint16_t method, void *cmd, size_t cmd_size, void *resp,
		     size_t resp_size, size_t core_req = kLegacySize<Core>,
		     struct ibv_command_buffer *driver = nullptr) noexcept
		: CommandBuffer(object, method, 2, driver)
	{
		if (ok())
			set_uhw(cmd, core_req, cmd_size, resp, sizeof(Resp), resp_size);
	}
};

// The verbs_xrcd around a provider's ibv_xrcd (its first member).
static inline struct verbs_xrcd *to_vxrcd(struct ibv_xrcd *xrcd) noexcept
{
	static_assert(offsetof(struct verbs_xrcd, xrcd) == 0, "ibv_xrcd leads verbs_xrcd");
	return reinterpret_cast<struct verbs_xrcd *>(xrcd);
}

// Sends POST_RECV or POST_SRQ_RECV with the list marshalled as
// ib_uverbs_recv_wr + ib_uverbs_sge records; *bad_wr names the first
// request the kernel refused (or wr itself when nothing was accepted).
int post_recv_common(struct ibv_context *ctx, uint32_t command, uint32_t handle, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad_wr) noexcept;

// Appends one work request's gather list as ib_uverbs_sge records at `s`;
// returns the record after the last one written.
inline struct ib_uverbs_sge *append_sges(struct ib_uverbs_sge *s, const struct ibv_sge *sg_list,
					 int num_sge) noexcept
{
	for (int k = 0; k < num_sge; ++k, ++s) {
		s->addr = sg_list[k].addr;
		s->length = sg_list[k].length;
		s->lkey = sg_list[k].lkey;
	}
	return s;
}

// *bad_wr after a POST_SEND / POST_RECV / POST_SRQ_RECV: the request the
// kernel names in the response's bad_wr (counted from 1 over the wr_count
// sent), else the head of the list when the command failed.
template <class Wr> void report_bad_wr(Wr *wr, uint32_t wr_count, uint32_t bad, int ret, Wr **bad_wr) noexcept
{
	if (bad && bad <= wr_count) {
		Wr *i = wr;
		while (--bad)
			i = i->next;
		*bad_wr = i;
	} else if (ret) {
		*bad_wr = wr;
	}
}

// Waits until the application acknowledged as many events as the kernel
// reported for a destroyed object. Nothing to wait for (and no lock to
// take) when the kernel reported none: an application acknowledges only
// events it received, so the count of acknowledged ones is still 0.
void wait_events(pthread_mutex_t *mutex, pthread_cond_t *cond, const uint32_t *completed, uint32_t reported) noexcept;

// Where the kernel's answer to a destroy goes: the ioctl method's output
// attribute `attr` (ioctl_out, ioctl_size) and the legacy write's response
// buffer (resp, resp_size). The default (all empty) is a destroy without an
// answer: the ioctl carries only the handle, the write no response.
struct DestroyAnswer {
	uint16_t attr = 0;
	void *ioctl_out = nullptr;
	size_t ioctl_size = 0;
	void *resp = nullptr;
	size_t resp_size = 0;
};

// The legacy write of a destroy, plain or extended by the request's type.
template <class Core>
int send_destroy_write(struct ibv_context *ctx, uint32_t command, LegacyReq<Core> &req, void *resp,
		       size_t resp_size) noexcept
{
	return send_write(ctx, command, &req, sizeof(req), sizeof(req), resp, resp_size, resp_size);
}
template <class Core>
int send_destroy_write(struct ibv_context *ctx, uint32_t command, LegacyReqEx<Core> &req, void *resp,
		       size_t resp_size) noexcept
{
	return send_write_ex(ctx, command, &req, sizeof(req), sizeof(req), resp, resp_size, resp_size);
}

// A destroy: the ioctl DESTROY `method` of `object` with the output
// attribute of `answer` (when it has one) and then the handle attribute,
// else (the fallback bit `bit` says so) the legacy write `command` of `req`,
// which the caller has filled in (handle, response pointer). *ret gets the
// result. Returns destroy_failed's verdict: true when the caller is done and
// returns *ret (a failure, ENOMEM for the command buffer, or 0 for an
// allowed EIO after disassociation), false when the object is gone and the
// answer is valid.
template <class Req>
bool destroy_handle(struct ibv_context *ctx, unsigned int bit, uint16_t object, uint16_t method,
		    uint16_t handle_attr, uint32_t handle, uint32_t command, Req &req, const DestroyAnswer &answer,
		    int *ret) noexcept
{
	CommandBuffer cmdb(object, method, answer.ioctl_out ? 2 : 1);
	if (!cmdb.ok()) {
		*ret = fail(ENOMEM);
		return true;
	}
	if (answer.ioctl_out)
		cmdb.out(answer.attr, answer.ioctl_out, answer.ioctl_size);
	cmdb.in_obj(handle_attr, handle);

	*ret = 0;
	switch (ioctl_or_legacy(ctx, bit, cmdb.get(), ret)) {
	case Fallback::TryWrite:
	case Fallback::TryWriteEx:
		*ret = send_destroy_write(ctx, command, req, answer.resp, answer.resp_size);
		break;
	default:
		break;
	}
	return destroy_failed(ret);
}

// The answer of a destroy whose ioctl output and write response are one
// kernel struct.
template <class Resp> inline DestroyAnswer answer_in(uint16_t attr, Resp *resp) noexcept
{
	return DestroyAnswer{attr, resp, sizeof(*resp), resp, sizeof(*resp)};
}

#if _OPENVERBS_ABI >= 64
// rdma-core 64 (cmd_v64.cpp): ioctl-only commands, 0 or an errno value
// (export: an fd, or -1 with errno). reg_mr_ex falls back to the REG_MR
// write command for an address registration without a DMA handle.
int cmd_alloc_dmah(struct ibv_context *ctx, struct verbs_dmah *dmah, const struct ibv_dmah_init_attr *attr) noexcept;
int cmd_free_dmah(struct verbs_dmah *dmah) noexcept;
int cmd_query_port_speed(struct ibv_context *context, uint32_t port_num, uint64_t *speed) noexcept;
int cmd_export_dmabuf_fd(struct ibv_context *ctx, off_t pg_off) noexcept;
int cmd_reg_mr_ex(struct ibv_pd *pd, struct verbs_mr *vmr, const struct ibv_mr_init_attr *attr) noexcept;

// DMA-buf heaps: open /dev/dma_heap/<name> (NULL with errno; EOPNOTSUPP when
// built without <linux/dma-heap.h>), allocate and mmap size bytes (the
// dma-buf fd in *dmabuf_fd), unmap and close.
struct DmabufHeap;
DmabufHeap *dmabuf_heap_open(const char *name) noexcept;
void dmabuf_heap_close(DmabufHeap *heap) noexcept;
void *dmabuf_heap_alloc(DmabufHeap *heap, size_t size, int *dmabuf_fd) noexcept;
void dmabuf_heap_free(void *buf, size_t size, int dmabuf_fd) noexcept;
#endif

} // namespace ov::kernel
