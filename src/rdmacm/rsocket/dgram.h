// A datagram rsocket (SOCK_DGRAM): a UDP socket for addresses and for the
// first messages to a destination, UD QPs for the data (wire.h, "Datagram
// rsockets", has the protocol).
//
// Unlike rdma-core 44, no service thread reads the UDP sockets: an rsocket
// reads its own UDP socket whenever its QPs have nothing for the caller (a
// receive, rpoll, or a send to a destination that has no address handle
// yet), and a blocking call sleeps on one epoll fd that holds the UDP socket
// and every QP's completion channel. A peer's first message therefore waits
// in the UDP socket until the application receives or polls, as a UDP
// datagram would; nothing else changes on the wire.
//
// Locking: one mutex per rsocket for all state; a blocking call releases it
// while it sleeps. Only one thread sleeps in epoll_wait at a time (the
// sleeper); others wait on a condition variable that the sleeper (or rpoll,
// after it consumed an event) signals once it has processed what woke it.
#pragma once

#include "stream.h"
#include "wire.h"

#include <rdma/rdma_cma.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <vector>

namespace ov::rs {

class Dgram {
public:
	Dgram(int domain, const StreamParams &p) : domain_(domain), p_(p) {}
	~Dgram();
	Dgram(const Dgram &) = delete;
	Dgram &operator=(const Dgram &) = delete;

	// The UDP socket (its fd is the rsocket's number) and the epoll fd.
	// -1/errno: socket(2)'s errno (EAFNOSUPPORT for AF_IB).
	int create(bool cloexec);
	int fd() const { return udp_; }

	// bind(2)/connect(2) on the UDP socket after the buffers are made;
	// errno from the kernel (EINVAL bound twice, EADDRINUSE, EFAULT...).
	// connect with AF_UNSPEC dissolves the association.
	int bind(const sockaddr *addr, socklen_t len);
	int connect(const sockaddr *addr, socklen_t len);

	// One datagram from a gather list, to `dst` (or the connected peer
	// when null). Bytes sent, or -1: EDESTADDRREQ (no address, not
	// connected), EMSGSIZE (more than max_payload()), EINVAL/EAFNOSUPPORT
	// (bad address), EAGAIN (non-blocking, no send slot), errno of
	// sendmsg(2) for the first messages that go over UDP.
	ssize_t send(const iovec *iov, int iovcnt, int flags, const sockaddr *dst,
		     socklen_t dstlen, bool nonblock);
	// One datagram into a scatter list: bytes copied (the datagram's
	// length with MSG_TRUNC), the rest of a longer datagram is dropped
	// (kept with MSG_PEEK). `src` receives the sender's address;
	// `*out_flags` gets MSG_TRUNC when the datagram did not fit. -1:
	// EINVAL before bind/connect/send (rdma-core: not readable yet),
	// EAGAIN (non-blocking, nothing queued).
	ssize_t recv(const iovec *iov, int iovcnt, int flags, sockaddr *src, socklen_t *srclen,
		     int *out_flags, bool nonblock);

	// rpoll: POLLIN when a datagram is queued, POLLOUT when a send slot is
	// free (both only once bound, connected or sent from, as rdma-core).
	short poll_events(short events);
	short arm(short events, int fds[2], int *nfds);
	void after_poll(int fd, short revents);

	int getsockname(sockaddr *addr, socklen_t *len);
	int getpeername(sockaddr *addr, socklen_t *len);
	int setsockopt(int level, int name, const void *val, socklen_t len);
	int getsockopt(int level, int name, void *val, socklen_t *len);
	// Waits until every posted send has completed (rclose).
	void close();

	// Largest payload of one datagram: what a peer's 2048-byte receive
	// holds behind the longer of the two headers of our family (2032
	// bytes for IPv4, 2020 for IPv6).
	size_t max_payload() const;

	int so_type() const { return SOCK_DGRAM; }

private:
	struct Qp;
	struct Dest {
		sockaddr_storage addr = {}; // the peer's UDP address (the key)
		Qp *qp = nullptr;           // our QP for the local address toward it
		ibv_ah *ah = nullptr;
		uint32_t qpn = 0;
		uint32_t tried_qpn = 0; // the last handle asked for, and when
		uint64_t tried_ms = 0;
	};
	struct Qp {
		rdma_cm_id *id = nullptr;
		ibv_comp_channel *chan = nullptr;
		ibv_cq *cq = nullptr;
		ibv_mr *smr = nullptr, *rmr = nullptr;
		uint8_t *rbuf = nullptr; // rq_size slots of kGrhBytes + kDgramSlot
		size_t rbuf_alloc = 0;
		DsHeader hdr = {};
		sockaddr_storage local = {};
		bool armed = false;
	};
	// A datagram waiting for the application: a slot of a QP's receive
	// buffer, or (came over UDP) a copy.
	struct Msg {
		Qp *qp = nullptr;
		uint32_t slot = 0;
		uint32_t len = 0; // payload bytes
		sockaddr_storage src = {};
		std::vector<uint8_t> bytes; // qp == nullptr
	};
	using Pred = bool (Dgram::*)() const;

	int init_ep(); // rdma-core's ds_init_ep: sizes and send slots
	bool ready() const { return ready_; }
	int get_dest(const sockaddr *addr, Dest **out);
	int src_addr_for(const sockaddr *dst, sockaddr_storage *src);
	int get_qp(const sockaddr_storage &src, Qp **out);
	int create_qp(const sockaddr_storage &src, Qp **out);
	void free_qp(Qp *qp);
	int post_recv(Qp *qp, uint32_t slot);
	void make_ah(Dest &d, uint32_t qpn);
	ssize_t send_udp(Dest &d, const iovec *iov, int iovcnt, size_t len, int flags, uint8_t op);
	void drain_udp();
	void udp_message(const uint8_t *buf, size_t n, const sockaddr_storage &from);
	void poll_cqs();
	void arm_cqs();
	void take_events();
	int wait_for(std::unique_lock<std::mutex> &lk, Pred pred, bool nonblock);
	bool have_data() const { return !queue_.empty(); }
	bool can_send() const { return !free_slots_.empty(); }
	bool all_sends_done() const { return free_slots_.size() == sq_size_; }
	bool msg_valid(const uint8_t *m, uint32_t n) const;

	int domain_;
	StreamParams p_;
	int udp_ = -1;
	int epfd_ = -1;
	bool ready_ = false;
	uint32_t sq_size_ = 0, rq_size_ = 0, sq_inline_ = 0;
	uint8_t *sbuf_ = nullptr; // sq_size send slots of kDgramSlot bytes
	size_t sbuf_alloc_ = 0;
	std::vector<uint32_t> free_slots_;
	std::vector<std::unique_ptr<Qp>> qps_;
	std::vector<std::unique_ptr<Dest>> dests_;
	Dest *conn_ = nullptr; // rconnect's peer
	std::deque<Msg> queue_;
	size_t local_queued_ = 0; // entries of queue_ that came over UDP

	std::mutex mu_;
	std::condition_variable cv_;
	bool sleeper_ = false;
	unsigned idle_calls_ = 0; // empty non-blocking calls in a row

	// Options (rsetsockopt), kept as rdma-core keeps them.
	uint64_t so_opts_ = 0, ipv6_opts_ = 0;
};

} // namespace ov::rs
