// Communication identifiers: the front end of every rdma_cm_id operation
// (rdma-core 44 cma.c). The backend issues the command; this file does what
// the library does around it: synchronous ids, devices, route bookkeeping,
// QP transitions and event accounting.
#include "cm.h"
#include "hooks.h"
#include "log.h"

#include <infiniband/ib.h>

#include <algorithm>
#include <atomic>
#include <arpa/inet.h>
#include <cstdlib>
#include <cstring>
#include <new>

namespace ov::cm {
namespace {

Channel &chan(Id &id) noexcept { return *priv(id.pub.channel); }

// Moves an idle id to the software CM when it claims the address (an
// address of this host that no kernel RDMA device owns).
int choose_backend(Id &id, const sockaddr *addr) noexcept
{
	Channel &ch = chan(id);
	if (!ch.soft || !addr || std::strcmp(id.be->kind(), "soft") == 0)
		return 0;
	if (!soft::claims(addr))
		return 0;
	int err = 0;
	auto be = soft::create_id(*ch.soft, reinterpret_cast<uintptr_t>(&id), id.pub.ps,
				  id.pub.qp_type, err);
	if (!be)
		return fail(err);
	uint32_t reported = 0;
	id.be->destroy(reported);
	id.be = std::move(be);
	char text[64];
	log::debug("%s is served by the software CM", log::addr_text(addr, text, sizeof(text)));
	return 0;
}

// The kernel's half of an id on a channel that has both CMs, made when the
// id first needs it: rdma_create_id then issues no kernel command, and an
// id that the software CM takes at bind or resolve (choose_backend) never
// has one. A refusal of the kernel's CREATE_ID is then the errno of that
// first call instead of rdma_create_id's.
class LazyKernelId final : public IdBackend {
public:
	LazyKernelId(EventSource &src, uint64_t uid, uint16_t ps, uint8_t qpt) noexcept
		: src_(&src), uid_(uid), ps_(ps), qpt_(qpt)
	{
	}
	const char *kind() const noexcept override { return "kernel"; }
	int destroy(uint32_t &reported) noexcept override
	{
		reported = 0;
		return real_ ? real_->destroy(reported) : 0;
	}
	int bind_addr(const sockaddr *addr, socklen_t len) noexcept override
	{
		return fwd([&](IdBackend &b) { return b.bind_addr(addr, len); });
	}
	int resolve_addr(const sockaddr *src, socklen_t src_len, const sockaddr *dst, socklen_t dst_len,
			 int timeout_ms) noexcept override
	{
		return fwd([&](IdBackend &b) { return b.resolve_addr(src, src_len, dst, dst_len, timeout_ms); });
	}
	int resolve_route(int timeout_ms) noexcept override
	{
		return fwd([&](IdBackend &b) { return b.resolve_route(timeout_ms); });
	}
	int query(unsigned what, Route &out) noexcept override
	{
		return fwd([&](IdBackend &b) { return b.query(what, out); });
	}
	int init_qp_attr(ibv_qp_attr &attr, int &mask) noexcept override
	{
		return fwd([&](IdBackend &b) { return b.init_qp_attr(attr, mask); });
	}
	int connect(const ConnParam &p, const Ece &ece) noexcept override
	{
		return fwd([&](IdBackend &b) { return b.connect(p, ece); });
	}
	int listen(int backlog) noexcept override
	{
		return fwd([&](IdBackend &b) { return b.listen(backlog); });
	}
	int accept(uint64_t uid, const ConnParam &p, const Ece &ece) noexcept override
	{
		return fwd([&](IdBackend &b) { return b.accept(uid, p, ece); });
	}
	int reject(const void *data, uint8_t len, uint8_t reason) noexcept override
	{
		return fwd([&](IdBackend &b) { return b.reject(data, len, reason); });
	}
	int disconnect() noexcept override
	{
		return fwd([&](IdBackend &b) { return b.disconnect(); });
	}
	int notify(uint32_t event) noexcept override
	{
		return fwd([&](IdBackend &b) { return b.notify(event); });
	}
	int join(uint64_t mc_uid, const sockaddr *addr, socklen_t len, uint16_t join_flags,
		 uint32_t &mc_handle) noexcept override
	{
		return fwd([&](IdBackend &b) { return b.join(mc_uid, addr, len, join_flags, mc_handle); });
	}
	int leave(uint32_t mc_handle, uint32_t &reported) noexcept override
	{
		return fwd([&](IdBackend &b) { return b.leave(mc_handle, reported); });
	}
	int set_option(uint32_t level, uint32_t name, void *val, size_t len) noexcept override
	{
		return fwd([&](IdBackend &b) { return b.set_option(level, name, val, len); });
	}
	int migrate(EventSource &to, uint32_t &reported) noexcept override
	{
		if (real_)
			return real_->migrate(to, reported);
		reported = 0;
		src_ = &to; // nothing made yet: the id is made on the new channel
		return 0;
	}
	int write_event(uint32_t event, int32_t status, uint64_t arg) noexcept override
	{
		return fwd([&](IdBackend &b) { return b.write_event(event, status, arg); });
	}

private:
	template <class F> int fwd(F call) noexcept
	{
		if (!real_) {
			int err = 0;
			real_ = kernel::create_id(*src_, uid_, ps_, qpt_, err);
			if (!real_)
				return err ? err : ENOMEM;
		}
		return call(*real_);
	}
	EventSource *src_;
	uint64_t uid_;
	uint16_t ps_;
	uint8_t qpt_;
	std::unique_ptr<IdBackend> real_;
};

std::atomic<bool> g_lazy_kernel_ids{true};

std::unique_ptr<IdBackend> make_backend(Channel &ch, uint64_t uid, uint16_t ps, uint8_t qpt,
					int &err) noexcept
{
	if (ch.kernel && ch.soft && g_lazy_kernel_ids.load(std::memory_order_relaxed)) {
		auto *lazy = new (std::nothrow) LazyKernelId(*ch.kernel, uid, ps, qpt);
		if (!lazy)
			err = ENOMEM;
		return std::unique_ptr<IdBackend>(lazy);
	}
	if (ch.kernel)
		return kernel::create_id(*ch.kernel, uid, ps, qpt, err);
	return soft::create_id(*ch.soft, uid, ps, qpt, err);
}

} // namespace

void set_lazy_kernel_ids(bool on) noexcept { g_lazy_kernel_ids.store(on, std::memory_order_relaxed); }

namespace {

// A backend result (0 or errno) in the API's convention.
int be_ret(int err) noexcept { return seterr(err); }

void to_conn_param(Id &id, ConnParam &dst, const rdma_conn_param *src, uint32_t qp_num,
		   uint8_t srq) noexcept
{
	dst.qp_num = qp_num;
	dst.srq = srq;
	dst.responder_resources = id.responder_resources;
	dst.initiator_depth = id.initiator_depth;
	dst.valid = 1;
	if (!id.connect.empty()) {
		memcpy(dst.private_data, id.connect.data(), id.connect.size());
		dst.private_data_len = static_cast<uint8_t>(id.connect.size());
	}
	if (src) {
		dst.flow_control = src->flow_control;
		dst.retry_count = src->retry_count;
		dst.rnr_retry_count = src->rnr_retry_count;
		if (src->private_data && src->private_data_len) {
			memcpy(dst.private_data + dst.private_data_len, src->private_data,
			       src->private_data_len);
			dst.private_data_len += src->private_data_len;
		}
	} else {
		dst.retry_count = 7;
		dst.rnr_retry_count = 7;
	}
}

// rdma-core's ucma_valid_param: RDMA_PS_TCP ids need either a QP or
// parameters, within the device's limits.
int valid_param(Id &id, const rdma_conn_param *p) noexcept
{
	if (id.pub.ps != RDMA_PS_TCP)
		return 0;
	if (!id.pub.qp && !p)
		return fail(EINVAL);
	if (!p)
		return 0;
	if (!id.dev)
		return fail(EINVAL);
	if (p->responder_resources != RDMA_MAX_RESP_RES &&
	    p->responder_resources > id.dev->max_responder_resources)
		return fail(EINVAL);
	if (p->initiator_depth != RDMA_MAX_INIT_DEPTH &&
	    p->initiator_depth > id.dev->max_initiator_depth)
		return fail(EINVAL);
	return 0;
}

// Private data of the connect prefix plus the caller's must fit the CM's
// 256 bytes (rdma-core copies without checking).
int private_data_fits(Id &id, const rdma_conn_param *p) noexcept
{
	size_t n = id.connect.size() + (p && p->private_data ? p->private_data_len : 0);
	return n <= kMaxPrivateData ? 0 : fail(EINVAL);
}

void set_route_paths(Id &id, std::vector<ibv_sa_path_rec> &paths) noexcept
{
	if (paths.empty())
		return;
	auto *recs = static_cast<ibv_sa_path_rec *>(malloc(sizeof(ibv_sa_path_rec) * paths.size()));
	if (!recs)
		return;
	memcpy(recs, paths.data(), sizeof(ibv_sa_path_rec) * paths.size());
	free(id.pub.route.path_rec);
	id.pub.route.path_rec = recs;
	id.pub.route.num_paths = static_cast<int>(paths.size());
}

int bind_device(Id &id, const Route &r) noexcept
{
	if (id.dev || !r.node_guid)
		return 0;
	if (get_device(id, r.node_guid, r.ibdev_index))
		return -1;
	id.pub.port_num = r.port_num;
	return 0;
}

} // namespace

Id *alloc_id(rdma_event_channel *ch, void *context, rdma_port_space ps, ibv_qp_type qpt) noexcept
{
	auto *id = new (std::nothrow) Id;
	if (!id)
		return nullptr;
	memset(&id->pub, 0, sizeof(id->pub));
	id->pub.context = context;
	id->pub.ps = ps;
	id->pub.qp_type = qpt;
	if (!ch) {
		id->pub.channel = create_channel();
		if (!id->pub.channel) {
			delete id;
			return nullptr;
		}
		id->sync = true;
	} else {
		id->pub.channel = ch;
	}
	return id;
}

void free_id(Id *id) noexcept
{
	if (id->dev)
		put_device(*id);
	if (id->sync)
		destroy_channel(id->pub.channel);
	free(id->pub.route.path_rec);
	if (id->resolved_ai)
		freeaddrinfo(id->resolved_ai);
	delete id;
}

int create_id(rdma_event_channel *ch, rdma_cm_id **out, void *context, rdma_port_space ps,
	      ibv_qp_type qpt) noexcept
{
	if (init())
		return -1;
	Id *id = alloc_id(ch, context, ps, qpt);
	if (!id)
		return fail(ENOMEM);
	int err = 0;
	id->be = make_backend(chan(*id), reinterpret_cast<uintptr_t>(id), static_cast<uint16_t>(ps),
			      static_cast<uint8_t>(qpt), err);
	if (!id->be) {
		free_id(id);
		return fail(err);
	}
	*out = &id->pub;
	return 0;
}

int destroy_id(Id &id) noexcept
{
	uint32_t reported = 0;
	int err = id.be->destroy(reported);
	if (err)
		return fail(err);
	if (id.pub.event)
		ack_event(id.pub.event);
	{
		std::unique_lock<std::mutex> g(id.mu);
		id.cv.wait(g, [&] { return id.events_completed >= reported; });
	}
	id.be.reset();
	free_id(&id);
	return 0;
}

int query_route(Id &id) noexcept
{
	Route r;
	int err = id.be->query(0, r); // 0: the legacy QUERY_ROUTE
	if (err)
		return fail(err);
	set_route_paths(id, r.paths);
	rdma_ib_addr &ib = id.pub.route.addr.addr.ibaddr;
	ib.sgid = r.sgid;
	ib.dgid = r.dgid;
	ib.pkey = r.pkey;
	memcpy(&id.pub.route.addr.src_storage, &r.src, sizeof(sockaddr_in6));
	memcpy(&id.pub.route.addr.dst_storage, &r.dst, sizeof(sockaddr_in6));
	return bind_device(id, r);
}

int query_addr(Id &id) noexcept
{
	Route r;
	int err = id.be->query(QUERY_ADDR, r);
	if (err)
		return fail(err);
	memcpy(&id.pub.route.addr.src_storage, &r.src, sizeof(r.src));
	memcpy(&id.pub.route.addr.dst_storage, &r.dst, sizeof(r.dst));
	bool had = id.dev != nullptr;
	if (bind_device(id, r))
		return -1;
	if (!had && id.dev)
		id.pub.route.addr.addr.ibaddr.pkey = r.pkey;
	return 0;
}

int query_gid(Id &id) noexcept
{
	Route r;
	int err = id.be->query(QUERY_GID, r);
	if (err)
		return fail(err);
	id.pub.route.addr.addr.ibaddr.sgid = r.sgid;
	id.pub.route.addr.addr.ibaddr.dgid = r.dgid;
	return 0;
}

int query_path(Id &id) noexcept
{
	Route r;
	int err = id.be->query(QUERY_PATH, r);
	if (err)
		return fail(err);
	set_route_paths(id, r.paths);
	return 0;
}

int query_req_info(Id &id) noexcept
{
	if (!af_ib_support())
		return query_route(id);
	if (query_addr(id))
		return -1;
	if (id.pub.verbs && id.pub.verbs->device->transport_type == IBV_TRANSPORT_IB &&
	    query_gid(id))
		return -1;
	return query_path(id);
}

int bind_addr(Id &id, const sockaddr *addr, socklen_t len) noexcept
{
	if (choose_backend(id, addr))
		return -1;
	int err = id.be->bind_addr(addr, len);
	if (err) {
		char text[64];
		log::info("bind to %s failed: %s", log::addr_text(addr, text, sizeof(text)), strerror(err));
		return fail(err);
	}
	return af_ib_support() ? query_addr(id) : query_route(id);
}

int resolve_addr(Id &id, const sockaddr *src, socklen_t src_len, const sockaddr *dst,
		 socklen_t dst_len, int timeout_ms) noexcept
{
	if (choose_backend(id, src ? src : dst))
		return -1;
	int err = id.be->resolve_addr(src, src_len, dst, dst_len, timeout_ms);
	if (err) {
		char text[64];
		log::info("resolving %s failed: %s", log::addr_text(dst, text, sizeof(text)), strerror(err));
		return fail(err);
	}
	memcpy(&id.pub.route.addr.dst_storage, dst, dst_len);
	return complete(id);
}

// rdma-core's ucma_set_ib_route: a route from rdma_getaddrinfo (ibacm);
// -1 when it has none, and the kernel is asked instead.
static int set_ib_route(Id &id) noexcept
{
	rdma_addrinfo hint = {}, *rai = nullptr;
	hint.ai_flags = kRaiRouteOnly;
	hint.ai_family = id.pub.route.addr.src_addr.sa_family;
	hint.ai_src_len = addrlen(&id.pub.route.addr.src_addr);
	hint.ai_src_addr = &id.pub.route.addr.src_addr;
	hint.ai_dst_len = addrlen(&id.pub.route.addr.dst_addr);
	hint.ai_dst_addr = &id.pub.route.addr.dst_addr;
	if (getaddrinfo(nullptr, nullptr, &hint, &rai))
		return -1;
	int ret = -1;
	if (rai->ai_route_len)
		ret = set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, rai->ai_route,
				 rai->ai_route_len);
	freeaddrinfo(rai);
	return ret;
}

int resolve_route(Id &id, int timeout_ms) noexcept
{
	if (!id.pub.verbs || !id.pub.verbs->device)
		return fail(EINVAL); // rdma-core dereferences id->verbs here
	if (id.pub.verbs->device->transport_type == IBV_TRANSPORT_IB && set_ib_route(id) == 0)
		return complete(id);
	int err = id.be->resolve_route(timeout_ms);
	if (err)
		return fail(err);
	return complete(id);
}

int init_qp_attr(Id &id, ibv_qp_attr &attr, int &mask) noexcept
{
	return be_ret(id.be->init_qp_attr(attr, mask));
}

int connect(Id &id, const rdma_conn_param *p) noexcept
{
	uint32_t qp_num = p ? p->qp_num : 0;
	uint8_t srq = p ? p->srq : 0;
	if (valid_param(id, p) || private_data_fits(id, p))
		return -1;
	if (!id.dev)
		return fail(EINVAL); // no route resolved: rdma-core would crash
	if (p && p->initiator_depth != RDMA_MAX_INIT_DEPTH)
		id.initiator_depth = p->initiator_depth;
	else
		id.initiator_depth = id.dev->max_initiator_depth;
	if (p && p->responder_resources != RDMA_MAX_RESP_RES)
		id.responder_resources = p->responder_resources;
	else
		id.responder_resources = id.dev->max_responder_resources;
	if (id.pub.qp) {
		qp_num = id.pub.qp->qp_num;
		srq = id.pub.qp->srq != nullptr;
		ibv_ece ece = {};
		if (!ibv_query_ece(id.pub.qp, &ece) && (ece.vendor_id || ece.options))
			id.local_ece = ece;
	}
	ConnParam cp;
	to_conn_param(id, cp, p, qp_num, srq);
	Ece ece;
	ece.vendor_id = id.local_ece.vendor_id;
	ece.attr_mod = id.local_ece.options;
	int err = id.be->connect(cp, ece);
	if (err)
		return fail(err);
	id.connect.clear();
	return complete(id);
}

int process_conn_resp(Id &id) noexcept
{
	if (modify_qp_rtr(id, RDMA_MAX_RESP_RES) || modify_qp_rts(id, RDMA_MAX_INIT_DEPTH)) {
		int err = errno;
		modify_qp_err(id);
		return fail(err);
	}
	ConnParam none; // valid == 0: only finishes the handshake (sends RTU)
	int err = id.be->accept(0, none, Ece{});
	if (err) {
		modify_qp_err(id);
		return fail(err);
	}
	return 0;
}

int establish(Id &id) noexcept
{
	if (id.pub.qp)
		return fail(EINVAL);
	return process_conn_resp(id);
}

int listen(Id &id, int backlog) noexcept
{
	int err = id.be->listen(backlog);
	if (err)
		return fail(err);
	return af_ib_support() ? query_addr(id) : query_route(id);
}

int accept(Id &id, const rdma_conn_param *p) noexcept
{
	if (!id.pub.qp && !p)
		return fail(EINVAL); // rdma-core dereferences the missing parameters
	uint32_t qp_num = id.pub.qp ? id.pub.qp->qp_num : p->qp_num;
	uint8_t srq = id.pub.qp ? id.pub.qp->srq != nullptr : p->srq;
	if (valid_param(id, p) || private_data_fits(id, p))
		return -1;
	if (!id.dev)
		return fail(EINVAL);
	if (!p || p->initiator_depth == RDMA_MAX_INIT_DEPTH)
		id.initiator_depth = std::min(id.initiator_depth, id.dev->max_initiator_depth);
	else
		id.initiator_depth = p->initiator_depth;
	if (!p || p->responder_resources == RDMA_MAX_RESP_RES)
		id.responder_resources =
		    std::min(id.responder_resources, id.dev->max_responder_resources);
	else
		id.responder_resources = p->responder_resources;

	bool ud = id.pub.qp_type == IBV_QPT_UD;
	if (!ud) {
		if (modify_qp_rtr(id, id.responder_resources) ||
		    modify_qp_rts(id, id.initiator_depth))
			return -1;
	}
	ConnParam cp;
	to_conn_param(id, cp, p, qp_num, srq);
	Ece ece;
	ece.vendor_id = id.remote_ece.vendor_id;
	ece.attr_mod = id.local_ece.options & id.remote_ece.options;
	int err = id.be->accept(reinterpret_cast<uintptr_t>(&id), cp, ece);
	if (err) {
		modify_qp_err(id);
		return fail(err);
	}
	if (ud)
		return 0;
	return complete(id);
}

int reject(Id &id, const void *data, uint8_t len, uint8_t reason) noexcept
{
	return be_ret(id.be->reject(data && len ? data : nullptr, data ? len : 0, reason));
}

int notify(Id &id, ibv_event_type event) noexcept
{
	return be_ret(id.be->notify(static_cast<uint32_t>(event)));
}

int disconnect(Id &id) noexcept
{
	if (!id.pub.verbs || !id.pub.verbs->device)
		return fail(EINVAL);
	int ret;
	switch (id.pub.verbs->device->transport_type) {
	case IBV_TRANSPORT_IB:
		ret = modify_qp_err(id);
		break;
	case IBV_TRANSPORT_IWARP:
		ret = modify_qp_sqd(id);
		break;
	default:
		return fail(EINVAL);
	}
	if (ret)
		return ret;
	int err = id.be->disconnect();
	if (err)
		return fail(err);
	return complete(id);
}

int join_multicast(Id &id, const sockaddr *addr, socklen_t len, uint16_t flags,
		   void *context) noexcept
{
	Multicast *mc;
	try {
		auto owned = std::make_unique<Multicast>();
		mc = owned.get();
		mc->id = &id;
		mc->context = context;
		mc->join_flags = flags;
		memcpy(&mc->addr, addr, len);
		mc->addrlen = len;
		std::lock_guard<std::mutex> g(id.mu);
		id.mcs.insert(id.mcs.begin(), std::move(owned));
	} catch (...) {
		return fail(ENOMEM);
	}
	uint32_t handle = 0;
	int err = id.be->join(reinterpret_cast<uintptr_t>(mc), addr, len, flags, handle);
	if (err) {
		std::lock_guard<std::mutex> g(id.mu);
		std::erase_if(id.mcs, [&](const auto &m) { return m.get() == mc; });
		return fail(err);
	}
	mc->handle = handle;
	return complete(id);
}

int leave_multicast(Id &id, const sockaddr *addr, socklen_t len) noexcept
{
	std::unique_ptr<Multicast> mc;
	{
		std::lock_guard<std::mutex> g(id.mu);
		for (auto it = id.mcs.begin(); it != id.mcs.end(); ++it) {
			if (!memcmp(&(*it)->addr, addr, len)) {
				mc = std::move(*it);
				id.mcs.erase(it);
				break;
			}
		}
	}
	if (!mc)
		return fail(EADDRNOTAVAIL);
	if (id.pub.qp && mc->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		ibv_detach_mcast(id.pub.qp, &mc->mgid, mc->mlid);
	uint32_t reported = 0;
	int err = id.be->leave(mc->handle, reported);
	if (err)
		return fail(err);
	std::unique_lock<std::mutex> g(id.mu);
	mc->cv.wait(g, [&] { return mc->events_completed >= reported; });
	return 0;
}

int set_option(Id &id, int level, int name, void *val, size_t len) noexcept
{
	return be_ret(id.be->set_option(static_cast<uint32_t>(level), static_cast<uint32_t>(name), val,
					len));
}

int migrate_id(Id &id, rdma_event_channel *to) noexcept
{
	if (id.sync && !to)
		return fail(EINVAL);
	bool sync = to == nullptr;
	if (sync) {
		to = create_channel();
		if (!to)
			return -1;
	}
	Channel &dst = *priv(to);
	EventSource *src = std::strcmp(id.be->kind(), "soft") == 0 ? dst.soft.get() : dst.kernel.get();
	// (A channel without a source of the id's kind cannot take it.)
	uint32_t reported = 0;
	int err = src ? id.be->migrate(*src, reported) : EINVAL;
	if (err) {
		if (sync)
			destroy_channel(to);
		return fail(err);
	}
	if (id.sync) {
		if (id.pub.event) {
			ack_event(id.pub.event);
			id.pub.event = nullptr;
		}
		destroy_channel(id.pub.channel);
	}
	std::unique_lock<std::mutex> g(id.mu);
	id.sync = sync;
	id.pub.channel = to;
	id.cv.wait(g, [&] { return id.events_completed >= reported; });
	return 0;
}

} // namespace ov::cm
