// The data path of a stream rsocket: everything that happens over one
// connected RC QP, whoever connected it (rdma_cm in rsocket.cpp, or a test
// that moved two QPs to RTS by hand). The wire protocol is wire.h's.
//
// Life cycle:
//   Stream s(params);
//   s.open(ctx, pd)            comp channel, CQ, buffers, memory regions
//   s.qp_init_attr()           what to create the QP with (CQs, caps)
//   s.attach(qp, max_inline)   QP created (RESET..RTS done by its creator or
//                              later); receives are posted
//   s.local_conn_data()        our 40 bytes of private data
//   s.start(peer_conn_data)    the peer's; the stream is now readable and
//                              writable
// then send/recv/poll/shutdown from any threads (the same locking as
// rdma-core: sends and receives are serialized among themselves, the CQ is
// shared). close() (or the destructor) releases everything but the QP's
// creator-owned objects (the QP itself is destroyed by whoever created it).
#pragma once

#include "wire.h"

#include <infiniband/verbs.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <list>
#include <mutex>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <vector>

namespace ov::rs {

// An int-valued socket option's answer, as getsockopt(2) gives it: v into
// *val, *len set to sizeof(int); -1 with errno EINVAL when *len is smaller
// (rsocket getsockopt of both kinds of rsocket).
inline int put_int_option(void *val, socklen_t *len, int v)
{
	if (*len < sizeof(int)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(val, &v, sizeof(v));
	*len = sizeof(int);
	return 0;
}

// Buffer and queue sizes of one stream (rsetsockopt SOL_RDMA, SO_SNDBUF,
// SO_RCVBUF; defaults from rs_configure()).
struct StreamParams {
	uint32_t sbuf_size = kDefaultWmem;
	uint32_t rbuf_size = kDefaultMem;
	uint16_t sq_size = kDefaultSqSize;
	uint16_t rq_size = kDefaultRqSize;
	uint16_t sq_inline = kDefaultInline;
	uint16_t iomap_size = 0; // peer-writable iomap entries we offer
	bool msg_send = false;   // iWARP: messages as inline SENDs
};

// Process-wide tunables read once from /etc/rdma/rsocket (rsocket(7)).
struct Tunables {
	StreamParams defaults;
	uint32_t polling_us = kDefaultPollingUs;
	int wake_up_ms = kDefaultWakeUpMs;
};
const Tunables &tunables();

// State bits, ordered like rdma-core's so comparisons keep their meaning.
enum : int {
	kStateConnected = 0x0100,
	kStateWritable = 0x0200,
	kStateReadable = 0x0400,
	kStateConnRdwr = kStateConnected | kStateWritable | kStateReadable,
	kStateDisconnected = 0x1000,
	kStateError = 0x2000,
};

class Stream {
public:
	explicit Stream(const StreamParams &p) : p_(p) {}
	~Stream();
	Stream(const Stream &) = delete;
	Stream &operator=(const Stream &) = delete;

	// Creates the completion channel (non-blocking fd), the CQ, the send,
	// receive and target buffers and their memory regions. -1/errno.
	int open(ibv_context *ctx, ibv_pd *pd);
	// The QP's creation attributes (RC, our CQ, sizes, sq_sig_all).
	ibv_qp_init_attr qp_init_attr() const;
	// Takes the created QP (not owned) and posts the receives. `max_inline`
	// is what the QP reports. -1/errno.
	int attach(ibv_qp *qp, uint32_t max_inline);
	ConnData local_conn_data() const;
	// The peer's private data; the stream becomes readable and writable.
	int start(const ConnData &peer);

	// Socket calls. Return like send(2)/recv(2): bytes, or -1 with errno.
	ssize_t send(const iovec *iov, int iovcnt, int flags, bool nonblock);
	ssize_t recv(void *buf, size_t len, int flags, bool nonblock);
	size_t iowrite(const void *buf, size_t count, off_t offset, int flags, bool nonblock);
	// poll(2) events for this stream (POLLIN, POLLOUT, POLLHUP, POLLERR),
	// after processing what the CQ holds. Never blocks.
	short poll_events(short events);
	// Arms the CQ for rpoll (true when armed and nothing is pending).
	bool arm_for_poll();
	// After rpoll saw the channel fd readable: consume the event.
	void take_cq_event();
	int channel_fd() const { return chan_ ? chan_->fd : -1; }
	int shutdown(int how);
	// The CM reported the connection gone (DISCONNECTED, device removal).
	void cm_disconnected();
	// The QP moved to the error state by us (wakes pollers: flushes).
	int state() const { return state_.load(std::memory_order_acquire); }
	int take_error();
	int error() const { return err_; }
	bool msg_send() const { return p_.msg_send; }
	const StreamParams &params() const { return p_; }
	ibv_pd *pd() const { return pd_; }
	ibv_cq *cq() const { return cq_; }
	ibv_qp *qp() const { return qp_; }

	// Hook the blocking waits also watch: the CM event channel of the
	// connection (fd) and what to do when it is readable.
	void set_cm_hook(int fd, void (*fn)(void *), void *arg)
	{
		cm_fd_ = fd;
		cm_fn_ = fn;
		cm_arg_ = arg;
	}

	// riomap()/riounmap() (iomap.cpp).
	off_t iomap(void *buf, size_t len, int prot, int flags, off_t offset);
	int iounmap(void *buf, size_t len);

private:
	struct IomapMr {
		uint64_t offset = 0;
		ibv_mr *mr = nullptr;
		int index = -1; // slot in the peer's table; -1: local only
	};
	using Test = bool (Stream::*)() const;

	// Completion processing (rs_process_cq/rs_get_comp semantics).
	int process_cq(bool nonblock, Test test);
	int get_comp(bool nonblock, Test test);
	// Reads the CM channel when it has something (at most once a ms).
	bool check_cm();
	int poll_cq();
	int wait_cq_event();
	bool get_cq_event();
	// Size of the next transfer of a large send: 2 KiB doubling up to
	// 64 KiB (rdma-core's overlap of copy and transfer), within the
	// free send space.
	uint32_t next_chunk(uint32_t &olen, size_t left) const;
	int post_recv();
	int post_msg(uint32_t msg);
	int post_write(const ibv_sge *sgl, int nsge, uint32_t wr_data, int flags,
		       uint64_t addr, uint32_t rkey);
	int post_write_msg(const ibv_sge *sgl, int nsge, uint32_t msg, int flags,
			   uint64_t addr, uint32_t rkey);
	int write_data(const ibv_sge *sgl, int nsge, uint32_t length, int flags);
	void send_credits();
	void update_credits();
	bool give_credits() const;
	bool ctrl_avail() const { return ctrl_seqno_ != ctrl_max_seqno_; }
	bool ctrl2_avail() const { return static_cast<int>(ctrl_seqno_ + 1 - ctrl_max_seqno_) < 0; }
	uint32_t sbuf_left() const;
	int send_iomaps(int flags, bool nonblock);
	// Copies `len` bytes of the gather list into the send ring and returns
	// the SGEs that cover them (1 or 2).
	int stage(const iovec *&iov, size_t &off, uint32_t len, ibv_sge sgl[2]);
	int wait_sendable(bool nonblock);
	void set_error(int e);

	// Predicates for process_cq.
	bool can_send() const;
	bool conn_can_send() const { return can_send() || !(state() & kStateWritable); }
	bool conn_can_send_ctrl() const { return ctrl_avail() || !(state() & kStateConnected); }
	bool have_rdata() const { return rmsg_head_ != rmsg_tail_; }
	bool conn_have_rdata() const { return have_rdata() || !(state() & kStateReadable); }
	bool all_sends_done() const;
	bool always() const { return true; }
	bool cq_is_armed() const { return cq_armed_; }
	size_t peek(void *buf, size_t len) const;
	uint32_t copy_out(uint8_t *out, uint32_t off, uint32_t n) const;

	StreamParams p_;
	ibv_context *ctx_ = nullptr;
	ibv_pd *pd_ = nullptr;
	ibv_comp_channel *chan_ = nullptr;
	ibv_cq *cq_ = nullptr;
	ibv_qp *qp_ = nullptr;
	int cm_fd_ = -1;
	void (*cm_fn_)(void *) = nullptr;
	void *cm_arg_ = nullptr;
	std::atomic<uint64_t> last_cm_check_us_{0};
	std::atomic<unsigned> idle_calls_{0}; // empty non-blocking calls in a row

	std::atomic<int> state_{0};
	int err_ = 0;
	bool swap_sgl_ = false;

	std::mutex send_mu_, recv_mu_, cq_mu_, cq_wait_mu_, map_mu_;

	// Send side.
	uint8_t *sbuf_ = nullptr;
	size_t sbuf_alloc_ = 0;
	ibv_mr *smr_ = nullptr;
	ibv_sge ssgl_[2] = {};
	// Counters touched both by the sending thread and by whoever processes
	// the CQ: atomic.
	std::atomic<uint32_t> sbuf_bytes_avail_{0};
	std::atomic<int> sqe_avail_{0};
	uint16_t sseq_no_ = 0;
	std::atomic<uint16_t> sseq_comp_{0};
	unsigned ctrl_seqno_ = 0, ctrl_max_seqno_ = kCtrlSlots;
	// Where our data goes: the peer's halves, written by the peer into our
	// target list (volatile: remote writes).
	void *target_list_ = nullptr;
	size_t target_alloc_ = 0;
	ibv_mr *target_mr_ = nullptr;
	volatile Sge *target_sgl_ = nullptr;
	IomapEntry *target_iomap_ = nullptr;
	unsigned target_sge_ = 0;
	// The peer's target list (where our SGL updates go) and iomap table.
	Sge remote_sgl_ = {};
	Sge remote_iomap_ = {};
	unsigned remote_sge_ = 1;

	// Receive side.
	uint8_t *rbuf_ = nullptr;
	size_t rbuf_alloc_ = 0;
	ibv_mr *rmr_ = nullptr;
	std::atomic<uint32_t> rbuf_bytes_avail_{0};
	uint32_t rbuf_free_offset_ = 0, rbuf_offset_ = 0;
	uint32_t rbuf_msg_index_ = 0;
	std::atomic<uint16_t> rseq_no_{0};
	uint16_t rseq_comp_ = 0;
	std::vector<uint32_t> rmsg_; // pending DATA lengths, rq_size + 1 slots
	std::atomic<uint32_t> rmsg_head_{0}, rmsg_tail_{0};

	std::atomic<bool> cq_armed_{false};
	unsigned unack_cqe_ = 0;

	// iomap: the peer's slots we fill, and our pending announcements.
	std::vector<IomapMr> remote_maps_;   // indexed by slot
	std::list<IomapMr> local_maps_;      // PROT_NONE mappings
	std::list<int> iomap_queue_;         // slots still to announce
	std::atomic<bool> iomap_pending_{false};
};

} // namespace ov::rs
