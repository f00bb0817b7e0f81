// Event channels and events (rdma-core 44 cma.c: rdma_create_event_channel,
// rdma_get_cm_event, rdma_ack_cm_event, ucma_complete). A channel has up to
// two sources of events: the kernel CM's fd and the software CM's. With one
// source its fd is the channel's fd, so the channel behaves exactly like
// rdma-core's (blocking or O_NONBLOCK reads, poll, epoll); with both, the
// channel's fd is an epoll fd over the two and reads honour its O_NONBLOCK.
#include "cm.h"
#include "hooks.h"
#include "log.h"

#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <unordered_set>

namespace ov::cm {

namespace {

// The channels an application may name. Another thread may still be inside
// rdma_get_cm_event on a channel being destroyed (rping's event thread is,
// each time rping exits): with the kernel's CM such a thread stays blocked
// in its write to the closed file until the process ends, and here it keeps
// waiting on the channel's sources, which stay open, with the channel's
// memory, until the last such thread leaves. A call naming a blocking
// channel destroyed just before (one of the last kRecent) waits the same
// way; any other unknown channel is refused with EBADF, as the kernel's CM
// refuses a closed file.
constexpr unsigned kRecent = 16;
struct Destroyed {
	const Channel *ch; // an address only, never dereferenced
	bool blocking;
};
std::mutex g_chan_mu; // guards the three below and Channel::users
Destroyed g_recent[kRecent] = {};
unsigned g_recent_next = 0;

// Never destroyed: a thread may call in while the process exits.
std::unordered_set<Channel *> &live_channels()
{
	static auto *live = new std::unordered_set<Channel *>;
	return *live;
}

void free_channel(Channel *ch) noexcept
{
	if (ch->epfd >= 0)
		close(ch->epfd);
	delete ch; // the sources close their fds
}

// Counts the caller in as a user of ch: 0; ESHUTDOWN when ch is a blocking
// channel destroyed just before; EBADF when it names no channel.
int enter_channel(Channel *ch) noexcept
{
	std::lock_guard<std::mutex> g(g_chan_mu);
	if (live_channels().count(ch)) {
		ch->users++;
		return 0;
	}
	for (const Destroyed &d : g_recent)
		if (d.ch == ch && d.blocking)
			return ESHUTDOWN;
	return EBADF;
}

void leave_channel(Channel *ch) noexcept
{
	bool last;
	{
		std::lock_guard<std::mutex> g(g_chan_mu);
		last = --ch->users == 0 && ch->dead.load(std::memory_order_relaxed);
	}
	if (last)
		free_channel(ch);
}

// What a thread blocked in the kernel CM's read of a closed channel does:
// wait until the process ends.
[[noreturn]] void wait_forever() noexcept
{
	for (;;)
		pause();
}

} // namespace

rdma_event_channel *create_channel() noexcept
{
	if (init())
		return nullptr;
	auto *ch = new (std::nothrow) Channel;
	if (!ch) {
		errno = ENOMEM;
		return nullptr;
	}
	ch->pub.fd = -1;
	int kerr = 0, serr = 0;
	ch->kernel = kernel::open_source(kerr);
	if (soft::enabled()) {
		soft::prepare();
		ch->soft = soft::open_source(serr);
	}
	if (!ch->kernel && !ch->soft) {
		log::err("cannot create an event channel: /dev/infiniband/rdma_cm: %s%s", strerror(kerr),
			 soft::enabled() ? "; software CM unavailable" : " (software devices are off)");
		delete ch;
		errno = kerr ? kerr : serr;
		return nullptr;
	}
	if (ch->kernel && ch->soft) {
		ch->epfd = epoll_create1(EPOLL_CLOEXEC);
		epoll_event ev = {};
		ev.events = EPOLLIN;
		if (ch->epfd < 0 || epoll_ctl(ch->epfd, EPOLL_CTL_ADD, ch->kernel->fd(), &ev) ||
		    epoll_ctl(ch->epfd, EPOLL_CTL_ADD, ch->soft->fd(), &ev)) {
			int err = errno;
			if (ch->epfd >= 0)
				close(ch->epfd);
			delete ch;
			errno = err;
			return nullptr;
		}
		ch->pub.fd = ch->epfd;
	} else {
		ch->pub.fd = ch->kernel ? ch->kernel->fd() : ch->soft->fd();
	}
	try {
		std::lock_guard<std::mutex> g(g_chan_mu);
		live_channels().insert(ch);
		for (Destroyed &d : g_recent) // an earlier channel at this address
			if (d.ch == ch)
				d = Destroyed{};
	} catch (...) {
		free_channel(ch);
		errno = ENOMEM;
		return nullptr;
	}
	return &ch->pub;
}

void destroy_channel(rdma_event_channel *pub) noexcept
{
	Channel *ch = priv(pub);
	bool now;
	{
		std::lock_guard<std::mutex> g(g_chan_mu);
		if (!live_channels().erase(ch)) {
			log::warn("rdma_destroy_event_channel: %p is not an open channel", (void *)pub);
			return;
		}
		bool blocking = !(fcntl(pub->fd, F_GETFL) & O_NONBLOCK);
		ch->dead.store(true, std::memory_order_relaxed);
		g_recent[g_recent_next++ % kRecent] = Destroyed{ch, blocking};
		now = ch->users == 0;
	}
	if (now)
		free_channel(ch);
}

// With both sources, the one that gave the last event is looked at first,
// so a program whose ids are all on one kind of device pays no look at the
// other per event (each look at an empty source is a system call: poll(2)
// of the kernel CM's fd, epoll_wait(2) of the software CM's), and the fd's
// flags are read only when both were empty. After kFairStreak events in a
// row from the source looked at first, the other goes first once, so
// neither can keep the other's events waiting. Events of different ids
// have no order between them (they do not with the kernel's CM either, for
// ids on different devices); each source keeps its own in order. In the test
// bed's guest the two looks per event of the software CM (fcntl, poll of
// the kernel CM's fd) were half of what rdma_get_cm_event cost there.
int Channel::next(RawEvent &ev) noexcept
{
	if (!kernel || !soft) {
		EventSource &s = kernel ? *kernel : *soft;
		return s.next(ev, true); // the source's fd is pub.fd: its flags apply
	}
	constexpr uint32_t kFairStreak = 64;
	for (;;) {
		bool sf = soft_first.load(std::memory_order_relaxed);
		if (streak.load(std::memory_order_relaxed) >= kFairStreak) {
			sf = !sf; // one look the other way round
			streak.store(0, std::memory_order_relaxed);
		}
		EventSource *order[2] = {sf ? soft.get() : kernel.get(), sf ? kernel.get() : soft.get()};
		for (int i = 0; i < 2; i++) {
			int ret = order[i]->next(ev, false);
			if (ret == EAGAIN)
				continue;
			bool now_soft = order[i] == soft.get();
			if (now_soft == soft_first.load(std::memory_order_relaxed)) {
				streak.fetch_add(1, std::memory_order_relaxed);
			} else {
				soft_first.store(now_soft, std::memory_order_relaxed);
				streak.store(0, std::memory_order_relaxed);
			}
			return ret;
		}
		if (fcntl(pub.fd, F_GETFL) & O_NONBLOCK)
			return EAGAIN;
		pollfd p = {pub.fd, POLLIN, 0};
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return errno;
	}
}

void complete_event(Id &id) noexcept
{
	std::lock_guard<std::mutex> g(id.mu);
	id.events_completed++;
	id.cv.notify_all();
}

static void complete_mc_event(Multicast &mc) noexcept
{
	std::lock_guard<std::mutex> g(mc.id->mu);
	mc.events_completed++;
	mc.cv.notify_all();
}

int ack_event(rdma_cm_event *pub) noexcept
{
	Event *ev = priv(pub);
	complete_event(*ev->id_priv);
	if (ev->mc)
		complete_mc_event(*ev->mc);
	delete ev;
	return 0;
}

namespace {

void copy_conn(Event &ev, const ConnParam &src) noexcept
{
	rdma_conn_param &dst = ev.pub.param.conn;
	dst.private_data_len = src.private_data_len;
	if (src.private_data_len) {
		dst.private_data = ev.private_data;
		memcpy(ev.private_data, src.private_data, src.private_data_len);
	}
	dst.responder_resources = src.responder_resources;
	dst.initiator_depth = src.initiator_depth;
	dst.flow_control = src.flow_control;
	dst.retry_count = src.retry_count;
	dst.rnr_retry_count = src.rnr_retry_count;
	dst.srq = src.srq;
	dst.qp_num = src.qp_num;
}

void copy_ud(Event &ev, const UdParam &src) noexcept
{
	rdma_ud_param &dst = ev.pub.param.ud;
	dst.private_data_len = src.private_data_len;
	if (src.private_data_len) {
		dst.private_data = ev.private_data;
		memcpy(ev.private_data, src.private_data, src.private_data_len);
	}
	dst.ah_attr = src.ah_attr;
	dst.qp_num = src.qp_num;
	dst.qkey = src.qkey;
}

bool is_ud(ibv_qp_type t) noexcept { return t == IBV_QPT_UD; }

void copy_param(Event &ev, Id &id, const RawEvent &raw) noexcept
{
	if (is_ud(id.pub.qp_type))
		copy_ud(ev, raw.ud);
	else
		copy_conn(ev, raw.conn);
}

void process_addr_resolved(Event &ev) noexcept
{
	Id &id = *ev.id_priv;
	if (af_ib_support()) {
		ev.pub.status = query_addr(id); // 0 or -1, as rdma-core reports it
		if (!ev.pub.status && id.pub.verbs &&
		    id.pub.verbs->device->transport_type == IBV_TRANSPORT_IB)
			ev.pub.status = query_gid(id); // 0 or -1, as rdma-core reports it
	} else {
		ev.pub.status = query_route(id); // 0 or -1, as rdma-core reports it
	}
	if (ev.pub.status)
		ev.pub.event = RDMA_CM_EVENT_ADDR_ERROR;
}

void process_route_resolved(Event &ev) noexcept
{
	Id &id = *ev.id_priv;
	if (af_ib_support())
		ev.pub.status = query_path(id); // 0 or -1, as rdma-core reports it
	else
		ev.pub.status = query_route(id); // 0 or -1, as rdma-core reports it
	if (ev.pub.status)
		ev.pub.event = RDMA_CM_EVENT_ROUTE_ERROR;
}

// A connection request: a new id on the listener's channel, with the
// listener's context (cma.c ucma_process_conn_req). 0, or -1 when the
// request was dropped (the listener's event is then counted as acknowledged).
int process_conn_req(Event &ev, RawEvent &raw) noexcept
{
	Id &listen = *ev.id_priv;
	Id *id = alloc_id(listen.pub.channel, listen.pub.context, listen.pub.ps, listen.pub.qp_type);
	if (!id) {
		log::err("connection request dropped: no memory for a new id");
		// Tell the CM: destroying the kernel's new id refuses the request.
		uint32_t reported = 0;
		if (raw.child)
			raw.child->destroy(reported);
		complete_event(listen);
		return -1;
	}
	id->be = std::move(raw.child);
	ev.pub.listen_id = &listen.pub;
	ev.pub.id = &id->pub;
	id->initiator_depth = ev.pub.param.conn.initiator_depth;
	id->responder_resources = ev.pub.param.conn.responder_resources;
	id->remote_ece.vendor_id = raw.ece.vendor_id;
	id->remote_ece.options = raw.ece.attr_mod;
	if (listen.sync && migrate_id(*id, nullptr))
		goto drop;
	if (query_req_info(*id))
		goto drop;
	return 0;
drop:
	log::err("connection request dropped: %s", strerror(errno));
	destroy_id(*id);
	complete_event(listen);
	return -1;
}

int process_join(Event &ev) noexcept
{
	Multicast &mc = *ev.mc;
	mc.mgid = ev.pub.param.ud.ah_attr.grh.dgid;
	mc.mlid = ev.pub.param.ud.ah_attr.dlid;
	Id &id = *ev.id_priv;
	if (!id.pub.qp || mc.join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return 0; // a send-only member attaches no QP
	return seterr(ibv_attach_mcast(id.pub.qp, &mc.mgid, mc.mlid));
}

} // namespace

int get_event(rdma_event_channel *pub, rdma_cm_event **out) noexcept
{
	if (init())
		return -1;
	if (!out)
		return fail(EINVAL);
	Channel *ch = priv(pub);
	if (int err = enter_channel(ch)) {
		if (err == ESHUTDOWN)
			wait_forever();
		return fail(err);
	}
	struct Leave {
		Channel *ch;
		~Leave() { leave_channel(ch); }
	} leave{ch};
	auto *ev = new (std::nothrow) Event;
	if (!ev)
		return fail(ENOMEM);
	for (;;) {
		memset(&ev->pub, 0, sizeof(ev->pub));
		ev->id_priv = nullptr;
		ev->mc = nullptr;
		RawEvent raw;
		int ret = ch->next(raw);
		if (ret) {
			delete ev;
			return fail(ret);
		}
		if (ch->dead.load(std::memory_order_relaxed))
			continue; // destroyed meanwhile: no identifier is left to report to
		if (!raw.uid) {
			// Only connection requests may lack a uid, and those carry
			// the listener's: anything else cannot be matched.
			log::warn("discarding an event without an id (event %u, kernel id %u)", raw.event,
				  raw.handle);
			continue;
		}
		ev->pub.event = static_cast<rdma_cm_event_type>(raw.event);
		if (raw.event == RDMA_CM_EVENT_MULTICAST_JOIN ||
		    raw.event == RDMA_CM_EVENT_MULTICAST_ERROR) {
			ev->mc = reinterpret_cast<Multicast *>(raw.uid);
			ev->id_priv = ev->mc->id;
		} else {
			ev->id_priv = reinterpret_cast<Id *>(raw.uid);
		}
		Id &id = *ev->id_priv;
		ev->pub.id = &id.pub;
		ev->pub.status = raw.status;

		switch (raw.event) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			process_addr_resolved(*ev);
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED:
			process_route_resolved(*ev);
			break;
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			copy_param(*ev, id, raw);
			if (process_conn_req(*ev, raw))
				continue;
			break;
		case RDMA_CM_EVENT_CONNECT_RESPONSE:
			copy_conn(*ev, raw.conn);
			id.remote_ece.vendor_id = raw.ece.vendor_id;
			id.remote_ece.options = raw.ece.attr_mod;
			if (id.pub.qp) {
				ev->pub.status = process_conn_resp(id); // 0 or -1, as rdma-core reports it
				if (!ev->pub.status) {
					ev->pub.event = RDMA_CM_EVENT_ESTABLISHED;
				} else {
					ev->pub.event = RDMA_CM_EVENT_CONNECT_ERROR;
					id.connect_error = true;
				}
			}
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			copy_param(*ev, id, raw);
			break;
		case RDMA_CM_EVENT_REJECTED:
			if (id.connect_error) {
				complete_event(id);
				continue;
			}
			copy_conn(*ev, raw.conn);
			modify_qp_err(id);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			if (id.connect_error) {
				complete_event(id);
				continue;
			}
			copy_conn(*ev, raw.conn);
			break;
		case RDMA_CM_EVENT_MULTICAST_JOIN:
			copy_ud(*ev, raw.ud);
			ev->pub.param.ud.private_data = ev->mc->context;
			ev->pub.status = process_join(*ev);
			if (ev->pub.status)
				ev->pub.event = RDMA_CM_EVENT_MULTICAST_ERROR;
			break;
		case RDMA_CM_EVENT_MULTICAST_ERROR:
			ev->pub.param.ud.private_data = ev->mc->context;
			break;
#if _OPENVERBS_ABI >= 64
		case RDMA_CM_EVENT_ADDRINFO_RESOLVED:
		case RDMA_CM_EVENT_ADDRINFO_ERROR:
		case RDMA_CM_EVENT_USER:
		case RDMA_CM_EVENT_INTERNAL:
			if (!process_addrinfo_event(*ev, raw)) {
				int err = errno;
				complete_event(id);
				delete ev;
				return fail(err);
			}
			break;
#endif
		default:
			copy_param(*ev, id, raw);
			break;
		}
		if (ev->pub.status && log_level() >= LOG_INFO) {
			char dst[64];
			log::info("%s for destination %s: status %d%s%s", rdma_event_str(ev->pub.event),
				  log::addr_text(&ev->pub.id->route.addr.dst_addr, dst, sizeof(dst)),
				  ev->pub.status, ev->pub.status < 0 ? " " : "",
				  ev->pub.status < 0 ? strerror(-ev->pub.status) : "");
		}
		*out = &ev->pub;
		return 0;
	}
}

int complete(Id &id) noexcept
{
	if (!id.sync)
		return 0;
	if (id.pub.event) {
		ack_event(id.pub.event);
		id.pub.event = nullptr;
	}
	if (get_event(id.pub.channel, &id.pub.event))
		return -1;
	const rdma_cm_event &ev = *id.pub.event;
	if (!ev.status)
		return 0;
	if (ev.event == RDMA_CM_EVENT_REJECTED)
		return fail(ECONNREFUSED);
	return fail(ev.status < 0 ? -ev.status : ev.status);
}

} // namespace ov::cm
