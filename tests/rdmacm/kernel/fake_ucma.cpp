#include "fake_ucma.h"

#include "rdmacm/kernel/ucma.h"

#include <rdma/rdma_user_cm.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <sys/eventfd.h>
#include <unistd.h>

namespace fake {
namespace {

Ucma *g_fake = nullptr;

template <typename T> Bytes bytes(const T &v)
{
	auto *p = reinterpret_cast<const uint8_t *>(&v);
	return Bytes(p, p + sizeof(v));
}

template <typename T> T *resp_at(const Command &c, size_t off)
{
	uint64_t addr;
	memcpy(&addr, c.payload.data() + off, sizeof(addr));
	return reinterpret_cast<T *>(static_cast<uintptr_t>(addr));
}

// The device's fds are real (eventfds that are never readable), so that the
// library can put them in an epoll set beside the software CM's.
int f_open(const char *path, int)
{
	if (strcmp(path, ov::cm::kernel::kDevicePath) != 0) {
		errno = ENOENT;
		return -1;
	}
	g_fake->opened++;
	g_fake->last_fd = eventfd(0, EFD_CLOEXEC);
	return g_fake->last_fd;
}

int f_close(int fd)
{
	g_fake->closed++;
	return ::close(fd);
}

int f_poll(int, int) { return g_fake->events.empty() ? 0 : 1; }

ssize_t answer(Ucma &f, const Command &c)
{
	switch (c.cmd) {
	case CREATE_ID:
		resp_at<rdma_ucm_create_id_resp>(c, offsetof(rdma_ucm_create_id, response))->id =
		    f.next_id++;
		break;
	case DESTROY_ID:
	case LEAVE_MCAST:
		resp_at<rdma_ucm_destroy_id_resp>(c, offsetof(rdma_ucm_destroy_id, response))
		    ->events_reported = f.events_reported;
		break;
	case MIGRATE_ID:
		resp_at<rdma_ucm_migrate_resp>(c, offsetof(rdma_ucm_migrate_id, response))
		    ->events_reported = f.events_reported;
		break;
	case JOIN_IP_MCAST:
		resp_at<rdma_ucm_create_id_resp>(c, offsetof(rdma_ucm_join_ip_mcast, response))->id =
		    f.next_id++;
		break;
	case JOIN_MCAST:
		resp_at<rdma_ucm_create_id_resp>(c, offsetof(rdma_ucm_join_mcast, response))->id =
		    f.next_id++;
		break;
	case QUERY: {
		uint32_t option;
		memcpy(&option, c.payload.data() + offsetof(rdma_ucm_query, option), 4);
		if (option == RDMA_USER_CM_QUERY_PATH) {
			auto *r = resp_at<rdma_ucm_query_path_resp>(c, offsetof(rdma_ucm_query, response));
			r->num_paths = 0;
			break;
		}
		auto *r = resp_at<rdma_ucm_query_addr_resp>(c, offsetof(rdma_ucm_query, response));
		memset(r, 0, sizeof(*r));
		r->node_guid = f.node_guid;
		r->ibdev_index = f.ibdev_index;
		r->port_num = 1;
		r->pkey = 0xffff;
		break;
	}
	case QUERY_ROUTE: {
		auto *r = resp_at<rdma_ucm_query_route_resp>(c, offsetof(rdma_ucm_query, response));
		memset(r, 0, sizeof(*r));
		r->node_guid = f.node_guid;
		r->ibdev_index = f.ibdev_index;
		r->port_num = 1;
		break;
	}
	case GET_EVENT: {
		if (f.events.empty()) {
			errno = EAGAIN;
			return -1;
		}
		Event e = f.events.front();
		f.events.pop_front();
		auto *r = resp_at<rdma_ucm_event_resp>(c, offsetof(rdma_ucm_get_event, response));
		memset(r, 0, sizeof(*r));
		r->uid = e.uid;
		r->id = e.id;
		r->event = e.event;
		r->status = static_cast<uint32_t>(e.status);
		r->param.conn.qp_num = e.qp_num;
		r->param.conn.private_data_len = static_cast<uint8_t>(e.private_data.size());
		if (!e.private_data.empty()) // data() of an empty vector may be NULL
			memcpy(r->param.conn.private_data, e.private_data.data(), e.private_data.size());
		break;
	}
	default:
		break;
	}
	return 0;
}

ssize_t f_write(int, const void *buf, size_t count)
{
	Ucma &f = *g_fake;
	rdma_ucm_cmd_hdr hdr;
	if (count < sizeof(hdr)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&hdr, buf, sizeof(hdr));
	Command c{hdr.cmd, hdr.in, hdr.out,
		  Bytes(static_cast<const uint8_t *>(buf) + sizeof(hdr),
			static_cast<const uint8_t *>(buf) + count)};
	f.commands.push_back(c);
	if (static_cast<int>(hdr.cmd) == f.fail_cmd) {
		if (!f.fail_errno)
			return static_cast<ssize_t>(count) - 1;
		errno = f.fail_errno;
		return -1;
	}
	if (answer(f, c) < 0)
		return -1;
	return static_cast<ssize_t>(count);
}

const ov::cm::kernel::Syscalls kFake = {f_open, f_write, f_close, f_poll};

} // namespace

static ov::cm::kernel::ScopedSyscalls *g_scope = nullptr;

Ucma::Ucma()
{
	g_fake = this;
	g_scope = new ov::cm::kernel::ScopedSyscalls(kFake);
}

Ucma::~Ucma()
{
	delete g_scope;
	g_scope = nullptr;
	g_fake = nullptr;
}

std::vector<Command> Ucma::of(uint32_t cmd) const
{
	std::vector<Command> out;
	for (const Command &c : commands)
		if (c.cmd == cmd)
			out.push_back(c);
	return out;
}

size_t size_of(uint32_t cmd)
{
	switch (cmd) {
	case CREATE_ID: return sizeof(rdma_ucm_create_id);
	case DESTROY_ID: return sizeof(rdma_ucm_destroy_id);
	case BIND_IP: return sizeof(rdma_ucm_bind_ip);
	case RESOLVE_IP: return sizeof(rdma_ucm_resolve_ip);
	case RESOLVE_ROUTE: return sizeof(rdma_ucm_resolve_route);
	case QUERY_ROUTE: return sizeof(rdma_ucm_query);
	case CONNECT: return sizeof(rdma_ucm_connect);
	case LISTEN: return sizeof(rdma_ucm_listen);
	case ACCEPT: return sizeof(rdma_ucm_accept);
	case REJECT: return sizeof(rdma_ucm_reject);
	case DISCONNECT: return sizeof(rdma_ucm_disconnect);
	case INIT_QP_ATTR: return sizeof(rdma_ucm_init_qp_attr);
	case GET_EVENT: return sizeof(rdma_ucm_get_event);
	case SET_OPTION: return sizeof(rdma_ucm_set_option);
	case NOTIFY: return sizeof(rdma_ucm_notify);
	case JOIN_IP_MCAST: return sizeof(rdma_ucm_join_ip_mcast);
	case LEAVE_MCAST: return sizeof(rdma_ucm_destroy_id);
	case MIGRATE_ID: return sizeof(rdma_ucm_migrate_id);
	case QUERY: return sizeof(rdma_ucm_query);
	case BIND: return sizeof(rdma_ucm_bind);
	case RESOLVE_ADDR: return sizeof(rdma_ucm_resolve_addr);
	case JOIN_MCAST: return sizeof(rdma_ucm_join_mcast);
	default: return 0;
	}
}

size_t response_offset(uint32_t cmd)
{
	switch (cmd) {
	case CREATE_ID: return offsetof(rdma_ucm_create_id, response);
	case DESTROY_ID:
	case LEAVE_MCAST: return offsetof(rdma_ucm_destroy_id, response);
	case QUERY_ROUTE:
	case QUERY: return offsetof(rdma_ucm_query, response);
	case INIT_QP_ATTR: return offsetof(rdma_ucm_init_qp_attr, response);
	case GET_EVENT: return offsetof(rdma_ucm_get_event, response);
	case SET_OPTION: return offsetof(rdma_ucm_set_option, optval);
	case JOIN_IP_MCAST: return offsetof(rdma_ucm_join_ip_mcast, response);
	case JOIN_MCAST: return offsetof(rdma_ucm_join_mcast, response);
	case MIGRATE_ID: return offsetof(rdma_ucm_migrate_id, response);
	default: return SIZE_MAX;
	}
}

Bytes masked(const Command &c)
{
	Bytes b = c.payload;
	size_t off = response_offset(c.cmd);
	if (off != SIZE_MAX && off + 8 <= b.size())
		memset(b.data() + off, 0, 8);
	return b;
}

Bytes create_id(uint64_t uid, uint16_t ps, uint8_t qp_type)
{
	rdma_ucm_create_id c = {};
	c.uid = uid;
	c.ps = ps;
	c.qp_type = qp_type;
	return bytes(c);
}

Bytes destroy_id(uint32_t id)
{
	rdma_ucm_destroy_id c = {};
	c.id = id;
	return bytes(c);
}

Bytes bind_ip(uint32_t id, const sockaddr *addr, size_t len)
{
	rdma_ucm_bind_ip c = {};
	memcpy(&c.addr, addr, len);
	c.id = id;
	return bytes(c);
}

Bytes resolve_ip(uint32_t id, const sockaddr *src, size_t src_len, const sockaddr *dst,
		 size_t dst_len, uint32_t timeout_ms)
{
	rdma_ucm_resolve_ip c = {};
	if (src)
		memcpy(&c.src_addr, src, src_len);
	memcpy(&c.dst_addr, dst, dst_len);
	c.id = id;
	c.timeout_ms = timeout_ms;
	return bytes(c);
}

Bytes resolve_route(uint32_t id, uint32_t timeout_ms)
{
	rdma_ucm_resolve_route c = {};
	c.id = id;
	c.timeout_ms = timeout_ms;
	return bytes(c);
}

Bytes listen(uint32_t id, uint32_t backlog)
{
	rdma_ucm_listen c = {};
	c.id = id;
	c.backlog = backlog;
	return bytes(c);
}

Bytes connect(uint32_t id, uint32_t qp_num, const Bytes &pdata, uint8_t resp_res,
	      uint8_t init_depth, uint8_t retry, uint8_t rnr_retry, uint8_t srq)
{
	rdma_ucm_connect c = {};
	c.conn_param.qp_num = qp_num;
	if (!pdata.empty()) // data() of an empty vector may be NULL
		memcpy(c.conn_param.private_data, pdata.data(), pdata.size());
	c.conn_param.private_data_len = static_cast<uint8_t>(pdata.size());
	c.conn_param.srq = srq;
	c.conn_param.responder_resources = resp_res;
	c.conn_param.initiator_depth = init_depth;
	c.conn_param.retry_count = retry;
	c.conn_param.rnr_retry_count = rnr_retry;
	c.conn_param.valid = 1;
	c.id = id;
	return bytes(c);
}

Bytes accept(uint32_t id, uint64_t uid, uint32_t qp_num, const Bytes &pdata, uint8_t resp_res,
	     uint8_t init_depth, uint8_t rnr_retry)
{
	rdma_ucm_accept c = {};
	c.uid = uid;
	c.conn_param.qp_num = qp_num;
	if (!pdata.empty()) // data() of an empty vector may be NULL
		memcpy(c.conn_param.private_data, pdata.data(), pdata.size());
	c.conn_param.private_data_len = static_cast<uint8_t>(pdata.size());
	c.conn_param.responder_resources = resp_res;
	c.conn_param.initiator_depth = init_depth;
	c.conn_param.rnr_retry_count = rnr_retry;
	c.conn_param.valid = 1;
	c.id = id;
	return bytes(c);
}

Bytes disconnect(uint32_t id)
{
	rdma_ucm_disconnect c = {};
	c.id = id;
	return bytes(c);
}

Bytes reject(uint32_t id, const Bytes &pdata, uint8_t reason)
{
	rdma_ucm_reject c = {};
	c.id = id;
	c.private_data_len = static_cast<uint8_t>(pdata.size());
	c.reason = reason;
	if (!pdata.empty()) // data() of an empty vector may be NULL
		memcpy(c.private_data, pdata.data(), pdata.size());
	return bytes(c);
}

Bytes notify(uint32_t id, uint32_t event)
{
	rdma_ucm_notify c = {};
	c.id = id;
	c.event = event;
	return bytes(c);
}

Bytes join_ip_mcast(uint32_t id, uint64_t uid, const sockaddr *addr, size_t len)
{
	rdma_ucm_join_ip_mcast c = {};
	c.uid = uid;
	memcpy(&c.addr, addr, len);
	c.id = id;
	return bytes(c);
}

Bytes leave(uint32_t id)
{
	rdma_ucm_destroy_id c = {};
	c.id = id;
	return bytes(c);
}

Bytes set_option(uint32_t id, uint32_t level, uint32_t name, uint32_t len)
{
	rdma_ucm_set_option c = {};
	c.id = id;
	c.level = level;
	c.optname = name;
	c.optlen = len;
	return bytes(c);
}

Bytes migrate(uint32_t id, uint32_t fd)
{
	rdma_ucm_migrate_id c = {};
	c.id = id;
	c.fd = fd;
	return bytes(c);
}

} // namespace fake
