#include "core/xrc/legacy_xrc.h"

#include "core/verbs/verbs.h"

#include <infiniband/driver.h>

#include <cerrno>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <utility>

namespace ov::legacy_xrc {
namespace {

// A legacy domain: the public struct first, so the pointer handed out is
// also the pointer to this object.
struct Domain {
	ibv_xrc_domain pub;
	ibv_xrcd *xrcd;
};

class Registry {
public:
	static Registry &get()
	{
		static Registry *r = new Registry; // never destroyed: used at exit
		return *r;
	}

	std::mutex mu;
	std::set<Domain *> domains;
	// (domain, QP number) -> this process's handle of that receive QP.
	std::map<std::pair<Domain *, uint32_t>, ibv_qp *> regs;
	// Events handed to the application and not yet acknowledged:
	// QP number -> handles (one entry per outstanding event).
	std::multimap<uint32_t, ibv_qp *> pending_events;

	Domain *find_domain(ibv_xrc_domain *d)
	{
		auto *dom = reinterpret_cast<Domain *>(d);
		return domains.count(dom) ? dom : nullptr;
	}

	bool has_registrations(Domain *dom) const
	{
		for (const auto &r : regs)
			if (r.first.first == dom)
				return true;
		return false;
	}

	bool is_registered_qp(ibv_qp *qp, uint32_t *qpn) const
	{
		for (const auto &r : regs)
			if (r.second == qp) {
				*qpn = r.first.second;
				return true;
			}
		return false;
	}
};

bool is_qp_event(ibv_event_type t)
{
	return ov::verbs::event_element(t) == ov::verbs::EventElement::Qp;
}

// The kernel handle of an XRCD when the provider keeps one (verbs_xrcd).
uint32_t xrcd_handle(ibv_xrcd *xrcd)
{
	auto *v = reinterpret_cast<verbs_xrcd *>(xrcd);
	return (v->comp_mask & VERBS_XRCD_HANDLE) ? v->handle : 0;
}

} // namespace

ibv_xrc_domain *open_domain(ibv_context *context, int fd, int oflag)
{
	// ibv_open_xrc_domain(3): only O_CREAT and O_EXCL have a meaning.
	if (!context || (oflag & ~(O_CREAT | O_EXCL))) {
		errno = EINVAL;
		return nullptr;
	}
	auto *dom = new (std::nothrow) Domain{};
	if (!dom) {
		errno = ENOMEM;
		return nullptr;
	}
	ibv_xrcd_init_attr attr = {};
	attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	attr.fd = fd;
	attr.oflags = oflag;
	dom->xrcd = ibv_open_xrcd(context, &attr);
	if (!dom->xrcd) {
		int err = errno ? errno : EINVAL;
		delete dom;
		errno = err;
		return nullptr;
	}
	dom->pub.context = context;
	dom->pub.handle = xrcd_handle(dom->xrcd);

	Registry &r = Registry::get();
	try {
		std::lock_guard<std::mutex> lock(r.mu);
		r.domains.insert(dom);
	} catch (...) {
		ibv_close_xrcd(dom->xrcd);
		delete dom;
		errno = ENOMEM;
		return nullptr;
	}
	return &dom->pub;
}

int close_domain(ibv_xrc_domain *d)
{
	Registry &r = Registry::get();
	std::lock_guard<std::mutex> lock(r.mu);
	Domain *dom = r.find_domain(d);
	if (!dom)
		return EINVAL;
	if (r.has_registrations(dom))
		return EBUSY;
	int ret = ibv_close_xrcd(dom->xrcd);
	if (ret)
		return ret;
	r.domains.erase(dom);
	delete dom;
	return 0;
}

ibv_srq *create_srq(ibv_pd *pd, ibv_xrc_domain *d, ibv_cq *cq,
		    ibv_srq_init_attr *attr)
{
	if (!pd || !cq || !attr) {
		errno = EINVAL;
		return nullptr;
	}
	ibv_xrcd *xrcd;
	{
		Registry &r = Registry::get();
		std::lock_guard<std::mutex> lock(r.mu);
		Domain *dom = r.find_domain(d);
		if (!dom || dom->pub.context != pd->context) {
			errno = EINVAL;
			return nullptr;
		}
		xrcd = dom->xrcd;
	}
	ibv_srq_init_attr_ex ex = {};
	ex.srq_context = attr->srq_context;
	ex.attr = attr->attr;
	ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		       IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	ex.srq_type = IBV_SRQT_XRC;
	ex.pd = pd;
	ex.xrcd = xrcd;
	ex.cq = cq;
	ibv_srq *srq = ibv_create_srq_ex(pd->context, &ex);
	if (srq)
		attr->attr = ex.attr;
	return srq;
}

int create_rcv_qp(ibv_xrc_rcv_qp_init_attr *init_attr, uint32_t *qpn)
{
	if (!init_attr || !qpn)
		return EINVAL;
	Registry &r = Registry::get();
	Domain *dom;
	{
		std::lock_guard<std::mutex> lock(r.mu);
		dom = r.find_domain(init_attr->xrc_domain);
		if (!dom)
			return EINVAL;
	}
	ibv_qp_init_attr_ex ex = {};
	ex.qp_context = init_attr->qp_context;
	ex.qp_type = IBV_QPT_XRC_RECV;
	ex.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	ex.xrcd = dom->xrcd;
	ibv_qp *qp = ibv_create_qp_ex(dom->pub.context, &ex);
	if (!qp)
		return errno ? errno : EINVAL;
	try {
		std::lock_guard<std::mutex> lock(r.mu);
		r.regs[{dom, qp->qp_num}] = qp;
	} catch (...) {
		ibv_destroy_qp(qp);
		return ENOMEM;
	}
	*qpn = qp->qp_num;
	return 0;
}

int reg_rcv_qp(ibv_xrc_domain *d, uint32_t qpn)
{
	Registry &r = Registry::get();
	Domain *dom;
	{
		std::lock_guard<std::mutex> lock(r.mu);
		dom = r.find_domain(d);
		if (!dom)
			return EINVAL;
		if (r.regs.count({dom, qpn}))
			return 0; // already registered: nothing changes
	}
	ibv_qp_open_attr attr = {};
	attr.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			 IBV_QP_OPEN_ATTR_TYPE;
	attr.qp_num = qpn;
	attr.xrcd = dom->xrcd;
	attr.qp_type = IBV_QPT_XRC_RECV;
	ibv_qp *qp = ibv_open_qp(dom->pub.context, &attr);
	if (!qp) {
		int err = errno;
		// "No such receive QP" is EINVAL in this API, whatever the device
		// said; lack of support and resource errors pass through.
		if (err == ENOENT || err == ENODEV || err == 0)
			err = EINVAL;
		return err;
	}
	std::lock_guard<std::mutex> lock(r.mu);
	try {
		auto res = r.regs.emplace(std::make_pair(dom, qpn), qp);
		if (!res.second) {
			// Another thread of this process registered meanwhile.
			ibv_destroy_qp(qp);
		}
	} catch (...) {
		ibv_destroy_qp(qp);
		return ENOMEM;
	}
	return 0;
}

int unreg_rcv_qp(ibv_xrc_domain *d, uint32_t qpn)
{
	Registry &r = Registry::get();
	ibv_qp *qp;
	{
		std::lock_guard<std::mutex> lock(r.mu);
		Domain *dom = r.find_domain(d);
		if (!dom)
			return EINVAL;
		auto it = r.regs.find({dom, qpn});
		if (it == r.regs.end())
			return EINVAL;
		qp = it->second;
		r.regs.erase(it);
	}
	// Destroy outside the lock: a kernel provider may wait here until the
	// application acknowledged the QP's events (restore_event takes the lock).
	int ret = ibv_destroy_qp(qp);
	if (ret) {
		std::lock_guard<std::mutex> lock(r.mu);
		try {
			r.regs.emplace(std::make_pair(reinterpret_cast<Domain *>(d), qpn), qp);
		} catch (...) {
		}
	}
	return ret;
}

namespace {
ibv_qp *lookup(ibv_xrc_domain *d, uint32_t qpn)
{
	Registry &r = Registry::get();
	std::lock_guard<std::mutex> lock(r.mu);
	Domain *dom = r.find_domain(d);
	if (!dom)
		return nullptr;
	auto it = r.regs.find({dom, qpn});
	return it == r.regs.end() ? nullptr : it->second;
}
} // namespace

int modify_rcv_qp(ibv_xrc_domain *d, uint32_t qpn, ibv_qp_attr *attr, int mask)
{
	if (!attr)
		return EINVAL;
	ibv_qp *qp = lookup(d, qpn);
	if (!qp)
		return EINVAL;
	return ibv_modify_qp(qp, attr, mask);
}

int query_rcv_qp(ibv_xrc_domain *d, uint32_t qpn, ibv_qp_attr *attr, int mask,
		 ibv_xrc_rcv_qp_init_attr *init_attr)
{
	if (!attr || !init_attr)
		return EINVAL;
	ibv_qp *qp = lookup(d, qpn);
	if (!qp)
		return EINVAL;
	ibv_qp_init_attr init = {};
	int ret = ibv_query_qp(qp, attr, mask, &init);
	if (ret)
		return ret;
	init_attr->qp_context = init.qp_context;
	init_attr->send_cq = init.send_cq;
	init_attr->recv_cq = init.recv_cq;
	init_attr->srq = init.srq;
	init_attr->cap = init.cap;
	init_attr->qp_type = init.qp_type;
	init_attr->sq_sig_all = init.sq_sig_all;
	init_attr->xrc_domain = d;
	return 0;
}

void translate_event(ibv_async_event *event) noexcept
{
	if (!event || !is_qp_event(event->event_type) || !event->element.qp)
		return;
	Registry &r = Registry::get();
	std::lock_guard<std::mutex> lock(r.mu);
	uint32_t qpn;
	if (!r.is_registered_qp(event->element.qp, &qpn))
		return;
	try {
		r.pending_events.emplace(qpn, event->element.qp);
	} catch (...) {
		return; // leave the event untranslated rather than lose the QP
	}
	event->event_type = static_cast<ibv_event_type>(
		static_cast<unsigned>(event->event_type) | IBV_XRC_QP_EVENT_FLAG);
	event->element.qp = nullptr;
	event->element.port_num = static_cast<int>(qpn);
}

void restore_event(ibv_async_event *event) noexcept
{
	if (!event || !(static_cast<unsigned>(event->event_type) & IBV_XRC_QP_EVENT_FLAG))
		return;
	Registry &r = Registry::get();
	std::lock_guard<std::mutex> lock(r.mu);
	uint32_t qpn = static_cast<uint32_t>(event->element.port_num);
	auto it = r.pending_events.find(qpn);
	if (it == r.pending_events.end())
		return;
	event->event_type = static_cast<ibv_event_type>(
		static_cast<unsigned>(event->event_type) & ~IBV_XRC_QP_EVENT_FLAG);
	event->element.qp = it->second;
	r.pending_events.erase(it);
}

} // namespace ov::legacy_xrc
