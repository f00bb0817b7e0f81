// The software devices' connection manager: librdmacm's backend for ids whose
// address belongs to a soft device (src/DESIGN.md, "Connection manager for
// software devices"). No thread: each event channel is an epoll fd holding the
// CM sockets of its ids, a timerfd and an eventfd (and the kernel's ucma fd when
// there is one); rdma_get_cm_event runs the state machines.
//
// Every function is thread-safe (one lock for the whole CM; no call blocks while
// holding it) and returns 0 or a positive errno value.
#pragma once

#include <cstdint>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

namespace ov::usercm {

// What the front end supplies.
struct Host {
	// A new id for a connection request arriving on `listen`: same channel,
	// port space, QP type and context (rdma-core's ucma_create_id for a
	// CONNECT_REQUEST). nullptr on failure (the request is then rejected).
	rdma_cm_id *(*new_conn_id)(rdma_cm_id *listen) = nullptr;
	// Destroys an id made by new_conn_id that never reached the application.
	void (*drop_conn_id)(rdma_cm_id *id) = nullptr;
	// The front end's open context of soft device `index` (soft<index>), or
	// nullptr if that device does not exist.
	ibv_context *(*device_context)(int index) = nullptr;
};
void set_host(const Host &h) noexcept;

// One event made by the soft CM. ev.param.conn/ud.private_data points into
// priv. Released with free_event() after the application acknowledges it.
struct Event {
	rdma_cm_event ev;
	uint8_t priv[256];
};
void free_event(Event *e) noexcept;

class Channel;

// A channel whose fd (channel_fd) is the epoll fd to expose as
// rdma_event_channel::fd. `kernel_fd` (the ucma fd, or -1) joins the set:
// when it is readable, channel_next reports kernel_ready instead of an event.
int channel_open(int kernel_fd, Channel **out) noexcept;
int channel_fd(const Channel *ch) noexcept;
// Fails with EBUSY while ids are attached.
int channel_close(Channel *ch) noexcept;

// The next event of the channel. Blocks unless `nonblock` (then EAGAIN when
// nothing is pending). Returns 0 with *out set, or 0 with *out == nullptr and
// *kernel_ready == true when the kernel's fd has something to read.
int channel_next(Channel *ch, bool nonblock, Event **out, bool *kernel_ready) noexcept;

// Soft CM state of an id. attach when the front end hands the id to this
// backend (its address resolved to a soft device); detach at destroy (closes
// the connection, which the peer sees as a disconnect or a rejection).
int id_attach(rdma_cm_id *id, Channel *ch) noexcept;
void id_detach(rdma_cm_id *id) noexcept;
bool id_attached(const rdma_cm_id *id) noexcept;
// Moves an id to another channel (rdma_migrate_id).
int id_migrate(rdma_cm_id *id, Channel *to) noexcept;

// The rdma_cm verbs (same names and arguments as rdma_cma.h).
int bind_addr(rdma_cm_id *id, const sockaddr *addr) noexcept;
int resolve_addr(rdma_cm_id *id, const sockaddr *src, const sockaddr *dst, int timeout_ms) noexcept;
int resolve_route(rdma_cm_id *id, int timeout_ms) noexcept;
int listen(rdma_cm_id *id, int backlog) noexcept;
int connect(rdma_cm_id *id, const rdma_conn_param *param) noexcept;
int accept(rdma_cm_id *id, const rdma_conn_param *param) noexcept;
int reject(rdma_cm_id *id, const void *private_data, uint8_t private_len) noexcept;
int disconnect(rdma_cm_id *id) noexcept;
int establish(rdma_cm_id *id) noexcept;
int init_qp_attr(rdma_cm_id *id, ibv_qp_attr *attr, int *mask) noexcept;
int join_multicast(rdma_cm_id *id, const sockaddr *addr, void *context, bool send_only) noexcept;
int leave_multicast(rdma_cm_id *id, const sockaddr *addr) noexcept;
// RDMA_OPTION_ID_ACK_TIMEOUT, RDMA_OPTION_ID_TOS (accepted, unused), ...
int set_option(rdma_cm_id *id, int level, int name, const void *val, size_t len) noexcept;

// Soft device index an address belongs to (addr.h), -1 if none.
int device_for(const sockaddr *sa) noexcept;

// Counters for tests: connections refused for a foreign uid, records
// rejected by the parser (wire.h has them per reason).
uint64_t foreign_peer_count() noexcept;

} // namespace ov::usercm
