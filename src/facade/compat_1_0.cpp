// The IBVERBS_1.0 ABI: the 33 verbs that libibverbs 1.0 binaries bind to
// (`name@IBVERBS_1.0`), beside the current `name@@IBVERBS_1.1` versions.
//
// A 1.0 binary was compiled against smaller object structs (ibv_context_1_0,
// ibv_pd_1_0, ibv_cq_1_0, ...) whose last member points to the real object.
// Each 1.0 verb therefore allocates a 1.0 wrapper around the object the
// current verb returns, unwraps its arguments, and maps events back: the
// real CQ/QP/SRQ keeps its 1.0 wrapper in its user context field
// (cq_context, qp_context, srq_context). The 1.0 inline data path
// (poll_cq, req_notify_cq, post_send, post_recv, post_srq_recv) goes through
// ibv_context_1_0::ops, filled with wrappers that convert the old work
// request layouts. Layouts: rdma-core 44's ABI dump (see static_asserts).
#include "core/verbs/verbs.h"
#include "facade/export.h"
#include "facade/verbs_check.h"

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <pthread.h>

#undef ibv_reg_mr
#undef ibv_query_port

#include "facade/compat_1_0.h"

using ov::facade::fail;
using ov::facade::fail_null;

namespace {

constexpr size_t kCompatPortAttrSize = 48; // sizeof(struct _compat_ibv_port_attr)

template <typename T> T *alloc_zeroed() noexcept
{
	return static_cast<T *>(calloc(1, sizeof(T)));
}

// A 1.0 wrapper whose real object could not be made: freed with errno kept;
// NULL for the caller to return.
template <typename T> T *discard_wrapper(T *wrapper) noexcept
{
	int saved = errno;
	free(wrapper);
	errno = saved;
	return nullptr;
}

// The mutex and condition a 1.0 CQ, SRQ or QP offers for event counting.
template <typename T> void init_event_sync(T *wrapper) noexcept
{
	init_object_sync(&wrapper->mutex, &wrapper->cond);
}

// After the real object's destroy returned `ret`: on success the 1.0
// wrapper goes too; a failure leaves both and is returned as is.
template <typename T> int release_wrapper(T *wrapper, int ret) noexcept
{
	if (ret)
		return ret;
	free(wrapper);
	return 0;
}
template <typename T> int release_event_wrapper(T *wrapper, int ret) noexcept
{
	if (ret)
		return ret;
	pthread_cond_destroy(&wrapper->cond);
	pthread_mutex_destroy(&wrapper->mutex);
	free(wrapper);
	return 0;
}

// The device list handed to a 1.0 binary: the pointer array it sees, plus
// what is needed to release it.
struct DeviceList10 {
	struct ibv_device **real;
	struct ibv_device_1_0 *devices;
	struct ibv_device_1_0 *entries[]; // NULL terminated; returned to the caller
};

DeviceList10 *list_of(struct ibv_device_1_0 **entries) noexcept
{
	return reinterpret_cast<DeviceList10 *>(reinterpret_cast<char *>(entries) -
						offsetof(DeviceList10, entries));
}

// ---- 1.0 data path: convert and forward to the real context's ops -------

int poll_cq_1_0(struct ibv_cq_1_0 *cq, int num, struct ibv_wc *wc)
{
	struct ibv_cq *real = cq->real_cq;
	return real->context->ops.poll_cq(real, num, wc);
}

int req_notify_cq_1_0(struct ibv_cq_1_0 *cq, int solicited_only)
{
	struct ibv_cq *real = cq->real_cq;
	return real->context->ops.req_notify_cq(real, solicited_only);
}

template <typename Old> size_t list_length(Old *wr)
{
	size_t n = 0;
	for (; wr; wr = wr->next)
		n++;
	return n;
}

// Receive lists: same fields as struct ibv_recv_wr, other order.
struct ibv_recv_wr *convert_recv(struct ibv_recv_wr_1_0 *wr, size_t n)
{
	auto *out = static_cast<struct ibv_recv_wr *>(calloc(n ? n : 1, sizeof(struct ibv_recv_wr)));
	if (!out)
		return nullptr;
	size_t i = 0;
	for (struct ibv_recv_wr_1_0 *w = wr; w; w = w->next, i++) {
		out[i].wr_id = w->wr_id;
		out[i].sg_list = w->sg_list;
		out[i].num_sge = w->num_sge;
		out[i].next = w->next ? &out[i + 1] : nullptr;
	}
	return out;
}

template <typename Old, typename New> Old *map_bad(Old *head, New *converted, New *bad)
{
	if (!bad)
		return nullptr;
	Old *w = head;
	for (New *c = converted; c != bad && w; c++)
		w = w->next;
	return w;
}

// Converts a 1.0 receive list, posts it with `post` (the real QP's or SRQ's
// op) and maps a refused request back to the caller's list.
template <typename Post>
int post_recv_list(struct ibv_recv_wr_1_0 *wr, struct ibv_recv_wr_1_0 **bad_wr, Post post)
{
	struct ibv_recv_wr *real = convert_recv(wr, list_length(wr));
	if (!real)
		return ENOMEM;
	struct ibv_recv_wr *real_bad = nullptr;
	int ret = post(wr ? real : nullptr, &real_bad);
	if (ret && bad_wr)
		*bad_wr = map_bad(wr, real, real_bad);
	free(real);
	return ret;
}

int post_recv_1_0(struct ibv_qp_1_0 *qp, struct ibv_recv_wr_1_0 *wr,
		  struct ibv_recv_wr_1_0 **bad_wr)
{
	struct ibv_qp *rqp = qp->real_qp;
	return post_recv_list(wr, bad_wr, [rqp](struct ibv_recv_wr *list, struct ibv_recv_wr **bad) {
		return rqp->context->ops.post_recv(rqp, list, bad);
	});
}

int post_srq_recv_1_0(struct ibv_srq_1_0 *srq, struct ibv_recv_wr_1_0 *wr,
		      struct ibv_recv_wr_1_0 **bad_wr)
{
	struct ibv_srq *rsrq = srq->real_srq;
	return post_recv_list(wr, bad_wr, [rsrq](struct ibv_recv_wr *list, struct ibv_recv_wr **bad) {
		return rsrq->context->ops.post_srq_recv(rsrq, list, bad);
	});
}

int post_send_1_0(struct ibv_qp_1_0 *qp, struct ibv_send_wr_1_0 *wr,
		  struct ibv_send_wr_1_0 **bad_wr)
{
	const size_t n = list_length(wr);
	auto *real = static_cast<struct ibv_send_wr *>(calloc(n ? n : 1, sizeof(struct ibv_send_wr)));
	if (!real)
		return ENOMEM;
	struct ibv_qp *rqp = qp->real_qp;
	size_t i = 0;
	for (struct ibv_send_wr_1_0 *w = wr; w; w = w->next, i++) {
		struct ibv_send_wr *r = &real[i];
		r->wr_id = w->wr_id;
		r->next = w->next ? &real[i + 1] : nullptr;
		r->sg_list = w->sg_list;
		r->num_sge = w->num_sge;
		r->opcode = w->opcode;
		r->send_flags = static_cast<unsigned int>(w->send_flags);
		r->imm_data = w->imm_data;
		if (rqp->qp_type == IBV_QPT_UD) {
			r->wr.ud.ah = w->wr.ud.ah ? w->wr.ud.ah->real_ah : nullptr;
			r->wr.ud.remote_qpn = w->wr.ud.remote_qpn;
			r->wr.ud.remote_qkey = w->wr.ud.remote_qkey;
		} else if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
			   w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			r->wr.atomic.remote_addr = w->wr.atomic.remote_addr;
			r->wr.atomic.compare_add = w->wr.atomic.compare_add;
			r->wr.atomic.swap = w->wr.atomic.swap;
			r->wr.atomic.rkey = w->wr.atomic.rkey;
		} else {
			r->wr.rdma.remote_addr = w->wr.rdma.remote_addr;
			r->wr.rdma.rkey = w->wr.rdma.rkey;
		}
	}
	struct ibv_send_wr *real_bad = nullptr;
	int ret = rqp->context->ops.post_send(rqp, wr ? real : nullptr, &real_bad);
	if (ret && bad_wr)
		*bad_wr = map_bad(wr, real, real_bad);
	free(real);
	return ret;
}

bool ctx10_ok(struct ibv_context_1_0 *ctx) noexcept
{
	return ctx && ov::facade::ctx_ok(ctx->real_context);
}

} // namespace

// ---- devices and contexts ------------------------------------------------

OV_EXPORT struct ibv_device_1_0 **ov_get_device_list_1_0(int *num) noexcept;
OV_SYMVER(ov_get_device_list_1_0, "ibv_get_device_list@IBVERBS_1.0");
OV_EXPORT struct ibv_device_1_0 **ov_get_device_list_1_0(int *num) noexcept
{
	int count = 0;
	struct ibv_device **real = ibv_get_device_list(&count);
	if (!real)
		return nullptr;
	auto *list = static_cast<DeviceList10 *>(
		calloc(1, sizeof(DeviceList10) + (static_cast<size_t>(count) + 1) * sizeof(void *)));
	auto *devices = static_cast<struct ibv_device_1_0 *>(
		calloc(count ? static_cast<size_t>(count) : 1, sizeof(struct ibv_device_1_0)));
	if (!list || !devices) {
		free(list);
		free(devices);
		ibv_free_device_list(real);
		errno = ENOMEM;
		return nullptr;
	}
	list->real = real;
	list->devices = devices;
	for (int i = 0; i < count; i++) {
		devices[i].real_device = real[i];
		list->entries[i] = &devices[i];
	}
	if (num)
		*num = count;
	return list->entries;
}

OV_EXPORT void ov_free_device_list_1_0(struct ibv_device_1_0 **entries) noexcept;
OV_SYMVER(ov_free_device_list_1_0, "ibv_free_device_list@IBVERBS_1.0");
OV_EXPORT void ov_free_device_list_1_0(struct ibv_device_1_0 **entries) noexcept
{
	if (!entries)
		return;
	DeviceList10 *list = list_of(entries);
	ibv_free_device_list(list->real);
	free(list->devices);
	free(list);
}

OV_EXPORT const char *ov_get_device_name_1_0(struct ibv_device_1_0 *device) noexcept;
OV_SYMVER(ov_get_device_name_1_0, "ibv_get_device_name@IBVERBS_1.0");
OV_EXPORT const char *ov_get_device_name_1_0(struct ibv_device_1_0 *device) noexcept
{
	if (!device)
		return fail_null<const char>(EINVAL);
	return ibv_get_device_name(device->real_device);
}

OV_EXPORT __be64 ov_get_device_guid_1_0(struct ibv_device_1_0 *device) noexcept;
OV_SYMVER(ov_get_device_guid_1_0, "ibv_get_device_guid@IBVERBS_1.0");
OV_EXPORT __be64 ov_get_device_guid_1_0(struct ibv_device_1_0 *device) noexcept
{
	if (!device) {
		errno = EINVAL;
		return 0;
	}
	return ibv_get_device_guid(device->real_device);
}

OV_EXPORT struct ibv_context_1_0 *ov_open_device_1_0(struct ibv_device_1_0 *device) noexcept;
OV_SYMVER(ov_open_device_1_0, "ibv_open_device@IBVERBS_1.0");
OV_EXPORT struct ibv_context_1_0 *ov_open_device_1_0(struct ibv_device_1_0 *device) noexcept
{
	if (!device || !device->real_device)
		return fail_null<struct ibv_context_1_0>(EINVAL);
	auto *ctx = alloc_zeroed<struct ibv_context_1_0>();
	if (!ctx)
		return fail_null<struct ibv_context_1_0>(ENOMEM);
	struct ibv_context *real = ibv_open_device(device->real_device);
	if (!real)
		return discard_wrapper(ctx);
	ctx->device = device;
	ctx->real_context = real;
	ctx->cmd_fd = real->cmd_fd;
	ctx->async_fd = real->async_fd;
	ctx->num_comp_vectors = real->num_comp_vectors;
	ctx->ops.poll_cq = poll_cq_1_0;
	ctx->ops.req_notify_cq = req_notify_cq_1_0;
	ctx->ops.post_send = post_send_1_0;
	ctx->ops.post_recv = post_recv_1_0;
	ctx->ops.post_srq_recv = post_srq_recv_1_0;
	return ctx;
}

OV_EXPORT int ov_close_device_1_0(struct ibv_context_1_0 *context) noexcept;
OV_SYMVER(ov_close_device_1_0, "ibv_close_device@IBVERBS_1.0");
OV_EXPORT int ov_close_device_1_0(struct ibv_context_1_0 *context) noexcept
{
	if (!ctx10_ok(context))
		return fail(EINVAL);
	int ret = ibv_close_device(context->real_context);
	if (ret)
		return ret;
	free(context);
	return 0;
}

OV_EXPORT int ov_get_async_event_1_0(struct ibv_context_1_0 *context,
				     struct ibv_async_event *event) noexcept;
OV_SYMVER(ov_get_async_event_1_0, "ibv_get_async_event@IBVERBS_1.0");
OV_EXPORT int ov_get_async_event_1_0(struct ibv_context_1_0 *context,
				     struct ibv_async_event *event) noexcept
{
	if (!ctx10_ok(context) || !event) {
		errno = EINVAL;
		return -1;
	}
	int ret = ibv_get_async_event(context->real_context, event);
	if (ret)
		return ret;
	// Hand out the 1.0 wrappers, which the real objects keep as context.
	switch (ov::verbs::event_element(event->event_type)) {
	case ov::verbs::EventElement::Cq:
		event->element.cq = static_cast<struct ibv_cq *>(event->element.cq->cq_context);
		break;
	case ov::verbs::EventElement::Qp:
		event->element.qp = static_cast<struct ibv_qp *>(event->element.qp->qp_context);
		break;
	case ov::verbs::EventElement::Srq:
		event->element.srq = static_cast<struct ibv_srq *>(event->element.srq->srq_context);
		break;
	case ov::verbs::EventElement::Wq:
	case ov::verbs::EventElement::Port:
		break;
	}
	return 0;
}

OV_EXPORT void ov_ack_async_event_1_0(struct ibv_async_event *event) noexcept;
OV_SYMVER(ov_ack_async_event_1_0, "ibv_ack_async_event@IBVERBS_1.0");
OV_EXPORT void ov_ack_async_event_1_0(struct ibv_async_event *event) noexcept
{
	if (!event)
		return;
	struct ibv_async_event real = *event;
	switch (ov::verbs::event_element(event->event_type)) {
	case ov::verbs::EventElement::Cq:
		real.element.cq = reinterpret_cast<struct ibv_cq_1_0 *>(event->element.cq)->real_cq;
		break;
	case ov::verbs::EventElement::Qp:
		real.element.qp = reinterpret_cast<struct ibv_qp_1_0 *>(event->element.qp)->real_qp;
		break;
	case ov::verbs::EventElement::Srq:
		real.element.srq = reinterpret_cast<struct ibv_srq_1_0 *>(event->element.srq)->real_srq;
		break;
	case ov::verbs::EventElement::Wq:
	case ov::verbs::EventElement::Port:
		break;
	}
	ibv_ack_async_event(&real);
}

// ---- queries -----------------------------------------------------------------

OV_EXPORT int ov_query_device_1_0(struct ibv_context_1_0 *context,
				  struct ibv_device_attr *attr) noexcept;
OV_SYMVER(ov_query_device_1_0, "ibv_query_device@IBVERBS_1.0");
OV_EXPORT int ov_query_device_1_0(struct ibv_context_1_0 *context,
				  struct ibv_device_attr *attr) noexcept
{
	if (!ctx10_ok(context) || !attr)
		return fail(EINVAL);
	return ov::verbs::query_device(context->real_context, attr);
}

OV_EXPORT int ov_query_port_1_0(struct ibv_context_1_0 *context, uint8_t port_num,
				struct ibv_port_attr *attr) noexcept;
OV_SYMVER(ov_query_port_1_0, "ibv_query_port@IBVERBS_1.0");
OV_EXPORT int ov_query_port_1_0(struct ibv_context_1_0 *context, uint8_t port_num,
				struct ibv_port_attr *attr) noexcept
{
	if (!ctx10_ok(context) || !attr)
		return fail(EINVAL);
	return ov::verbs::query_port(context->real_context, port_num, attr, kCompatPortAttrSize);
}

OV_EXPORT int ov_query_gid_1_0(struct ibv_context_1_0 *context, uint8_t port_num, int index,
			       union ibv_gid *gid) noexcept;
OV_SYMVER(ov_query_gid_1_0, "ibv_query_gid@IBVERBS_1.0");
OV_EXPORT int ov_query_gid_1_0(struct ibv_context_1_0 *context, uint8_t port_num, int index,
			       union ibv_gid *gid) noexcept
{
	if (!ctx10_ok(context) || !gid || index < 0) {
		errno = EINVAL;
		return -1;
	}
	return ov::verbs::query_gid(context->real_context, port_num, index, gid);
}

OV_EXPORT int ov_query_pkey_1_0(struct ibv_context_1_0 *context, uint8_t port_num, int index,
				__be16 *pkey) noexcept;
OV_SYMVER(ov_query_pkey_1_0, "ibv_query_pkey@IBVERBS_1.0");
OV_EXPORT int ov_query_pkey_1_0(struct ibv_context_1_0 *context, uint8_t port_num, int index,
				__be16 *pkey) noexcept
{
	if (!ctx10_ok(context) || !pkey || index < 0) {
		errno = EINVAL;
		return -1;
	}
	return ov::verbs::query_pkey(context->real_context, port_num, index, pkey);
}

// ---- PD and MR -----------------------------------------------------------------

OV_EXPORT struct ibv_pd_1_0 *ov_alloc_pd_1_0(struct ibv_context_1_0 *context) noexcept;
OV_SYMVER(ov_alloc_pd_1_0, "ibv_alloc_pd@IBVERBS_1.0");
OV_EXPORT struct ibv_pd_1_0 *ov_alloc_pd_1_0(struct ibv_context_1_0 *context) noexcept
{
	if (!ctx10_ok(context))
		return fail_null<struct ibv_pd_1_0>(EINVAL);
	auto *pd = alloc_zeroed<struct ibv_pd_1_0>();
	if (!pd)
		return fail_null<struct ibv_pd_1_0>(ENOMEM);
	struct ibv_pd *real = ov::verbs::alloc_pd(context->real_context);
	if (!real)
		return discard_wrapper(pd);
	pd->context = context;
	pd->handle = real->handle;
	pd->real_pd = real;
	return pd;
}

OV_EXPORT int ov_dealloc_pd_1_0(struct ibv_pd_1_0 *pd) noexcept;
OV_SYMVER(ov_dealloc_pd_1_0, "ibv_dealloc_pd@IBVERBS_1.0");
OV_EXPORT int ov_dealloc_pd_1_0(struct ibv_pd_1_0 *pd) noexcept
{
	if (!pd || !pd->real_pd)
		return fail(EINVAL);
	return release_wrapper(pd, ov::verbs::dealloc_pd(pd->real_pd));
}

OV_EXPORT struct ibv_mr_1_0 *ov_reg_mr_1_0(struct ibv_pd_1_0 *pd, void *addr, size_t length,
					   int access) noexcept;
OV_SYMVER(ov_reg_mr_1_0, "ibv_reg_mr@IBVERBS_1.0");
OV_EXPORT struct ibv_mr_1_0 *ov_reg_mr_1_0(struct ibv_pd_1_0 *pd, void *addr, size_t length,
					   int access) noexcept
{
	if (!pd || !pd->real_pd)
		return fail_null<struct ibv_mr_1_0>(EINVAL);
	auto *mr = alloc_zeroed<struct ibv_mr_1_0>();
	if (!mr)
		return fail_null<struct ibv_mr_1_0>(ENOMEM);
	struct ibv_mr *real = ov::verbs::reg_mr_iova2(pd->real_pd, addr, length,
						      reinterpret_cast<uintptr_t>(addr),
						      static_cast<unsigned int>(access));
	if (!real)
		return discard_wrapper(mr);
	mr->context = pd->context;
	mr->pd = pd;
	mr->handle = real->handle;
	mr->lkey = real->lkey;
	mr->rkey = real->rkey;
	mr->real_mr = real;
	return mr;
}

OV_EXPORT int ov_dereg_mr_1_0(struct ibv_mr_1_0 *mr) noexcept;
OV_SYMVER(ov_dereg_mr_1_0, "ibv_dereg_mr@IBVERBS_1.0");
OV_EXPORT int ov_dereg_mr_1_0(struct ibv_mr_1_0 *mr) noexcept
{
	if (!mr || !mr->real_mr)
		return fail(EINVAL);
	return release_wrapper(mr, ov::verbs::dereg_mr(mr->real_mr));
}

// ---- CQ --------------------------------------------------------------------------

OV_EXPORT struct ibv_cq_1_0 *ov_create_cq_1_0(struct ibv_context_1_0 *context, int cqe,
					      void *cq_context, struct ibv_comp_channel *channel,
					      int comp_vector) noexcept;
OV_SYMVER(ov_create_cq_1_0, "ibv_create_cq@IBVERBS_1.0");
OV_EXPORT struct ibv_cq_1_0 *ov_create_cq_1_0(struct ibv_context_1_0 *context, int cqe,
					      void *cq_context, struct ibv_comp_channel *channel,
					      int comp_vector) noexcept
{
	if (!ctx10_ok(context))
		return fail_null<struct ibv_cq_1_0>(EINVAL);
	auto *cq = alloc_zeroed<struct ibv_cq_1_0>();
	if (!cq)
		return fail_null<struct ibv_cq_1_0>(ENOMEM);
	// The real CQ carries the wrapper as its context: completion and async
	// events lead back to the 1.0 object.
	struct ibv_cq *real =
		ov::verbs::create_cq(context->real_context, cqe, cq, channel, comp_vector);
	if (!real)
		return discard_wrapper(cq);
	cq->context = context;
	cq->cq_context = cq_context;
	cq->handle = real->handle;
	cq->cqe = real->cqe;
	init_event_sync(cq);
	cq->real_cq = real;
	return cq;
}

OV_EXPORT int ov_resize_cq_1_0(struct ibv_cq_1_0 *cq, int cqe) noexcept;
OV_SYMVER(ov_resize_cq_1_0, "ibv_resize_cq@IBVERBS_1.0");
OV_EXPORT int ov_resize_cq_1_0(struct ibv_cq_1_0 *cq, int cqe) noexcept
{
	if (!cq || !cq->real_cq)
		return fail(EINVAL);
	int ret = ov::verbs::resize_cq(cq->real_cq, cqe);
	if (!ret)
		cq->cqe = cq->real_cq->cqe;
	return ret;
}

OV_EXPORT int ov_destroy_cq_1_0(struct ibv_cq_1_0 *cq) noexcept;
OV_SYMVER(ov_destroy_cq_1_0, "ibv_destroy_cq@IBVERBS_1.0");
OV_EXPORT int ov_destroy_cq_1_0(struct ibv_cq_1_0 *cq) noexcept
{
	if (!cq || !cq->real_cq)
		return fail(EINVAL);
	return release_event_wrapper(cq, ov::verbs::destroy_cq(cq->real_cq));
}

OV_EXPORT int ov_get_cq_event_1_0(struct ibv_comp_channel *channel, struct ibv_cq_1_0 **cq,
				  void **cq_context) noexcept;
OV_SYMVER(ov_get_cq_event_1_0, "ibv_get_cq_event@IBVERBS_1.0");
OV_EXPORT int ov_get_cq_event_1_0(struct ibv_comp_channel *channel, struct ibv_cq_1_0 **cq,
				  void **cq_context) noexcept
{
	if (!channel || !cq || !cq_context) {
		errno = EINVAL;
		return -1;
	}
	struct ibv_cq *real;
	void *wrapper;
	int ret = ov::verbs::get_cq_event(channel, &real, &wrapper);
	if (ret)
		return ret;
	*cq = static_cast<struct ibv_cq_1_0 *>(wrapper);
	*cq_context = (*cq)->cq_context;
	return 0;
}

OV_EXPORT void ov_ack_cq_events_1_0(struct ibv_cq_1_0 *cq, unsigned int nevents) noexcept;
OV_SYMVER(ov_ack_cq_events_1_0, "ibv_ack_cq_events@IBVERBS_1.0");
OV_EXPORT void ov_ack_cq_events_1_0(struct ibv_cq_1_0 *cq, unsigned int nevents) noexcept
{
	if (cq && cq->real_cq)
		ov::verbs::ack_cq_events(cq->real_cq, nevents);
}

// ---- SRQ ---------------------------------------------------------------------------

OV_EXPORT struct ibv_srq_1_0 *ov_create_srq_1_0(struct ibv_pd_1_0 *pd,
						struct ibv_srq_init_attr *attr) noexcept;
OV_SYMVER(ov_create_srq_1_0, "ibv_create_srq@IBVERBS_1.0");
OV_EXPORT struct ibv_srq_1_0 *ov_create_srq_1_0(struct ibv_pd_1_0 *pd,
						struct ibv_srq_init_attr *attr) noexcept
{
	if (!pd || !pd->real_pd || !attr)
		return fail_null<struct ibv_srq_1_0>(EINVAL);
	auto *srq = alloc_zeroed<struct ibv_srq_1_0>();
	if (!srq)
		return fail_null<struct ibv_srq_1_0>(ENOMEM);
	struct ibv_srq_init_attr real_attr = *attr;
	real_attr.srq_context = srq;
	struct ibv_srq *real = ov::verbs::create_srq(pd->real_pd, &real_attr);
	if (!real)
		return discard_wrapper(srq);
	attr->attr = real_attr.attr; // the provider reports the granted sizes
	srq->context = pd->context;
	srq->srq_context = attr->srq_context;
	srq->pd = pd;
	srq->handle = real->handle;
	init_event_sync(srq);
	srq->real_srq = real;
	return srq;
}

OV_EXPORT int ov_modify_srq_1_0(struct ibv_srq_1_0 *srq, struct ibv_srq_attr *attr,
				int mask) noexcept;
OV_SYMVER(ov_modify_srq_1_0, "ibv_modify_srq@IBVERBS_1.0");
OV_EXPORT int ov_modify_srq_1_0(struct ibv_srq_1_0 *srq, struct ibv_srq_attr *attr,
				int mask) noexcept
{
	if (!srq || !srq->real_srq || !attr)
		return fail(EINVAL);
	return ov::verbs::modify_srq(srq->real_srq, attr, mask);
}

OV_EXPORT int ov_query_srq_1_0(struct ibv_srq_1_0 *srq, struct ibv_srq_attr *attr) noexcept;
OV_SYMVER(ov_query_srq_1_0, "ibv_query_srq@IBVERBS_1.0");
OV_EXPORT int ov_query_srq_1_0(struct ibv_srq_1_0 *srq, struct ibv_srq_attr *attr) noexcept
{
	if (!srq || !srq->real_srq || !attr)
		return fail(EINVAL);
	return ov::verbs::query_srq(srq->real_srq, attr);
}

OV_EXPORT int ov_destroy_srq_1_0(struct ibv_srq_1_0 *srq) noexcept;
OV_SYMVER(ov_destroy_srq_1_0, "ibv_destroy_srq@IBVERBS_1.0");
OV_EXPORT int ov_destroy_srq_1_0(struct ibv_srq_1_0 *srq) noexcept
{
	if (!srq || !srq->real_srq)
		return fail(EINVAL);
	return release_event_wrapper(srq, ov::verbs::destroy_srq(srq->real_srq));
}

// ---- QP ------------------------------------------------------------------------------

OV_EXPORT struct ibv_qp_1_0 *ov_create_qp_1_0(struct ibv_pd_1_0 *pd,
					      struct ibv_qp_init_attr_1_0 *attr) noexcept;
OV_SYMVER(ov_create_qp_1_0, "ibv_create_qp@IBVERBS_1.0");
OV_EXPORT struct ibv_qp_1_0 *ov_create_qp_1_0(struct ibv_pd_1_0 *pd,
					      struct ibv_qp_init_attr_1_0 *attr) noexcept
{
	if (!pd || !pd->real_pd || !attr || !attr->send_cq || !attr->recv_cq)
		return fail_null<struct ibv_qp_1_0>(EINVAL);
	auto *qp = alloc_zeroed<struct ibv_qp_1_0>();
	if (!qp)
		return fail_null<struct ibv_qp_1_0>(ENOMEM);
	struct ibv_qp_init_attr real_attr;
	memset(&real_attr, 0, sizeof(real_attr));
	real_attr.qp_context = qp;
	real_attr.send_cq = attr->send_cq->real_cq;
	real_attr.recv_cq = attr->recv_cq->real_cq;
	real_attr.srq = attr->srq ? attr->srq->real_srq : nullptr;
	real_attr.cap = attr->cap;
	real_attr.qp_type = attr->qp_type;
	real_attr.sq_sig_all = attr->sq_sig_all;
	struct ibv_qp *real = ov::verbs::create_qp(pd->real_pd, &real_attr);
	if (!real)
		return discard_wrapper(qp);
	attr->cap = real_attr.cap;
	qp->context = pd->context;
	qp->qp_context = attr->qp_context;
	qp->pd = pd;
	qp->send_cq = attr->send_cq;
	qp->recv_cq = attr->recv_cq;
	qp->srq = attr->srq;
	qp->handle = real->handle;
	qp->qp_num = real->qp_num;
	qp->state = real->state;
	qp->qp_type = real->qp_type;
	init_event_sync(qp);
	qp->real_qp = real;
	return qp;
}

OV_EXPORT int ov_query_qp_1_0(struct ibv_qp_1_0 *qp, struct ibv_qp_attr *attr, int mask,
			      struct ibv_qp_init_attr_1_0 *init_attr) noexcept;
OV_SYMVER(ov_query_qp_1_0, "ibv_query_qp@IBVERBS_1.0");
OV_EXPORT int ov_query_qp_1_0(struct ibv_qp_1_0 *qp, struct ibv_qp_attr *attr, int mask,
			      struct ibv_qp_init_attr_1_0 *init_attr) noexcept
{
	if (!qp || !qp->real_qp || !attr || !init_attr)
		return fail(EINVAL);
	struct ibv_qp_init_attr real_init;
	memset(&real_init, 0, sizeof(real_init));
	int ret = ov::verbs::query_qp(qp->real_qp, attr, mask, &real_init);
	if (ret)
		return ret;
	init_attr->qp_context = qp->qp_context;
	init_attr->send_cq = qp->send_cq;
	init_attr->recv_cq = qp->recv_cq;
	init_attr->srq = qp->srq;
	init_attr->qp_type = qp->qp_type;
	init_attr->cap = real_init.cap;
	init_attr->sq_sig_all = real_init.sq_sig_all;
	if (mask & IBV_QP_STATE)
		qp->state = attr->qp_state;
	return 0;
}

OV_EXPORT int ov_modify_qp_1_0(struct ibv_qp_1_0 *qp, struct ibv_qp_attr *attr,
			       int mask) noexcept;
OV_SYMVER(ov_modify_qp_1_0, "ibv_modify_qp@IBVERBS_1.0");
OV_EXPORT int ov_modify_qp_1_0(struct ibv_qp_1_0 *qp, struct ibv_qp_attr *attr,
			       int mask) noexcept
{
	if (!qp || !qp->real_qp || !attr)
		return fail(EINVAL);
	int ret = ov::verbs::modify_qp(qp->real_qp, attr, mask);
	if (!ret && (mask & IBV_QP_STATE))
		qp->state = attr->qp_state;
	return ret;
}

OV_EXPORT int ov_destroy_qp_1_0(struct ibv_qp_1_0 *qp) noexcept;
OV_SYMVER(ov_destroy_qp_1_0, "ibv_destroy_qp@IBVERBS_1.0");
OV_EXPORT int ov_destroy_qp_1_0(struct ibv_qp_1_0 *qp) noexcept
{
	if (!qp || !qp->real_qp)
		return fail(EINVAL);
	return release_event_wrapper(qp, ov::verbs::destroy_qp(qp->real_qp));
}

// ---- AH and multicast -----------------------------------------------------------

OV_EXPORT struct ibv_ah_1_0 *ov_create_ah_1_0(struct ibv_pd_1_0 *pd,
					      struct ibv_ah_attr *attr) noexcept;
OV_SYMVER(ov_create_ah_1_0, "ibv_create_ah@IBVERBS_1.0");
OV_EXPORT struct ibv_ah_1_0 *ov_create_ah_1_0(struct ibv_pd_1_0 *pd,
					      struct ibv_ah_attr *attr) noexcept
{
	if (!pd || !pd->real_pd || !attr)
		return fail_null<struct ibv_ah_1_0>(EINVAL);
	auto *ah = alloc_zeroed<struct ibv_ah_1_0>();
	if (!ah)
		return fail_null<struct ibv_ah_1_0>(ENOMEM);
	struct ibv_ah *real = ov::verbs::create_ah(pd->real_pd, attr);
	if (!real)
		return discard_wrapper(ah);
	ah->context = pd->context;
	ah->pd = pd;
	ah->handle = real->handle;
	ah->real_ah = real;
	return ah;
}

OV_EXPORT int ov_destroy_ah_1_0(struct ibv_ah_1_0 *ah) noexcept;
OV_SYMVER(ov_destroy_ah_1_0, "ibv_destroy_ah@IBVERBS_1.0");
OV_EXPORT int ov_destroy_ah_1_0(struct ibv_ah_1_0 *ah) noexcept
{
	if (!ah || !ah->real_ah)
		return fail(EINVAL);
	return release_wrapper(ah, ov::verbs::destroy_ah(ah->real_ah));
}

OV_EXPORT int ov_attach_mcast_1_0(struct ibv_qp_1_0 *qp, union ibv_gid *gid,
				  uint16_t lid) noexcept;
OV_SYMVER(ov_attach_mcast_1_0, "ibv_attach_mcast@IBVERBS_1.0");
OV_EXPORT int ov_attach_mcast_1_0(struct ibv_qp_1_0 *qp, union ibv_gid *gid, uint16_t lid) noexcept
{
	if (!qp || !qp->real_qp || !gid)
		return fail(EINVAL);
	return ov::verbs::attach_mcast(qp->real_qp, gid, lid);
}

OV_EXPORT int ov_detach_mcast_1_0(struct ibv_qp_1_0 *qp, union ibv_gid *gid,
				  uint16_t lid) noexcept;
OV_SYMVER(ov_detach_mcast_1_0, "ibv_detach_mcast@IBVERBS_1.0");
OV_EXPORT int ov_detach_mcast_1_0(struct ibv_qp_1_0 *qp, union ibv_gid *gid, uint16_t lid) noexcept
{
	if (!qp || !qp->real_qp || !gid)
		return fail(EINVAL);
	return ov::verbs::detach_mcast(qp->real_qp, gid, lid);
}
