// librdmacm's object model (the front end). Every public object embeds its
// public struct as the first member, so the pointer the application holds is
// the object (as rdma-core's cma_id_private/cma_event do):
//
//   Channel   struct rdma_event_channel + its event sources (kernel, soft)
//   Id        struct rdma_cm_id + the backend serving it (backend.h)
//   Event     struct rdma_cm_event + the private data it points at
//   Multicast one joined group of an Id
//   Device    one RDMA device as the CM uses it (devices.cpp)
//
// Entry points are in facade.cpp; they check arguments and call the
// functions declared here, which follow rdma-core 44's librdmacm (cma.c) in
// behaviour, errno and event sequence. Conventions: functions returning int
// return 0 or -1 with errno set, like the public API.
#pragma once

#include "backend.h"

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

namespace ov::cm {

// Sets errno and returns -1 (rdma-core's ERR()).
inline int fail(int err) noexcept
{
	errno = err;
	return -1;
}

// Returns 0 for 0, else -1 with errno = err (rdma_seterrno for errno values).
inline int seterr(int err) noexcept
{
	return err ? fail(err) : 0;
}

struct Device {
	ibv_device *ibdev = nullptr;
	ibv_context *verbs = nullptr; // opened on first use, kept for the process
	ibv_pd *pd = nullptr;	      // shared by the ids on the device
	ibv_xrcd *xrcd = nullptr;
	uint64_t guid = 0; // network order
	int index = -1;	   // ibv_get_device_index()
	int port_cnt = 0;
	std::vector<uint8_t> link_layer; // per port (index port - 1)
	int max_qpsize = 0;
	uint8_t max_initiator_depth = 0;
	uint8_t max_responder_resources = 0;
	int refcnt = 0;
};

struct Channel {
	rdma_event_channel pub; // must be first: applications hold &pub
	std::unique_ptr<EventSource> kernel; // /dev/infiniband/rdma_cm, or null
	std::unique_ptr<EventSource> soft;   // usercm, or null
	int epfd = -1; // pub.fd when both sources exist
	// Threads inside rdma_get_cm_event on this channel, and whether it was
	// destroyed (channel.cpp's registry lock guards both): a destroyed
	// channel is freed when the last of them leaves.
	uint32_t users = 0;
	std::atomic<bool> dead{false};

	// With both sources: whether the software CM's is looked at first, and
	// how many events in a row the source looked at first has given (a
	// hint shared by the channel's readers: channel.cpp, Channel::next).
	std::atomic<bool> soft_first{false};
	std::atomic<uint32_t> streak{0};

	// Next raw event of either source, blocking unless pub.fd is O_NONBLOCK.
	int next(RawEvent &ev) noexcept;
};

struct Id;

struct Multicast {
	Id *id = nullptr;
	void *context = nullptr;
	uint32_t handle = 0;
	uint16_t join_flags = 0;
	sockaddr_storage addr = {};
	socklen_t addrlen = 0;
	ibv_gid mgid = {};
	uint16_t mlid = 0;
	uint32_t events_completed = 0; // guarded by id->mu
	std::condition_variable cv;
};

struct Id {
	rdma_cm_id pub; // must be first: applications hold &pub
	std::unique_ptr<IdBackend> be;
	Device *dev = nullptr;
	bool sync = false; // created without a channel: calls wait for their event
	std::mutex mu;
	std::condition_variable cv;
	uint32_t events_completed = 0; // guarded by mu
	bool connect_error = false;
	uint8_t initiator_depth = 0;
	uint8_t responder_resources = 0;
	std::unique_ptr<ibv_qp_init_attr> qp_init_attr; // passive ep template
	std::vector<uint8_t> connect;			 // ai_connect prefix
	std::vector<std::unique_ptr<Multicast>> mcs;	 // guarded by mu
	ibv_ece local_ece = {};
	ibv_ece remote_ece = {};
	// rdma_resolve_addrinfo (rdma-core 64), guarded by mu: a resolution is
	// under way (or done and not yet queried), and its result.
	bool resolving_ai = false;
	rdma_addrinfo *resolved_ai = nullptr;
};

struct Event {
	rdma_cm_event pub; // must be first
	Id *id_priv = nullptr;
	Multicast *mc = nullptr;
	uint8_t private_data[kMaxPrivateData];
};

inline Id *priv(rdma_cm_id *id) noexcept { return reinterpret_cast<Id *>(id); }
inline Channel *priv(rdma_event_channel *ch) noexcept { return reinterpret_cast<Channel *>(ch); }
inline Event *priv(rdma_cm_event *ev) noexcept { return reinterpret_cast<Event *>(ev); }

// --- library state (devices.cpp) ---
// rdma-core's ucma_init: checks the kernel CM's ABI, lists the devices and
// probes AF_IB support. 0, or -1 with errno (ENODEV: no RDMA device).
int init() noexcept;
bool af_ib_support() noexcept;
// Whether an id on a channel with both CMs makes its kernel half lazily
// (id.cpp, LazyKernelId; on by default). The kernel seam's unit tests turn
// it off to see CREATE_ID at rdma_create_id, as with the kernel CM alone.
void set_lazy_kernel_ids(bool on) noexcept;
int abi_version() noexcept;
// Binds the id to the device with this GUID/index (ENODEV when none).
int get_device(Id &id, uint64_t guid, uint32_t index) noexcept;
void put_device(Id &id) noexcept;
ibv_xrcd *get_xrcd(Device &dev) noexcept;
ibv_context **get_devices(int *num) noexcept;
// Length of a socket address of a family the CM takes (0: not one).
socklen_t addrlen(const sockaddr *addr) noexcept;

// --- channels and events (channel.cpp) ---
rdma_event_channel *create_channel() noexcept;
void destroy_channel(rdma_event_channel *ch) noexcept;
int get_event(rdma_event_channel *ch, rdma_cm_event **event) noexcept;
int ack_event(rdma_cm_event *event) noexcept;
// Counts one acknowledged event of the id and wakes waiters.
void complete_event(Id &id) noexcept;
// Synchronous ids: waits for the id's event and turns its status into errno.
int complete(Id &id) noexcept;

// --- ids (id.cpp) ---
Id *alloc_id(rdma_event_channel *ch, void *context, rdma_port_space ps, ibv_qp_type qpt) noexcept;
int create_id(rdma_event_channel *ch, rdma_cm_id **out, void *context, rdma_port_space ps,
	      ibv_qp_type qpt) noexcept;
void free_id(Id *id) noexcept;
int destroy_id(Id &id) noexcept;
int bind_addr(Id &id, const sockaddr *addr, socklen_t len) noexcept;
int resolve_addr(Id &id, const sockaddr *src, socklen_t src_len, const sockaddr *dst,
		 socklen_t dst_len, int timeout_ms) noexcept;
int resolve_route(Id &id, int timeout_ms) noexcept;
int query_route(Id &id) noexcept;		   // rdma-core's ucma_query_route
int query_addr(Id &id) noexcept;		   // ucma_query_addr
int query_gid(Id &id) noexcept;		   // ucma_query_gid
int query_path(Id &id) noexcept;		   // ucma_query_path
int query_req_info(Id &id) noexcept;		   // ucma_query_req_info
int init_qp_attr(Id &id, ibv_qp_attr &attr, int &mask) noexcept;
int connect(Id &id, const rdma_conn_param *param) noexcept;
int establish(Id &id) noexcept;
int listen(Id &id, int backlog) noexcept;
int accept(Id &id, const rdma_conn_param *param) noexcept;
int reject(Id &id, const void *data, uint8_t len, uint8_t reason) noexcept;
int notify(Id &id, ibv_event_type event) noexcept;
int disconnect(Id &id) noexcept;
int join_multicast(Id &id, const sockaddr *addr, socklen_t len, uint16_t flags,
		   void *context) noexcept;
int leave_multicast(Id &id, const sockaddr *addr, socklen_t len) noexcept;
int set_option(Id &id, int level, int name, void *val, size_t len) noexcept;
int migrate_id(Id &id, rdma_event_channel *to) noexcept;
// Work done while an event is taken from the kernel (cma.c's event switch).
int process_conn_resp(Id &id) noexcept;

#if _OPENVERBS_ABI >= 64
// --- rdma-core 64's asynchronous address resolution (resolve_ai.cpp) ---
int resolve_addrinfo(Id &id, const char *node, const char *service,
		     const rdma_addrinfo *hints) noexcept;
int query_addrinfo(Id &id, rdma_addrinfo **info) noexcept;
int write_cm_event(Id &id, rdma_cm_event_type event, int status, uint64_t arg) noexcept;
// get_event's part: turns the library's INTERNAL event into the event it
// stands for, ends a failed resolution. false: drop the event (errno set).
bool process_addrinfo_event(Event &ev, const RawEvent &raw) noexcept;
#endif

// --- QPs (qp.cpp) ---
int create_qp_ex(Id &id, ibv_qp_init_attr_ex &attr) noexcept;
int create_qp(Id &id, ibv_pd *pd, ibv_qp_init_attr &attr) noexcept;
void destroy_qp(Id &id) noexcept;
int create_srq_ex(Id &id, ibv_srq_init_attr_ex &attr) noexcept;
int create_srq(Id &id, ibv_pd *pd, ibv_srq_init_attr &attr) noexcept;
void destroy_srq(Id &id) noexcept;
int modify_qp_rtr(Id &id, uint8_t resp_res) noexcept;
int modify_qp_rts(Id &id, uint8_t init_depth) noexcept;
int modify_qp_sqd(Id &id) noexcept;
int modify_qp_err(Id &id) noexcept;

// --- endpoints (ep.cpp) ---
int create_ep(rdma_cm_id **out, const rdma_addrinfo *res, ibv_pd *pd,
	      ibv_qp_init_attr *qp_init_attr) noexcept;
void destroy_ep(Id &id) noexcept;
int get_request(Id &listen, rdma_cm_id **out) noexcept;

// --- rdma_getaddrinfo (addrinfo.cpp) ---
int getaddrinfo(const char *node, const char *service, const rdma_addrinfo *hints,
		rdma_addrinfo **res) noexcept;
void freeaddrinfo(rdma_addrinfo *res) noexcept;
// RAI_ROUTEONLY: rdma-core's internal flag (a route for rdma_resolve_route).
inline constexpr int kRaiRouteOnly = 0x01000000;

} // namespace ov::cm
