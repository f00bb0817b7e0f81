// One rsocket: the socket-level state (options, flags, addresses), the
// connection set-up through the public rdma_cm API (its own event channel,
// whose fd is the rsocket's number, as in rdma-core), and the Stream that
// carries the data once connected. A datagram rsocket (SOCK_DGRAM) hands
// every call to its Dgram (dgram.h); its number is its UDP socket's fd.
#pragma once

#include "dgram.h"
#include "stream.h"

#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include <deque>
#include <fcntl.h>
#include <memory>
#include <mutex>
#include <netinet/in.h>
#include <sys/socket.h>
#include <vector>

namespace ov::rs {

enum class Phase {
	init,
	bound,
	listening,
	resolving_addr,
	resolving_route,
	connecting,
	accepting, // accepted; waiting for ESTABLISHED
	connected, // the stream carries data (or did: see Stream::state)
	connect_error,
};

class RSocket {
public:
	RSocket(int domain, int type, const StreamParams &params);
	~RSocket();
	RSocket(const RSocket &) = delete;
	RSocket &operator=(const RSocket &) = delete;

	// Creates the event channel and the CM id. -1/errno.
	int create();
	int fd() const { return dgram_ ? dgram_->fd() : chan_ ? chan_->fd : -1; }
	// The datagram side of a SOCK_DGRAM rsocket, null for streams.
	Dgram *dgram() { return dgram_.get(); }

	int bind(const sockaddr *addr, socklen_t len);
	int listen(int backlog);
	// Returns the accepted rsocket (not yet in the table) or null/errno.
	std::shared_ptr<RSocket> accept();
	int connect(const sockaddr *addr, socklen_t len);
	// Drives a connection in progress one step (or to the end when
	// blocking). 0 connected, -1/errno (EINPROGRESS while in progress,
	// when non-blocking).
	int progress(bool nonblock);
	int shutdown(int how);
	// Called by rclose: graceful shutdown, then everything is released
	// by the destructor.
	void close();

	// Data calls: wait for the connection when it is still being made.
	Stream *ready_stream(bool nonblock);
	bool nonblocking(int flags) const { return (fs_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT); }

	short poll_events(short events);
	// For rpoll's sleep: the fds to watch (up to 2), after arming. Returns
	// non-zero revents instead when something is already ready.
	short arm(short events, int fds[2], int *nfds);
	void after_poll(int fd, short revents);

	int getpeername(sockaddr *addr, socklen_t *len);
	int getsockname(sockaddr *addr, socklen_t *len);
	int setsockopt(int level, int name, const void *val, socklen_t len);
	int getsockopt(int level, int name, void *val, socklen_t *len);

	Phase phase() const { return phase_; }
	Stream *stream() { return stream_.get(); }

	int fd_flags = 0; // FD_CLOEXEC
	int fs_flags = 0; // O_NONBLOCK

private:
	// A connection request read from a listener's channel, checked and
	// acknowledged, waiting for accept().
	struct Request {
		rdma_cm_id *id;
		rdma_conn_param param; // private_data not valid (the event is acknowledged)
		ConnData peer;
	};
	int create_ep();
	int take_requests();
	int next_event(bool nonblock, rdma_cm_event_type *type, int *status,
		       std::vector<uint8_t> *pdata);
	void drain_cm_events();
	static void cm_hook(void *self);
	void fail_connect(int e);
	size_t conn_data_offset() const;

	int domain_;
	int type_;
	StreamParams params_;
	rdma_event_channel *chan_ = nullptr;
	rdma_cm_id *id_ = nullptr;
	ibv_pd *own_pd_ = nullptr;
	std::unique_ptr<Stream> stream_;
	std::unique_ptr<Dgram> dgram_;
	Phase phase_ = Phase::init;
	sockaddr_storage dst_ = {};
	int retries_ = 0;
	int err_ = 0;
	bool was_connected_ = false;
	std::recursive_mutex mu_; // connection state machine
	std::mutex cm_mu_;        // reads of the CM channel once connected

	// Options (rsetsockopt), kept as rdma-core keeps them.
	uint64_t so_opts_ = 0, tcp_opts_ = 0, ipv6_opts_ = 0;
	int ip_tos_ = 0;
	unsigned keepalive_time_ = 0;
	std::vector<uint8_t> route_; // RDMA_ROUTE

	// Listening: the requests read from the channel and not yet accepted.
	// The listener is readable exactly while this holds one (the channel
	// fd alone can be readable with no event: see take_requests()).
	std::deque<Request> requests_;
};

// The table of rsockets by number. lookup() takes no lock for numbers
// below 65536 (one atomic load); the rsocket stays valid until rclose()
// removes it, so a call racing rclose() on the same number is the
// program's error, as with file descriptors (rdma-core's index map has the
// same contract).
RSocket *lookup(int fd);
bool insert(const std::shared_ptr<RSocket> &rs);
std::shared_ptr<RSocket> remove(int fd);

} // namespace ov::rs
