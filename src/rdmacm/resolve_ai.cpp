// rdma-core 64's asynchronous address resolution and application events
// (RDMACM_1.4): rdma_resolve_addrinfo(3) reports its result as an event of
// the id's channel, rdma_query_addrinfo(3) hands the result over, and
// rdma_write_cm_event(3) queues an event of the application's own.
//
// The name-service path resolves at once (rdma_getaddrinfo) and announces
// the result through the id's CM: the library writes an INTERNAL event whose
// argument is RDMA_CM_EVENT_ADDRINFO_RESOLVED, and get_event reports it as
// that event, so the answer arrives in order with the id's other events and
// wakes a thread blocked on the channel (rdma-core 64's cma.c does the same
// with the kernel CM's WRITE_CM_EVENT command; the software CM queues the
// event itself). The subnet administrator's path (RAI_SA: service records)
// needs an SA: neither the software CM nor this library's kernel backend
// asks one, so it is refused with EOPNOTSUPP (see the man page).
#include "cm.h"

#if _OPENVERBS_ABI >= 64

namespace ov::cm {

namespace {

void clear_resolving(Id &id) noexcept
{
	std::lock_guard<std::mutex> g(id.mu);
	id.resolving_ai = false;
}

int resolve_dns(Id &id, const char *node, const char *service, const rdma_addrinfo *hints) noexcept
{
	rdma_addrinfo *res = nullptr;
	if (getaddrinfo(node, service, hints, &res))
		return -1;
	{
		std::lock_guard<std::mutex> g(id.mu);
		id.resolved_ai = res;
	}
	int err = id.be->write_event(RDMA_CM_EVENT_INTERNAL, 0, RDMA_CM_EVENT_ADDRINFO_RESOLVED);
	if (err) {
		std::lock_guard<std::mutex> g(id.mu);
		id.resolved_ai = nullptr;
		freeaddrinfo(res);
		return fail(err);
	}
	return complete(id);
}

} // namespace

int resolve_addrinfo(Id &id, const char *node, const char *service,
		     const rdma_addrinfo *hints) noexcept
{
	{
		std::lock_guard<std::mutex> g(id.mu);
		if (id.resolving_ai)
			return fail(EBUSY);
		id.resolving_ai = true;
	}
	int ret;
	if (hints && (hints->ai_flags & RAI_SA)) {
		// With RAI_DNS or a node rdma-core refuses it too (ENOTSUP, the
		// same value); without a service there is nothing to look up.
		// Otherwise the records would come from an SA, which no CM
		// of this library asks (EOPNOTSUPP).
		if (!(hints->ai_flags & RAI_DNS) && !node && !service)
			ret = fail(EINVAL);
		else
			ret = fail(EOPNOTSUPP);
	} else
		ret = resolve_dns(id, node, service, hints);
	if (ret)
		clear_resolving(id); // errno kept
	return ret;
}

int query_addrinfo(Id &id, rdma_addrinfo **info) noexcept
{
	std::lock_guard<std::mutex> g(id.mu);
	if (!id.resolving_ai || !id.resolved_ai)
		return fail(ENOENT);
	*info = id.resolved_ai;
	id.resolved_ai = nullptr;
	id.resolving_ai = false;
	return 0;
}

int write_cm_event(Id &id, rdma_cm_event_type event, int status, uint64_t arg) noexcept
{
	return seterr(id.be->write_event(event, status, arg));
}

bool process_addrinfo_event(Event &ev, const RawEvent &raw) noexcept
{
	Id &id = *ev.id_priv;
	switch (raw.event) {
	case RDMA_CM_EVENT_USER:
		ev.pub.param.arg = raw.arg;
		return true;
	case RDMA_CM_EVENT_INTERNAL:
		if (raw.arg != RDMA_CM_EVENT_ADDRINFO_RESOLVED) {
			errno = EBADE; // not one of the library's: cma.c's answer
			return false;
		}
		ev.pub.event = RDMA_CM_EVENT_ADDRINFO_RESOLVED;
		break;
	case RDMA_CM_EVENT_ADDRINFO_ERROR:
		clear_resolving(id);
		return true;
	default:
		break;
	}
	// ADDRINFO_RESOLVED: the result is there unless the CM resolved on
	// the SA's behalf, which this library never asks for.
	std::lock_guard<std::mutex> g(id.mu);
	if (!id.resolved_ai) {
		ev.pub.event = RDMA_CM_EVENT_ADDRINFO_ERROR;
		ev.pub.status = ENOENT;
		id.resolving_ai = false;
	}
	return true;
}

} // namespace ov::cm

#endif
