// The seam between librdmacm's front end (the rdma_* entry points and the
// object model of cm.h) and the connection managers that serve an id:
//
//   * the kernel's, reached through /dev/infiniband/rdma_cm (kernel/ucma.*),
//   * the user-space one of software devices (usercm/).
//
// The interface speaks in the kernel CM's terms (rdma_user_cm.h): an id has
// a handle, commands map one to one onto ucma commands, events come as
// RawEvent and are turned into struct rdma_cm_event by the front end, which
// also does everything rdma-core's librdmacm does around the commands (QP
// transitions, devices, synchronous ids, event accounting).
//
// This header must not include <rdma/rdma_cma.h>: the kernel backend
// includes <rdma/rdma_user_cm.h>, whose enums reuse some of its names.
#pragma once

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ov::cm {

inline constexpr size_t kMaxPrivateData = 256; // RDMA_MAX_PRIVATE_DATA
inline constexpr uint32_t kInvalidDevIndex = UINT32_MAX;

// Connection parameters as the CM carries them (struct rdma_ucm_conn_param).
struct ConnParam {
	uint32_t qp_num = 0;
	uint8_t private_data[kMaxPrivateData] = {};
	uint8_t private_data_len = 0;
	uint8_t srq = 0;
	uint8_t responder_resources = 0;
	uint8_t initiator_depth = 0;
	uint8_t flow_control = 0;
	uint8_t retry_count = 0;
	uint8_t rnr_retry_count = 0;
	uint8_t valid = 0;
};

// Datagram parameters of UD events (struct rdma_ucm_ud_param).
struct UdParam {
	uint32_t qp_num = 0;
	uint32_t qkey = 0;
	ibv_ah_attr ah_attr = {};
	uint8_t private_data[kMaxPrivateData] = {};
	uint8_t private_data_len = 0;
};

// Enhanced connection establishment (struct rdma_ucm_ece).
struct Ece {
	uint32_t vendor_id = 0;
	uint32_t attr_mod = 0;
};

class IdBackend;

// One event as a backend reports it (struct rdma_ucm_event_resp). Both
// parameter views are filled; the front end picks one by the id's QP type.
struct RawEvent {
	uint64_t uid = 0;    // the uid given at create/join: a cm::Id or cm::Multicast
	uint32_t handle = 0; // the backend's id (for CONNECT_REQUEST: the new one)
	uint32_t event = 0;  // enum rdma_cm_event_type
	int32_t status = 0;  // 0 or a negative errno (or an IB reject reason)
	ConnParam conn;
	UdParam ud;
	Ece ece;
	uint64_t arg = 0; // USER and INTERNAL events (rdma-core 64): the written argument
	// CONNECT_REQUEST: the backend of the new connection's id.
	std::unique_ptr<IdBackend> child;
};

// What a query tells about an id (QUERY_ROUTE, QUERY ADDR/GID/PATH).
struct Route {
	sockaddr_storage src = {};
	sockaddr_storage dst = {};
	bool have_addrs = false;
	uint64_t node_guid = 0; // network order; 0 while no device is bound
	uint32_t ibdev_index = kInvalidDevIndex;
	uint8_t port_num = 0;
	bool have_pkey = false;
	uint16_t pkey = 0;      // network order
	bool have_gids = false;
	ibv_gid sgid = {};
	ibv_gid dgid = {};
	bool have_paths = false;
	std::vector<ibv_sa_path_rec> paths;
};

// What the front end asks of a query (the kernel picks the commands).
enum QueryWhat : unsigned {
	QUERY_ADDR = 1u << 0,  // addresses, device, port, P_Key
	QUERY_GID = 1u << 1,   // source and destination GIDs
	QUERY_PATH = 1u << 2,  // path records
	QUERY_ALL = QUERY_ADDR | QUERY_GID | QUERY_PATH,
};

// A source of events for one event channel. fd() is pollable: readable
// while an event is pending.
class EventSource {
public:
	virtual ~EventSource() = default;
	virtual const char *kind() const noexcept = 0; // "kernel", "soft"
	virtual int fd() const noexcept = 0;
	// Takes the next event: 0, EAGAIN when none is pending and !block, or
	// a positive errno.
	virtual int next(RawEvent &ev, bool block) noexcept = 0;
};

// The connection manager's half of one rdma_cm_id. Every call returns 0 or
// a positive errno; none blocks for the peer (results come as events).
class IdBackend {
public:
	virtual ~IdBackend() = default;
	virtual const char *kind() const noexcept = 0; // "kernel", "soft"

	// Releases the id; events_reported = events already handed out for it
	// (the front end waits until as many were acknowledged).
	virtual int destroy(uint32_t &events_reported) noexcept = 0;
	virtual int bind_addr(const sockaddr *addr, socklen_t len) noexcept = 0;
	virtual int resolve_addr(const sockaddr *src, socklen_t src_len, const sockaddr *dst,
				 socklen_t dst_len, int timeout_ms) noexcept = 0;
	virtual int resolve_route(int timeout_ms) noexcept = 0;
	virtual int query(unsigned what, Route &out) noexcept = 0;
	// Attributes for a transition to attr.qp_state (rdma_init_qp_attr(3)).
	virtual int init_qp_attr(ibv_qp_attr &attr, int &mask) noexcept = 0;
	virtual int connect(const ConnParam &p, const Ece &ece) noexcept = 0;
	virtual int listen(int backlog) noexcept = 0;
	// Passive side: accept a request (uid: the id's new uid). Active side
	// (after CONNECT_RESPONSE): p.valid == 0 finishes the handshake.
	virtual int accept(uint64_t uid, const ConnParam &p, const Ece &ece) noexcept = 0;
	virtual int reject(const void *data, uint8_t len, uint8_t reason) noexcept = 0;
	virtual int disconnect() noexcept = 0;
	virtual int notify(uint32_t event) noexcept = 0;
	// Multicast: the group gets its own handle (mc_handle), events carry mc_uid.
	virtual int join(uint64_t mc_uid, const sockaddr *addr, socklen_t len, uint16_t join_flags,
			 uint32_t &mc_handle) noexcept = 0;
	virtual int leave(uint32_t mc_handle, uint32_t &events_reported) noexcept = 0;
	virtual int set_option(uint32_t level, uint32_t name, void *val, size_t len) noexcept = 0;
	// Moves the id's future events to another channel's source.
	virtual int migrate(EventSource &to, uint32_t &events_reported) noexcept = 0;
	// rdma-core 64 (ucma's WRITE_CM_EVENT): queues an event of this id on
	// its channel, reported with status and arg like the CM's own (counted
	// in events_reported). A kernel without the command answers EINVAL.
	virtual int write_event(uint32_t event, int32_t status, uint64_t arg) noexcept = 0;
};

// What a backend may ask of the front end (devices.cpp): the index of `gid`
// in the GID table of port `port` of the device whose node GUID is `guid`
// (network order), read from the process's context of that device (opened
// here if no id has bound it yet), as the kernel's CM picks a RoCE QP's
// source GID index from its GID cache. -1 when the device or the GID is
// not found.
int device_gid_index(uint64_t guid, uint8_t port, const ibv_gid &gid) noexcept;

// The process's context of the device whose node GUID is `guid` (opened
// here if no id has bound it yet; kept for the process), or null. The
// software CM makes its QP1 endpoint of an sroce device on it.
ibv_context *device_context(uint64_t guid) noexcept;

} // namespace ov::cm
