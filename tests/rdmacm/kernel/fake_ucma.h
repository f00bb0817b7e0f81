// A fake /dev/infiniband/rdma_cm behind the kernel backend's syscall seam
// (src/rdmacm/kernel/ucma.h): it records every command written, byte for
// byte, and answers as the kernel's ucma does. Expected commands are built
// here from the kernel's own structs (<rdma/rdma_user_cm.h>), which cannot
// share a translation unit with <rdma/rdma_cma.h>: the tests only see bytes.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace fake {

using Bytes = std::vector<uint8_t>;

struct Command {
	uint32_t cmd;
	uint16_t in, out;
	Bytes payload; // the command struct after the 8-byte header
};

struct Event {
	uint64_t uid;
	uint32_t id;
	uint32_t event;
	int32_t status;
	Bytes private_data;
	uint32_t qp_num;
	uint32_t qkey;
	uint16_t dlid;
};

// Installs the fake for the lifetime of the object.
class Ucma {
public:
	Ucma();
	~Ucma();
	std::vector<Command> commands;
	std::deque<Event> events;
	int fail_cmd = -1;      // this command number fails ...
	int fail_errno = 0;     // ... with this errno (0: a short write)
	uint32_t next_id = 100; // CREATE_ID answers
	uint64_t node_guid = 0; // QUERY_ROUTE/QUERY answers (0: no device)
	uint32_t ibdev_index = 0;
	uint32_t events_reported = 0; // DESTROY_ID/LEAVE/MIGRATE answers
	int opened = 0, closed = 0;
	int last_fd = -1; // the last device fd opened

	// Commands of one number, in order.
	std::vector<Command> of(uint32_t cmd) const;
	void clear() { commands.clear(); }
};

// Command numbers (RDMA_USER_CM_CMD_*).
enum : uint32_t {
	CREATE_ID = 0, DESTROY_ID, BIND_IP, RESOLVE_IP, RESOLVE_ROUTE, QUERY_ROUTE, CONNECT, LISTEN,
	ACCEPT, REJECT, DISCONNECT, INIT_QP_ATTR, GET_EVENT, GET_OPTION, SET_OPTION, NOTIFY,
	JOIN_IP_MCAST, LEAVE_MCAST, MIGRATE_ID, QUERY, BIND, RESOLVE_ADDR, JOIN_MCAST
};

// Expected payloads, built with the kernel's structs ("resp" fields, which
// hold addresses of the library's stack, are compared separately: the
// builders leave them 0 and the tests mask them).
size_t size_of(uint32_t cmd); // sizeof the kernel's command struct
size_t response_offset(uint32_t cmd); // offset of "response"/"optval", or SIZE_MAX
Bytes create_id(uint64_t uid, uint16_t ps, uint8_t qp_type);
Bytes destroy_id(uint32_t id);
Bytes bind_ip(uint32_t id, const sockaddr *addr, size_t len);
Bytes resolve_ip(uint32_t id, const sockaddr *src, size_t src_len, const sockaddr *dst,
		 size_t dst_len, uint32_t timeout_ms);
Bytes resolve_route(uint32_t id, uint32_t timeout_ms);
Bytes listen(uint32_t id, uint32_t backlog);
Bytes connect(uint32_t id, uint32_t qp_num, const Bytes &pdata, uint8_t resp_res,
	      uint8_t init_depth, uint8_t retry, uint8_t rnr_retry, uint8_t srq);
Bytes accept(uint32_t id, uint64_t uid, uint32_t qp_num, const Bytes &pdata, uint8_t resp_res,
	     uint8_t init_depth, uint8_t rnr_retry);
Bytes disconnect(uint32_t id);
Bytes reject(uint32_t id, const Bytes &pdata, uint8_t reason);
Bytes notify(uint32_t id, uint32_t event);
Bytes join_ip_mcast(uint32_t id, uint64_t uid, const sockaddr *addr, size_t len);
Bytes leave(uint32_t id);
Bytes set_option(uint32_t id, uint32_t level, uint32_t name, uint32_t len);
Bytes migrate(uint32_t id, uint32_t fd);

// The payload with its "response" field zeroed.
Bytes masked(const Command &c);

} // namespace fake
