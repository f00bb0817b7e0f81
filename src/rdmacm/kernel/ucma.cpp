// Kernel backend: IdBackend and EventSource over /dev/infiniband/rdma_cm.
// Structures are the kernel's (<rdma/rdma_user_cm.h>); each command is the
// 8-byte struct rdma_ucm_cmd_hdr followed by the command struct, exactly the
// bytes rdma-core 44 writes (its ucma_abi_* structs embed the same header).
#include "ucma.h"

#include "../hooks.h"
#include "../log.h"

#include <rdma/rdma_user_cm.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

// libibverbs' historical marshalling helpers (exported by libibverbs.so.1
// at IBVERBS_1.0, declared by no installed header), as rdma-core uses them.
extern "C" {
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
}

namespace ov::cm {
bool af_ib_support() noexcept; // devices.cpp (cm.h cannot be included here)
}

namespace ov::cm::kernel {
namespace {

int sys_open(const char *path, int flags) { return ::open(path, flags); }
int sys_poll_in(int fd, int timeout_ms)
{
	pollfd p = {fd, POLLIN, 0};
	int n = ::poll(&p, 1, timeout_ms);
	return n < 0 ? -1 : (n > 0 ? 1 : 0);
}

Syscalls g_sys = {sys_open, ::write, ::close, sys_poll_in};

template <typename T> uint64_t ptr(T *p) noexcept { return reinterpret_cast<uintptr_t>(p); }

// Both parameter views of an event's union.
void read_conn(ConnParam &d, const rdma_ucm_conn_param &s) noexcept
{
	d.qp_num = s.qp_num;
	d.private_data_len = s.private_data_len;
	memcpy(d.private_data, s.private_data, sizeof(s.private_data));
	d.srq = s.srq;
	d.responder_resources = s.responder_resources;
	d.initiator_depth = s.initiator_depth;
	d.flow_control = s.flow_control;
	d.retry_count = s.retry_count;
	d.rnr_retry_count = s.rnr_retry_count;
	d.valid = s.valid;
}

void read_ud(UdParam &d, const rdma_ucm_ud_param &s) noexcept
{
	d.qp_num = s.qp_num;
	d.qkey = s.qkey;
	ibv_copy_ah_attr_from_kern(&d.ah_attr, const_cast<ib_uverbs_ah_attr *>(&s.ah_attr));
	memcpy(d.private_data, s.private_data, sizeof(s.private_data));
	d.private_data_len = s.private_data_len;
}

void write_conn(rdma_ucm_conn_param &d, const ConnParam &s) noexcept
{
	d.qp_num = s.qp_num;
	memcpy(d.private_data, s.private_data, sizeof(d.private_data));
	d.private_data_len = s.private_data_len;
	d.srq = s.srq;
	d.responder_resources = s.responder_resources;
	d.initiator_depth = s.initiator_depth;
	d.flow_control = s.flow_control;
	d.retry_count = s.retry_count;
	d.rnr_retry_count = s.rnr_retry_count;
	d.valid = s.valid;
}

// ibv_path_data (QUERY PATH) to the host-order record (rdma-core's
// ucma_convert_path): selectors are "exactly".
void convert_path(const ibv_path_data &pd, ibv_sa_path_rec &sa) noexcept
{
	memset(&sa, 0, sizeof(sa));
	sa.dgid = pd.path.dgid;
	sa.sgid = pd.path.sgid;
	sa.dlid = pd.path.dlid;
	sa.slid = pd.path.slid;
	sa.raw_traffic = 0;
	uint32_t fl_hop = be32toh(pd.path.flowlabel_hoplimit);
	sa.flow_label = htobe32(fl_hop >> 8);
	sa.hop_limit = static_cast<uint8_t>(fl_hop);
	sa.traffic_class = pd.path.tclass;
	sa.reversible = pd.path.reversible_numpath >> 7;
	sa.numb_path = 1;
	sa.pkey = pd.path.pkey;
	sa.sl = be16toh(pd.path.qosclass_sl) & 0xF;
	sa.mtu_selector = 2;
	sa.mtu = pd.path.mtu & 0x1F;
	sa.rate_selector = 2;
	sa.rate = pd.path.rate & 0x1F;
	sa.packet_life_time_selector = 2;
	sa.packet_life_time = pd.path.packetlifetime & 0x1F;
	sa.preference = static_cast<uint8_t>(pd.flags);
}

class Source final : public EventSource {
public:
	explicit Source(int fd) noexcept : fd_(fd) {}
	~Source() override { g_sys.close(fd_); }
	const char *kind() const noexcept override { return "kernel"; }
	int fd() const noexcept override { return fd_; }

	int next(RawEvent &ev, bool block) noexcept override
	{
		if (!block) {
			int r = g_sys.poll_in(fd_, 0);
			if (r < 0)
				return errno;
			if (r == 0)
				return EAGAIN;
		}
		rdma_ucm_event_resp resp = {};
		rdma_ucm_get_event cmd = {};
		cmd.response = ptr(&resp);
		int err = execute(fd_, RDMA_USER_CM_CMD_GET_EVENT, &cmd, sizeof(cmd), sizeof(resp));
		if (err)
			return err;
		ev.uid = resp.uid;
		ev.handle = resp.id;
		ev.event = resp.event;
		ev.status = static_cast<int32_t>(resp.status);
		read_conn(ev.conn, resp.param.conn);
		read_ud(ev.ud, resp.param.ud);
		ev.ece.vendor_id = resp.ece.vendor_id;
		ev.ece.attr_mod = resp.ece.attr_mod;
		// USER and INTERNAL events carry a 64-bit argument at the start
		// of the union (rdma-core 64's arg32[2]).
		memcpy(&ev.arg, &resp.param, sizeof(ev.arg));
		if (resp.event == 4 /* RDMA_CM_EVENT_CONNECT_REQUEST */)
			ev.child = make_id(resp.id);
		return 0;
	}

	std::unique_ptr<IdBackend> make_id(uint32_t handle) noexcept;

private:
	int fd_;
};

class Id final : public IdBackend {
public:
	Id(Source &src, uint32_t handle) noexcept : src_(&src), handle_(handle) {}
	const char *kind() const noexcept override { return "kernel"; }

	int destroy(uint32_t &events_reported) noexcept override
	{
		rdma_ucm_destroy_id_resp resp = {};
		rdma_ucm_destroy_id cmd = {};
		cmd.response = ptr(&resp);
		cmd.id = handle_;
		int err = run(RDMA_USER_CM_CMD_DESTROY_ID, cmd, sizeof(resp));
		events_reported = resp.events_reported;
		return err;
	}

	int bind_addr(const sockaddr *addr, socklen_t len) noexcept override
	{
		if (af_ib_support()) {
			rdma_ucm_bind cmd = {};
			cmd.id = handle_;
			cmd.addr_size = static_cast<uint16_t>(len);
			memcpy(&cmd.addr, addr, std::min<size_t>(len, sizeof(cmd.addr)));
			return run(RDMA_USER_CM_CMD_BIND, cmd, 0);
		}
		rdma_ucm_bind_ip cmd = {};
		cmd.id = handle_;
		memcpy(&cmd.addr, addr, std::min<size_t>(len, sizeof(cmd.addr)));
		return run(RDMA_USER_CM_CMD_BIND_IP, cmd, 0);
	}

	int resolve_addr(const sockaddr *src, socklen_t src_len, const sockaddr *dst,
			 socklen_t dst_len, int timeout_ms) noexcept override
	{
		if (af_ib_support()) {
			rdma_ucm_resolve_addr cmd = {};
			cmd.id = handle_;
			cmd.timeout_ms = static_cast<uint32_t>(timeout_ms);
			if (src) {
				cmd.src_size = static_cast<uint16_t>(src_len);
				memcpy(&cmd.src_addr, src, std::min<size_t>(src_len, sizeof(cmd.src_addr)));
			}
			cmd.dst_size = static_cast<uint16_t>(dst_len);
			memcpy(&cmd.dst_addr, dst, std::min<size_t>(dst_len, sizeof(cmd.dst_addr)));
			return run(RDMA_USER_CM_CMD_RESOLVE_ADDR, cmd, 0);
		}
		rdma_ucm_resolve_ip cmd = {};
		cmd.id = handle_;
		if (src)
			memcpy(&cmd.src_addr, src, std::min<size_t>(src_len, sizeof(cmd.src_addr)));
		memcpy(&cmd.dst_addr, dst, std::min<size_t>(dst_len, sizeof(cmd.dst_addr)));
		cmd.timeout_ms = static_cast<uint32_t>(timeout_ms);
		return run(RDMA_USER_CM_CMD_RESOLVE_IP, cmd, 0);
	}

	int resolve_route(int timeout_ms) noexcept override
	{
		rdma_ucm_resolve_route cmd = {};
		cmd.id = handle_;
		cmd.timeout_ms = static_cast<uint32_t>(timeout_ms);
		return run(RDMA_USER_CM_CMD_RESOLVE_ROUTE, cmd, 0);
	}

	int query(unsigned what, Route &out) noexcept override
	{
		if (what == 0)
			return query_route(out);
		if (what & QUERY_ADDR) {
			int err = query_addr(RDMA_USER_CM_QUERY_ADDR, out);
			if (err)
				return err;
		}
		if (what & QUERY_GID) {
			int err = query_addr(RDMA_USER_CM_QUERY_GID, out);
			if (err)
				return err;
		}
		if (what & QUERY_PATH)
			return query_path(out);
		return 0;
	}

	int init_qp_attr(ibv_qp_attr &attr, int &mask) noexcept override
	{
		ib_uverbs_qp_attr resp = {};
		rdma_ucm_init_qp_attr cmd = {};
		cmd.response = ptr(&resp);
		cmd.id = handle_;
		cmd.qp_state = attr.qp_state;
		int err = run(RDMA_USER_CM_CMD_INIT_QP_ATTR, cmd, sizeof(resp));
		if (err)
			return err;
		ibv_copy_qp_attr_from_kern(&attr, &resp);
		mask = static_cast<int>(resp.qp_attr_mask);
		return 0;
	}

	int connect(const ConnParam &p, const Ece &ece) noexcept override
	{
		rdma_ucm_connect cmd = {};
		write_conn(cmd.conn_param, p);
		cmd.id = handle_;
		cmd.ece.vendor_id = ece.vendor_id;
		cmd.ece.attr_mod = ece.attr_mod;
		return run(RDMA_USER_CM_CMD_CONNECT, cmd, 0);
	}

	int listen(int backlog) noexcept override
	{
		rdma_ucm_listen cmd = {};
		cmd.id = handle_;
		cmd.backlog = static_cast<uint32_t>(backlog);
		return run(RDMA_USER_CM_CMD_LISTEN, cmd, 0);
	}

	int accept(uint64_t uid, const ConnParam &p, const Ece &ece) noexcept override
	{
		rdma_ucm_accept cmd = {};
		cmd.uid = uid;
		if (p.valid)
			write_conn(cmd.conn_param, p);
		cmd.id = handle_;
		cmd.ece.vendor_id = ece.vendor_id;
		cmd.ece.attr_mod = ece.attr_mod;
		return run(RDMA_USER_CM_CMD_ACCEPT, cmd, 0);
	}

	int reject(const void *data, uint8_t len, uint8_t reason) noexcept override
	{
		rdma_ucm_reject cmd = {};
		cmd.id = handle_;
		if (data && len) {
			memcpy(cmd.private_data, data, len);
			cmd.private_data_len = len;
		}
		cmd.reason = reason;
		return run(RDMA_USER_CM_CMD_REJECT, cmd, 0);
	}

	int disconnect() noexcept override
	{
		rdma_ucm_disconnect cmd = {};
		cmd.id = handle_;
		return run(RDMA_USER_CM_CMD_DISCONNECT, cmd, 0);
	}

	int notify(uint32_t event) noexcept override
	{
		rdma_ucm_notify cmd = {};
		cmd.id = handle_;
		cmd.event = event;
		return run(RDMA_USER_CM_CMD_NOTIFY, cmd, 0);
	}

	int join(uint64_t mc_uid, const sockaddr *addr, socklen_t len, uint16_t flags,
		 uint32_t &mc_handle) noexcept override
	{
		rdma_ucm_create_id_resp resp = {};
		int err;
		if (af_ib_support()) {
			rdma_ucm_join_mcast cmd = {};
			cmd.response = ptr(&resp);
			cmd.uid = mc_uid;
			cmd.id = handle_;
			cmd.addr_size = static_cast<uint16_t>(len);
			cmd.join_flags = flags;
			memcpy(&cmd.addr, addr, std::min<size_t>(len, sizeof(cmd.addr)));
			err = run(RDMA_USER_CM_CMD_JOIN_MCAST, cmd, sizeof(resp));
		} else {
			rdma_ucm_join_ip_mcast cmd = {};
			cmd.response = ptr(&resp);
			cmd.uid = mc_uid;
			memcpy(&cmd.addr, addr, std::min<size_t>(len, sizeof(cmd.addr)));
			cmd.id = handle_;
			err = run(RDMA_USER_CM_CMD_JOIN_IP_MCAST, cmd, sizeof(resp));
		}
		mc_handle = resp.id;
		return err;
	}

	int leave(uint32_t mc_handle, uint32_t &events_reported) noexcept override
	{
		rdma_ucm_destroy_id_resp resp = {};
		rdma_ucm_destroy_id cmd = {};
		cmd.response = ptr(&resp);
		cmd.id = mc_handle;
		int err = run(RDMA_USER_CM_CMD_LEAVE_MCAST, cmd, sizeof(resp));
		events_reported = resp.events_reported;
		return err;
	}

	int set_option(uint32_t level, uint32_t name, void *val, size_t len) noexcept override
	{
		rdma_ucm_set_option cmd = {};
		cmd.optval = ptr(val);
		cmd.id = handle_;
		cmd.level = level;
		cmd.optname = name;
		cmd.optlen = static_cast<uint32_t>(len);
		return run(RDMA_USER_CM_CMD_SET_OPTION, cmd, 0);
	}

	int migrate(EventSource &to, uint32_t &events_reported) noexcept override
	{
		if (std::strcmp(to.kind(), "kernel") != 0)
			return EINVAL;
		auto *dst = static_cast<Source *>(&to);
		rdma_ucm_migrate_resp resp = {};
		rdma_ucm_migrate_id cmd = {};
		cmd.response = ptr(&resp);
		cmd.id = handle_;
		cmd.fd = static_cast<uint32_t>(src_->fd()); // the current channel's fd
		int err = execute(dst->fd(), RDMA_USER_CM_CMD_MIGRATE_ID, &cmd, sizeof(cmd),
				  sizeof(resp)); // written to the new channel
		if (err)
			return err;
		events_reported = resp.events_reported;
		src_ = dst;
		return 0;
	}

private:
	int write_event(uint32_t event, int32_t status, uint64_t arg) noexcept override
	{
		// Command 24 (after JOIN_MCAST and RESOLVE_IB_SERVICE, rdma-core
		// 64's rdma_cma_abi.h), newer than the installed uapi header.
		struct {
			uint32_t id;
			uint32_t reserved;
			uint32_t event;
			uint32_t status;
			union {
				rdma_ucm_conn_param conn;
				rdma_ucm_ud_param ud;
				uint64_t arg;
			} param;
		} cmd = {};
		cmd.id = handle_;
		cmd.event = event;
		cmd.status = static_cast<uint32_t>(status);
		cmd.param.arg = arg;
		return run(kCmdWriteCmEvent, cmd, 0);
	}

	static constexpr uint32_t kCmdWriteCmEvent = RDMA_USER_CM_CMD_JOIN_MCAST + 2;

	template <typename C> int run(uint32_t op, const C &cmd, uint16_t out) noexcept
	{
		return execute(src_->fd(), op, &cmd, sizeof(C), out);
	}

	int query_route(Route &out) noexcept
	{
		rdma_ucm_query_route_resp resp = {};
		rdma_ucm_query cmd = {};
		resp.ibdev_index = kInvalidDevIndex; // left as is by kernels without it
		cmd.response = ptr(&resp);
		cmd.id = handle_;
		int err = run(RDMA_USER_CM_CMD_QUERY_ROUTE, cmd, sizeof(resp));
		if (err)
			return err;
		out.paths.clear();
		try {
			for (uint32_t i = 0; i < std::min<uint32_t>(resp.num_paths, 2); i++) {
				ibv_sa_path_rec rec;
				ibv_copy_path_rec_from_kern(
				    &rec, reinterpret_cast<ib_user_path_rec *>(&resp.ib_route[i]));
				out.paths.push_back(rec);
			}
		} catch (...) {
			return ENOMEM;
		}
		out.have_paths = true;
		memcpy(out.sgid.raw, resp.ib_route[0].sgid, 16);
		memcpy(out.dgid.raw, resp.ib_route[0].dgid, 16);
		out.have_gids = true;
		out.pkey = resp.ib_route[0].pkey;
		out.have_pkey = true;
		memset(&out.src, 0, sizeof(out.src));
		memset(&out.dst, 0, sizeof(out.dst));
		memcpy(&out.src, &resp.src_addr, sizeof(resp.src_addr));
		memcpy(&out.dst, &resp.dst_addr, sizeof(resp.dst_addr));
		out.have_addrs = true;
		out.node_guid = resp.node_guid;
		out.ibdev_index = resp.ibdev_index;
		out.port_num = resp.port_num;
		return 0;
	}

	int query_addr(uint32_t option, Route &out) noexcept
	{
		rdma_ucm_query_addr_resp resp = {};
		rdma_ucm_query cmd = {};
		resp.ibdev_index = kInvalidDevIndex;
		cmd.response = ptr(&resp);
		cmd.id = handle_;
		cmd.option = option;
		int err = run(RDMA_USER_CM_CMD_QUERY, cmd, sizeof(resp));
		if (err)
			return err;
		if (option == RDMA_USER_CM_QUERY_GID) {
			// The GIDs, as AF_IB addresses.
			memcpy(out.sgid.raw, reinterpret_cast<const uint8_t *>(&resp.src_addr) + 8, 16);
			memcpy(out.dgid.raw, reinterpret_cast<const uint8_t *>(&resp.dst_addr) + 8, 16);
			out.have_gids = true;
			return 0;
		}
		memset(&out.src, 0, sizeof(out.src));
		memset(&out.dst, 0, sizeof(out.dst));
		memcpy(&out.src, &resp.src_addr, std::min<size_t>(resp.src_size, sizeof(out.src)));
		memcpy(&out.dst, &resp.dst_addr, std::min<size_t>(resp.dst_size, sizeof(out.dst)));
		out.have_addrs = true;
		out.node_guid = resp.node_guid;
		out.ibdev_index = resp.ibdev_index;
		out.port_num = resp.port_num;
		out.pkey = resp.pkey;
		out.have_pkey = true;
		return 0;
	}

	int query_path(Route &out) noexcept
	{
		// Room for six paths, as rdma-core asks.
		constexpr size_t kSize = sizeof(rdma_ucm_query_path_resp) + 6 * sizeof(ib_path_rec_data);
		alignas(8) unsigned char buf[kSize] = {};
		auto &hdr = *reinterpret_cast<rdma_ucm_query_path_resp *>(buf);
		auto *data = reinterpret_cast<const ib_path_rec_data *>(buf + sizeof(hdr));
		rdma_ucm_query cmd = {};
		cmd.response = ptr(buf);
		cmd.id = handle_;
		cmd.option = RDMA_USER_CM_QUERY_PATH;
		int err = run(RDMA_USER_CM_CMD_QUERY, cmd, kSize);
		if (err)
			return err;
		out.paths.clear();
		try {
			for (uint32_t i = 0; i < std::min<uint32_t>(hdr.num_paths, 6); i++) {
				ibv_sa_path_rec rec;
				convert_path(*reinterpret_cast<const ibv_path_data *>(&data[i]), rec);
				out.paths.push_back(rec);
			}
		} catch (...) {
			return ENOMEM;
		}
		out.have_paths = true;
		return 0;
	}

	Source *src_;
	uint32_t handle_;
};

std::unique_ptr<IdBackend> Source::make_id(uint32_t handle) noexcept
{
	return std::unique_ptr<IdBackend>(new (std::nothrow) Id(*this, handle));
}

} // namespace

Syscalls &syscalls() noexcept { return g_sys; }
ScopedSyscalls::ScopedSyscalls(const Syscalls &r) noexcept : saved_(g_sys) { g_sys = r; }
ScopedSyscalls::~ScopedSyscalls() { g_sys = saved_; }

int execute(int fd, uint32_t cmd, const void *payload, uint16_t len, uint16_t out_len) noexcept
{
	// Header and command in one buffer: one write, as the kernel requires.
	alignas(8) unsigned char buf[sizeof(rdma_ucm_cmd_hdr) + 512];
	auto *hdr = reinterpret_cast<rdma_ucm_cmd_hdr *>(buf);
	hdr->cmd = cmd;
	hdr->in = len;
	hdr->out = out_len;
	memcpy(buf + sizeof(*hdr), payload, len);
	size_t total = sizeof(*hdr) + len;
	ssize_t n = g_sys.write(fd, buf, total);
	if (n == static_cast<ssize_t>(total))
		return 0;
	if (n >= 0)
		return ENODATA;
	int err = errno;
	log::debug("rdma_cm command %u failed: %s", cmd, strerror(err));
	return err;
}

std::unique_ptr<EventSource> open_source(int &err) noexcept
{
	int fd = g_sys.open(kDevicePath, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		log::info("%s: %s", kDevicePath, strerror(err));
		return nullptr;
	}
	auto *s = new (std::nothrow) Source(fd);
	if (!s) {
		g_sys.close(fd);
		err = ENOMEM;
	}
	return std::unique_ptr<EventSource>(s);
}

std::unique_ptr<IdBackend> create_id(EventSource &src, uint64_t uid, uint16_t ps, uint8_t qp_type,
				     int &err) noexcept
{
	if (std::strcmp(src.kind(), "kernel") != 0) {
		err = EINVAL;
		return nullptr;
	}
	auto *s = static_cast<Source *>(&src);
	rdma_ucm_create_id_resp resp = {};
	rdma_ucm_create_id cmd = {};
	cmd.uid = uid;
	cmd.response = ptr(&resp);
	cmd.ps = ps;
	cmd.qp_type = qp_type;
	err = execute(s->fd(), RDMA_USER_CM_CMD_CREATE_ID, &cmd, sizeof(cmd), sizeof(resp));
	if (err)
		return nullptr;
	auto be = s->make_id(resp.id);
	if (!be) {
		rdma_ucm_destroy_id_resp dresp = {};
		rdma_ucm_destroy_id dcmd = {};
		dcmd.response = ptr(&dresp);
		dcmd.id = resp.id;
		execute(s->fd(), RDMA_USER_CM_CMD_DESTROY_ID, &dcmd, sizeof(dcmd), sizeof(dresp));
		err = ENOMEM;
	}
	return be;
}

} // namespace ov::cm::kernel
