// The stream data path (see stream.h and wire.h). The counters and their
// meaning follow rdma-core 44's rsockets so that a Debian peer and we agree
// on every credit and buffer half; the code is ours.
#include "stream.h"

#include <algorithm>
#include <byteswap.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef OPENVERBS_RSOCKET_CONF_DIR
#define OPENVERBS_RSOCKET_CONF_DIR "/etc/rdma/rsocket"
#endif

namespace ov::rs {
namespace {

constexpr uint64_t kRecvFlag = 1ull << 63;    // wr_id of receives
constexpr uint64_t kMsgSendFlag = 1ull << 62; // wr_id of iWARP message SENDs

uint64_t now_us()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

// Whole, zeroed pages: registered memory must not share a page with
// anything a forked child might touch (MADV_DONTFORK under fork support).
void *alloc_pages(size_t len, size_t *alloc)
{
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0)
		page = 4096;
	size_t sz = (len + static_cast<size_t>(page) - 1) / static_cast<size_t>(page) * static_cast<size_t>(page);
	if (sz == 0)
		sz = static_cast<size_t>(page);
	void *p = nullptr;
	if (posix_memalign(&p, static_cast<size_t>(page), sz))
		return nullptr;
	memset(p, 0, sz);
	*alloc = sz;
	return p;
}

bool read_conf(const char *name, unsigned long *out)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", OPENVERBS_RSOCKET_CONF_DIR, name);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	unsigned long v = 0;
	bool ok = fscanf(f, "%lu", &v) == 1;
	fclose(f);
	if (ok)
		*out = v;
	return ok;
}

Tunables load_tunables()
{
	Tunables t;
	unsigned long v;
	if (read_conf("polling_time", &v))
		t.polling_us = static_cast<uint32_t>(v);
	if (read_conf("wake_up_interval", &v))
		t.wake_up_ms = static_cast<int>(std::min<unsigned long>(v, 1u << 30));
	if (read_conf("inline_default", &v))
		t.defaults.sq_inline = static_cast<uint16_t>(std::min<unsigned long>(v, kQueueMax));
	if (read_conf("sqsize_default", &v))
		t.defaults.sq_size = static_cast<uint16_t>(std::min<unsigned long>(v, kQueueMax));
	if (read_conf("rqsize_default", &v))
		t.defaults.rq_size = static_cast<uint16_t>(std::min<unsigned long>(v, kQueueMax));
	if (read_conf("mem_default", &v))
		t.defaults.rbuf_size = static_cast<uint32_t>(std::clamp<unsigned long>(v, 1, 1u << 30));
	if (read_conf("wmem_default", &v)) {
		t.defaults.sbuf_size = static_cast<uint32_t>(std::min<unsigned long>(v, 1u << 30));
		if (t.defaults.sbuf_size < kSendLowWater)
			t.defaults.sbuf_size = kSendLowWater << 1;
	}
	if (read_conf("iomap_size", &v))
		t.defaults.iomap_size = static_cast<uint16_t>(scale_of(value_of(static_cast<int>(std::min<unsigned long>(v, 0xffff)))) & 0xff);
	return t;
}

int fail(int e)
{
	errno = e;
	return -1;
}

} // namespace

const Tunables &tunables()
{
	static const Tunables t = load_tunables();
	return t;
}

Stream::~Stream()
{
	for (auto &m : remote_maps_)
		if (m.mr)
			ibv_dereg_mr(m.mr);
	for (auto &m : local_maps_)
		if (m.mr)
			ibv_dereg_mr(m.mr);
	if (smr_)
		ibv_dereg_mr(smr_);
	if (rmr_)
		ibv_dereg_mr(rmr_);
	if (target_mr_)
		ibv_dereg_mr(target_mr_);
	free(sbuf_);
	free(rbuf_);
	free(target_list_);
	if (cq_) {
		if (unack_cqe_)
			ibv_ack_cq_events(cq_, unack_cqe_);
		ibv_destroy_cq(cq_);
	}
	if (chan_)
		ibv_destroy_comp_channel(chan_);
}

int Stream::open(ibv_context *ctx, ibv_pd *pd)
{
	if (!ctx || !pd)
		return fail(EINVAL);
	ctx_ = ctx;
	pd_ = pd;

	// Queue sizes within what the device and the protocol allow.
	ibv_device_attr da = {};
	int max_wr = kQueueMax;
	if (!ibv_query_device(ctx, &da) && da.max_qp_wr > 0)
		max_wr = std::min<int>(da.max_qp_wr, kQueueMax);
	p_.sq_size = static_cast<uint16_t>(std::clamp<int>(p_.sq_size, kQueueMin, max_wr));
	p_.rq_size = static_cast<uint16_t>(std::clamp<int>(p_.rq_size, kQueueMin, max_wr));
	if (p_.msg_send && p_.sq_inline < sizeof(uint32_t))
		p_.sq_inline = sizeof(uint32_t);
	if (p_.sbuf_size < (kSendLowWater << 1))
		p_.sbuf_size = kSendLowWater << 1;
	if (p_.rbuf_size < 2)
		p_.rbuf_size = 2;

	chan_ = ibv_create_comp_channel(ctx);
	if (!chan_)
		return -1;
	int fl = fcntl(chan_->fd, F_GETFL);
	if (fl < 0 || fcntl(chan_->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	cq_ = ibv_create_cq(ctx, p_.sq_size + p_.rq_size, this, chan_, 0);
	if (!cq_)
		return -1;
	if (ibv_req_notify_cq(cq_, 0) == 0)
		cq_armed_ = true;

	// Send ring, followed by the control slots used when SGL updates
	// cannot go inline.
	sbuf_ = static_cast<uint8_t *>(alloc_pages(p_.sbuf_size + kMaxCtrlMsg * kCtrlSlots, &sbuf_alloc_));
	if (!sbuf_)
		return fail(ENOMEM);
	smr_ = ibv_reg_mr(pd, sbuf_, p_.sbuf_size + kMaxCtrlMsg * kCtrlSlots, IBV_ACCESS_LOCAL_WRITE);
	if (!smr_)
		return -1;

	size_t tlen = sizeof(Sge) * kSglEntries + sizeof(IomapEntry) * p_.iomap_size;
	target_list_ = alloc_pages(tlen, &target_alloc_);
	if (!target_list_)
		return fail(ENOMEM);
	target_mr_ = ibv_reg_mr(pd, target_list_, tlen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!target_mr_)
		return -1;
	target_sgl_ = static_cast<volatile Sge *>(target_list_);
	if (p_.iomap_size)
		target_iomap_ = reinterpret_cast<IomapEntry *>(static_cast<uint8_t *>(target_list_) + sizeof(Sge) * kSglEntries);

	size_t rlen = p_.rbuf_size + (p_.msg_send ? p_.rq_size * sizeof(uint32_t) : 0);
	rbuf_ = static_cast<uint8_t *>(alloc_pages(rlen, &rbuf_alloc_));
	if (!rbuf_)
		return fail(ENOMEM);
	rmr_ = ibv_reg_mr(pd, rbuf_, rlen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!rmr_)
		return -1;

	ssgl_[0].addr = ssgl_[1].addr = reinterpret_cast<uintptr_t>(sbuf_);
	ssgl_[0].lkey = ssgl_[1].lkey = smr_->lkey;
	sbuf_bytes_avail_ = p_.sbuf_size;
	// The first half of rbuf goes out in the private data; the second is
	// offered with the first credit update.
	rbuf_free_offset_ = p_.rbuf_size >> 1;
	rbuf_bytes_avail_ = p_.rbuf_size >> 1;
	sqe_avail_ = p_.sq_size - static_cast<int>(ctrl_max_seqno_);
	rseq_comp_ = p_.rq_size >> 1;
	rmsg_.assign(p_.rq_size + 1u, 0);
	return 0;
}

ibv_qp_init_attr Stream::qp_init_attr() const
{
	ibv_qp_init_attr a = {};
	a.qp_context = const_cast<Stream *>(this);
	a.send_cq = cq_;
	a.recv_cq = cq_;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 1;
	a.cap.max_send_wr = p_.sq_size;
	a.cap.max_recv_wr = p_.rq_size;
	a.cap.max_send_sge = 2;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = p_.sq_inline;
	return a;
}

int Stream::attach(ibv_qp *qp, uint32_t max_inline)
{
	if (!qp || !cq_)
		return fail(EINVAL);
	qp_ = qp;
	p_.sq_inline = static_cast<uint16_t>(std::min<uint32_t>(max_inline, kQueueMax));
	if (p_.msg_send && p_.sq_inline < sizeof(uint32_t))
		return fail(ENOTSUP);
	for (unsigned i = 0; i < p_.rq_size; i++)
		if (post_recv())
			return -1;
	return 0;
}

ConnData Stream::local_conn_data() const
{
	ConnData c = {};
	c.version = kConnVersion;
	c.flags = kConnFlagIomap | (__BYTE_ORDER == __BIG_ENDIAN ? kConnFlagNet : 0);
	c.credits_be = htobe16(p_.rq_size);
	c.iomap_size = static_cast<uint8_t>(scale_of(p_.iomap_size));
	c.target_sgl_be.addr = htobe64(reinterpret_cast<uintptr_t>(target_list_));
	c.target_sgl_be.length = htobe32(kSglEntries);
	c.target_sgl_be.key = htobe32(target_mr_ ? target_mr_->rkey : 0);
	c.data_buf_be.addr = htobe64(reinterpret_cast<uintptr_t>(rbuf_));
	c.data_buf_be.length = htobe32(p_.rbuf_size >> 1);
	c.data_buf_be.key = htobe32(rmr_ ? rmr_->rkey : 0);
	return c;
}

int Stream::start(const ConnData &peer)
{
	if (peer.version != kConnVersion)
		return fail(ENOTSUP);
	remote_sgl_.addr = be64toh(peer.target_sgl_be.addr);
	remote_sgl_.length = be32toh(peer.target_sgl_be.length);
	remote_sgl_.key = be32toh(peer.target_sgl_be.key);
	if (remote_sgl_.length == 0)
		return fail(EPROTO);
	remote_sge_ = 1 % remote_sgl_.length;
	bool peer_net = peer.flags & kConnFlagNet;
	swap_sgl_ = peer_net != (__BYTE_ORDER == __BIG_ENDIAN);
	if (peer.flags & kConnFlagIomap) {
		remote_iomap_.addr = remote_sgl_.addr + sizeof(Sge) * remote_sgl_.length;
		remote_iomap_.length = static_cast<uint32_t>(value_of(peer.iomap_size));
		remote_iomap_.key = remote_sgl_.key;
		remote_maps_.assign(remote_iomap_.length, IomapMr{});
		for (uint32_t i = 0; i < remote_iomap_.length; i++)
			remote_maps_[i].index = static_cast<int>(i);
	}
	target_sgl_[0].addr = be64toh(peer.data_buf_be.addr);
	target_sgl_[0].length = be32toh(peer.data_buf_be.length);
	target_sgl_[0].key = be32toh(peer.data_buf_be.key);
	sseq_comp_ = be16toh(peer.credits_be);
	state_.store(kStateConnRdwr, std::memory_order_release);
	return 0;
}

void Stream::set_error(int e)
{
	if (state_.load() & kStateConnected) {
		err_ = e;
		state_.store(kStateError, std::memory_order_release);
	}
}

int Stream::take_error()
{
	int e = err_;
	err_ = 0;
	return e;
}

int Stream::post_recv()
{
	ibv_recv_wr wr = {}, *bad = nullptr;
	ibv_sge sge;
	if (!p_.msg_send) {
		wr.wr_id = kRecvFlag;
	} else {
		wr.wr_id = kRecvFlag | rbuf_msg_index_;
		sge.addr = reinterpret_cast<uintptr_t>(rbuf_) + p_.rbuf_size + rbuf_msg_index_ * sizeof(uint32_t);
		sge.length = sizeof(uint32_t);
		sge.lkey = rmr_->lkey;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		if (++rbuf_msg_index_ == p_.rq_size)
			rbuf_msg_index_ = 0;
	}
	int r = ibv_post_recv(qp_, &wr, &bad);
	return r ? fail(r) : 0;
}

int Stream::post_msg(uint32_t msg)
{
	ibv_send_wr wr = {}, *bad = nullptr;
	ibv_sge sge;
	wr.wr_id = msg;
	if (!p_.msg_send) {
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htobe32(msg);
	} else {
		sge.addr = reinterpret_cast<uintptr_t>(&msg);
		sge.length = sizeof(msg);
		sge.lkey = 0;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_INLINE;
	}
	int r = ibv_post_send(qp_, &wr, &bad);
	return r ? fail(r) : 0;
}

int Stream::post_write(const ibv_sge *sgl, int nsge, uint32_t wr_data, int flags,
		       uint64_t addr, uint32_t rkey)
{
	ibv_send_wr wr = {}, *bad = nullptr;
	wr.wr_id = wr_data;
	wr.sg_list = const_cast<ibv_sge *>(sgl);
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = static_cast<unsigned>(flags);
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	int r = ibv_post_send(qp_, &wr, &bad);
	return r ? fail(r) : 0;
}

int Stream::post_write_msg(const ibv_sge *sgl, int nsge, uint32_t msg, int flags,
			   uint64_t addr, uint32_t rkey)
{
	if (!p_.msg_send) {
		ibv_send_wr wr = {}, *bad = nullptr;
		wr.wr_id = msg;
		wr.sg_list = const_cast<ibv_sge *>(sgl);
		wr.num_sge = nsge;
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.send_flags = static_cast<unsigned>(flags);
		wr.imm_data = htobe32(msg);
		wr.wr.rdma.remote_addr = addr;
		wr.wr.rdma.rkey = rkey;
		int r = ibv_post_send(qp_, &wr, &bad);
		return r ? fail(r) : 0;
	}
	// iWARP: the bytes, then the message word as an inline SEND (host
	// order, as rdma-core sends it).
	if (post_write(sgl, nsge, msg, flags, addr, rkey))
		return -1;
	ibv_send_wr wr = {}, *bad = nullptr;
	ibv_sge sge;
	sge.addr = reinterpret_cast<uintptr_t>(&msg);
	sge.length = sizeof(msg);
	sge.lkey = 0;
	wr.wr_id = make_msg(msg_op(msg), 0) | kMsgSendFlag;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_INLINE;
	int r = ibv_post_send(qp_, &wr, &bad);
	return r ? fail(r) : 0;
}

// The target SGE is advanced before the write is posted: the peer may
// refill the entry as soon as the data lands.
int Stream::write_data(const ibv_sge *sgl, int nsge, uint32_t length, int flags)
{
	sseq_no_++;
	sqe_avail_ -= p_.msg_send ? 2 : 1;
	sbuf_bytes_avail_ -= length;
	volatile Sge &t = target_sgl_[target_sge_];
	uint64_t addr = t.addr;
	uint32_t rkey = t.key;
	t.addr = addr + length;
	t.length = t.length - length;
	if (t.length == 0)
		target_sge_ = (target_sge_ + 1) % kSglEntries;
	return post_write_msg(sgl, nsge, make_msg(Op::data, length), flags, addr, rkey);
}

uint32_t Stream::sbuf_left() const
{
	return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(sbuf_ + p_.sbuf_size) - ssgl_[0].addr);
}

bool Stream::give_credits() const
{
	bool want = rbuf_bytes_avail_ >= (p_.rbuf_size >> 1) ||
		    static_cast<int16_t>(static_cast<uint16_t>(rseq_no_ - rseq_comp_)) >= 0;
	bool slot = p_.msg_send ? ctrl2_avail() : ctrl_avail();
	return want && slot && (state() & kStateConnected);
}

// Grants credits up to rseq_no + rq_size and, when a whole half of the
// receive buffer is free again, hands it to the peer by writing the next
// entry of its target SGE array.
void Stream::send_credits()
{
	ctrl_seqno_++;
	rseq_comp_ = static_cast<uint16_t>(rseq_no_ + (p_.rq_size >> 1));
	uint32_t grant = static_cast<uint16_t>(rseq_no_ + p_.rq_size);
	int r;
	if (rbuf_bytes_avail_ >= (p_.rbuf_size >> 1)) {
		if (p_.msg_send)
			ctrl_seqno_++;
		Sge sge;
		uint64_t a = reinterpret_cast<uintptr_t>(rbuf_ + rbuf_free_offset_);
		sge.addr = swap_sgl_ ? bswap_64(a) : a;
		sge.key = swap_sgl_ ? bswap_32(rmr_->rkey) : rmr_->rkey;
		sge.length = swap_sgl_ ? bswap_32(p_.rbuf_size >> 1) : (p_.rbuf_size >> 1);
		ibv_sge isge;
		int flags;
		if (p_.sq_inline >= sizeof(sge)) {
			isge.addr = reinterpret_cast<uintptr_t>(&sge);
			isge.lkey = 0;
			flags = IBV_SEND_INLINE;
		} else {
			uint8_t *slot = sbuf_ + p_.sbuf_size + kMaxCtrlMsg * (ctrl_seqno_ & (kCtrlSlots - 1));
			memcpy(slot, &sge, sizeof(sge));
			isge.addr = reinterpret_cast<uintptr_t>(slot);
			isge.lkey = smr_->lkey;
			flags = 0;
		}
		isge.length = sizeof(sge);
		r = post_write_msg(&isge, 1, make_msg(Op::sgl, grant), flags,
				   remote_sgl_.addr + remote_sge_ * sizeof(Sge), remote_sgl_.key);
		rbuf_bytes_avail_ -= p_.rbuf_size >> 1;
		rbuf_free_offset_ += p_.rbuf_size >> 1;
		if (rbuf_free_offset_ >= p_.rbuf_size)
			rbuf_free_offset_ = 0;
		remote_sge_ = (remote_sge_ + 1) % remote_sgl_.length;
	} else {
		r = post_msg(make_msg(Op::sgl, grant));
	}
	if (r)
		set_error(errno);
}

void Stream::update_credits()
{
	if (give_credits())
		send_credits();
}

int Stream::poll_cq()
{
	ibv_wc wc[16];
	int n, reposts = 0;
	while ((n = ibv_poll_cq(cq_, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			const ibv_wc &w = wc[i];
			if (w.wr_id & kRecvFlag) {
				if (w.status != IBV_WC_SUCCESS)
					continue;
				reposts++;
				uint32_t msg;
				if (w.wc_flags & IBV_WC_WITH_IMM) {
					msg = be32toh(w.imm_data);
				} else {
					uint32_t idx = static_cast<uint32_t>(w.wr_id);
					if (!p_.msg_send || idx >= p_.rq_size)
						continue; // not a message of the protocol
					memcpy(&msg, rbuf_ + p_.rbuf_size + idx * sizeof(uint32_t), sizeof(msg));
				}
				switch (msg_op(msg)) {
				case Op::sgl:
					sseq_comp_ = static_cast<uint16_t>(msg_data(msg));
					break;
				case Op::iomap_sgl:
				case Op::write:
					break;
				case Op::ctrl:
					if (msg_data(msg) == static_cast<uint32_t>(Ctrl::disconnect)) {
						state_.store(kStateDisconnected);
					} else if (msg_data(msg) == static_cast<uint32_t>(Ctrl::shutdown)) {
						int s = state();
						if (s & kStateWritable)
							state_.store(s & ~kStateReadable);
						else
							state_.store(kStateDisconnected);
					}
					break;
				default: {
					uint32_t next = rmsg_tail_ + 1 == rmsg_.size() ? 0 : rmsg_tail_ + 1;
					if (next == rmsg_head_) {
						// More data messages than credits granted.
						set_error(EPROTO);
						break;
					}
					rmsg_[rmsg_tail_] = msg_data(msg);
					rmsg_tail_ = next;
					break;
				}
				}
			} else {
				uint32_t data = static_cast<uint32_t>(w.wr_id);
				switch (msg_op(data)) {
				case Op::sgl:
					ctrl_max_seqno_++;
					break;
				case Op::ctrl:
					ctrl_max_seqno_++;
					if (msg_data(data) == static_cast<uint32_t>(Ctrl::disconnect))
						state_.store(kStateDisconnected);
					break;
				case Op::iomap_sgl:
					sqe_avail_++;
					if (!(w.wr_id & kMsgSendFlag))
						sbuf_bytes_avail_ += sizeof(IomapEntry);
					break;
				default:
					sqe_avail_++;
					sbuf_bytes_avail_ += msg_data(data);
					break;
				}
				if (w.status != IBV_WC_SUCCESS)
					set_error(EIO);
			}
		}
	}
	int ret = n < 0 ? fail(EIO) : 0;
	if (n < 0)
		set_error(EIO);
	if (state() & kStateConnected) {
		while (!ret && reposts--)
			ret = post_recv();
		if (ret)
			set_error(errno);
	}
	return ret;
}

// Sleeps until the CQ or the CM channel has something, or the wake-up
// interval passes (a lost notification then costs at most that long).
int Stream::wait_cq_event()
{
	if (!cq_armed_)
		return 0;
	pollfd fds[2] = {{chan_->fd, POLLIN, 0}, {cm_fd_, POLLIN, 0}};
	int r = ::poll(fds, cm_fd_ >= 0 ? 2 : 1, tunables().wake_up_ms);
	if (r < 0)
		return -1; // EINTR and friends go to the caller, like a socket
	if (r == 0) {
		cq_armed_ = false;
		return 0;
	}
	if (cm_fd_ >= 0 && fds[1].revents && cm_fn_)
		cm_fn_(cm_arg_);
	if (fds[0].revents) {
		get_cq_event();
		cq_armed_ = false;
	}
	return 0;
}

void Stream::take_cq_event()
{
	std::lock_guard<std::mutex> g(cq_wait_mu_);
	while (get_cq_event())
		cq_armed_ = false;
}

// Reads one event of the (non-blocking) channel; acknowledges in batches.
bool Stream::get_cq_event()
{
	ibv_cq *cq;
	void *ctx;
	if (ibv_get_cq_event(chan_, &cq, &ctx))
		return false;
	if (++unack_cqe_ >= static_cast<unsigned>(p_.sq_size + p_.rq_size)) {
		ibv_ack_cq_events(cq_, unack_cqe_);
		unack_cqe_ = 0;
	}
	return true;
}

uint32_t Stream::next_chunk(uint32_t &olen, size_t left) const
{
	uint32_t xfer;
	if (olen < left) {
		xfer = olen;
		if (olen < kMaxChunk)
			olen <<= 1;
	} else {
		xfer = static_cast<uint32_t>(left);
	}
	return std::min<uint32_t>(xfer, sbuf_bytes_avail_);
}

// Polls and processes completions until `test` holds; sleeps on the
// completion channel unless `nonblock` (then EWOULDBLOCK).
int Stream::process_cq(bool nonblock, Test test)
{
	std::unique_lock<std::mutex> g(cq_mu_);
	int ret;
	for (;;) {
		update_credits();
		ret = poll_cq();
		if ((this->*test)()) {
			ret = 0;
			break;
		}
		if (ret)
			break;
		if (nonblock) {
			ret = fail(EWOULDBLOCK);
			break;
		}
		if (!cq_armed_) {
			ibv_req_notify_cq(cq_, 0);
			cq_armed_ = true;
			continue;
		}
		update_credits();
		std::unique_lock<std::mutex> w(cq_wait_mu_);
		g.unlock();
		ret = wait_cq_event();
		w.unlock();
		g.lock();
		if (ret)
			break;
	}
	update_credits();
	return ret;
}

int Stream::get_comp(bool nonblock, Test test)
{
	uint64_t start = 0;
	for (;;) {
		int r = process_cq(true, test);
		if (!r || errno != EWOULDBLOCK) {
			idle_calls_ = 0;
			return r;
		}
		if (nonblock) {
			// A caller that only ever polls never sleeps on the CM
			// channel: look at it now and then, so that a dead peer
			// still ends the stream.
			if (check_cm() && !process_cq(true, test))
				return 0;
			// A caller spinning on EAGAIN waits for the peer, which on
			// a busy host may be waiting for a CPU: every 16th empty
			// call in a row gives the CPU away.
			if ((++idle_calls_ & 15) == 0)
				sched_yield();
			errno = EWOULDBLOCK;
			return -1;
		}
		uint64_t t = now_us();
		if (!start)
			start = t;
		if (t - start > tunables().polling_us)
			break;
	}
	return process_cq(false, test);
}

bool Stream::check_cm()
{
	if (cm_fd_ < 0 || !cm_fn_)
		return false;
	uint64_t t = now_us();
	if (t - last_cm_check_us_ < 1000)
		return false;
	last_cm_check_us_ = t;
	pollfd p = {cm_fd_, POLLIN, 0};
	if (::poll(&p, 1, 0) <= 0)
		return false;
	cm_fn_(cm_arg_);
	return true;
}

bool Stream::can_send() const
{
	return sqe_avail_ >= (p_.msg_send ? 2 : 1) && sbuf_bytes_avail_ >= kSendLowWater &&
	       sseq_no_ != sseq_comp_ && target_sgl_[target_sge_].length != 0;
}

bool Stream::all_sends_done() const
{
	return static_cast<int>(ctrl_max_seqno_ - ctrl_seqno_) + sqe_avail_ == p_.sq_size ||
	       !(state() & kStateConnected);
}

int Stream::wait_sendable(bool nonblock)
{
	if (can_send())
		return 0;
	if (get_comp(nonblock, &Stream::conn_can_send))
		return -1;
	if (!(state() & kStateWritable))
		return fail(ECONNRESET);
	return 0;
}

int Stream::stage(const iovec *&iov, size_t &off, uint32_t len, ibv_sge sgl[2])
{
	auto copy = [&](uint8_t *dst, size_t n) {
		while (n) {
			size_t chunk = std::min(n, iov->iov_len - off);
			memcpy(dst, static_cast<const uint8_t *>(iov->iov_base) + off, chunk);
			dst += chunk;
			n -= chunk;
			off += chunk;
			if (off == iov->iov_len) {
				iov++;
				off = 0;
			}
		}
	};
	// Skip empty iovecs so that `iov` points at the next byte.
	uint32_t room = sbuf_left();
	uint8_t *at = reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(ssgl_[0].addr));
	if (len <= room) {
		copy(at, len);
		sgl[0] = {ssgl_[0].addr, len, smr_->lkey};
		ssgl_[0].addr = len < room ? ssgl_[0].addr + len : reinterpret_cast<uintptr_t>(sbuf_);
		return 1;
	}
	copy(at, room);
	copy(sbuf_, len - room);
	sgl[0] = {ssgl_[0].addr, room, smr_->lkey};
	sgl[1] = {reinterpret_cast<uintptr_t>(sbuf_), len - room, smr_->lkey};
	ssgl_[0].addr = reinterpret_cast<uintptr_t>(sbuf_) + (len - room);
	return 2;
}

ssize_t Stream::send(const iovec *iov, int iovcnt, int flags, bool nonblock)
{
	size_t len = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > SSIZE_MAX - len)
			return fail(EINVAL);
		if (iov[i].iov_len && !iov[i].iov_base)
			return fail(EFAULT);
		len += iov[i].iov_len;
	}
	std::lock_guard<std::mutex> g(send_mu_);
	if (!(state() & kStateWritable))
		return fail((state() & kStateConnected) ? EPIPE : ECONNRESET);
	if (iomap_pending_ && send_iomaps(flags, nonblock))
		return -1;
	while (iovcnt && iov->iov_len == 0) {
		iov++;
		iovcnt--;
	}
	size_t left = len, off = 0;
	uint32_t olen = kFirstChunk;
	int ret = 0;
	while (left) {
		if ((ret = wait_sendable(nonblock)))
			break;
		uint32_t xfer = next_chunk(olen, left);
		xfer = std::min<uint32_t>(xfer, static_cast<uint32_t>(target_sgl_[target_sge_].length));
		ibv_sge sgl[2];
		if (xfer <= p_.sq_inline && iov->iov_len - off >= xfer) {
			// Inline straight from the caller's memory.
			sgl[0] = {reinterpret_cast<uintptr_t>(iov->iov_base) + off, xfer, 0};
			off += xfer;
			if (off == iov->iov_len) {
				iov++;
				off = 0;
			}
			ret = write_data(sgl, 1, xfer, IBV_SEND_INLINE);
		} else {
			int n = stage(iov, off, xfer, sgl);
			ret = write_data(sgl, n, xfer, xfer <= p_.sq_inline ? IBV_SEND_INLINE : 0);
		}
		if (ret) {
			set_error(errno);
			break;
		}
		left -= xfer;
		// Skip exhausted empty iovecs.
		while (left && iov->iov_len == off) {
			iov++;
			off = 0;
		}
	}
	return (ret && left == len) ? -1 : static_cast<ssize_t>(len - left);
}

size_t Stream::peek(void *buf, size_t len) const
{
	uint8_t *out = static_cast<uint8_t *>(buf);
	size_t left = len;
	uint32_t head = rmsg_head_, off = rbuf_offset_;
	while (left && head != rmsg_tail_) {
		uint32_t take;
		if (left < rmsg_[head]) {
			take = static_cast<uint32_t>(left);
		} else {
			take = rmsg_[head];
			head = head + 1 == rmsg_.size() ? 0 : head + 1;
		}
		off = copy_out(out, off, take);
		out += take;
		left -= take;
	}
	return len - left;
}

// Copies n bytes of the receive ring from `off` (wrapping at its end);
// returns the offset after them.
uint32_t Stream::copy_out(uint8_t *out, uint32_t off, uint32_t n) const
{
	uint32_t to_end = p_.rbuf_size - off;
	if (n >= to_end) {
		memcpy(out, rbuf_ + off, to_end);
		memcpy(out + to_end, rbuf_, n - to_end);
		return n - to_end;
	}
	memcpy(out, rbuf_ + off, n);
	return off + n;
}

ssize_t Stream::recv(void *buf, size_t len, int flags, bool nonblock)
{
	if (len && !buf)
		return fail(EFAULT);
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	std::lock_guard<std::mutex> g(recv_mu_);
	uint8_t *out = static_cast<uint8_t *>(buf);
	size_t left = len;
	int ret = 0;
	do {
		if (!have_rdata()) {
			if ((ret = get_comp(nonblock, &Stream::conn_have_rdata)))
				break;
		}
		if (flags & MSG_PEEK) {
			left = len - peek(out, left);
			break;
		}
		bool consumed = false;
		while (left && have_rdata()) {
			uint32_t take;
			uint32_t &slot = rmsg_[rmsg_head_];
			if (left < slot) {
				take = static_cast<uint32_t>(left);
				slot -= take;
			} else {
				take = slot;
				rseq_no_++;
				rmsg_head_ = rmsg_head_ + 1 == rmsg_.size() ? 0 : rmsg_head_ + 1;
			}
			rbuf_offset_ = copy_out(out, rbuf_offset_, take);
			out += take;
			left -= take;
			rbuf_bytes_avail_ += take;
			consumed = true;
		}
		// Hand space back now rather than on the next call: the peer may
		// be waiting for it.
		if (consumed && cq_mu_.try_lock()) {
			update_credits();
			cq_mu_.unlock();
		}
	} while (left && (flags & MSG_WAITALL) && (state() & kStateReadable));
	return (ret && left == len) ? -1 : static_cast<ssize_t>(len - left);
}

short Stream::poll_events(short events)
{
	check_cm();
	process_cq(true, &Stream::always);
	short rev = 0;
	if ((events & POLLIN) && conn_have_rdata())
		rev |= POLLIN;
	if ((events & POLLOUT) && can_send())
		rev |= POLLOUT;
	// An ended connection is a hang-up only once its data is read (as a
	// TCP socket reports the peer's close as readable end of file first;
	// rdma-core 44 reports POLLHUP at once, and programs that treat
	// POLLHUP as an error, like rstream -T a, then lose the last bytes).
	int s = state();
	if (!(s & kStateConnected)) {
		if (!(s & kStateDisconnected))
			rev |= POLLERR;
		else if (!have_rdata())
			rev |= POLLHUP;
	}
	return rev;
}

bool Stream::arm_for_poll()
{
	process_cq(false, &Stream::cq_is_armed);
	return cq_armed_;
}

int Stream::shutdown(int how)
{
	int s = state();
	if (s & kStateConnected) {
		Ctrl code;
		if (how == SHUT_RDWR) {
			code = Ctrl::disconnect;
			state_.store(s & ~(kStateReadable | kStateWritable));
		} else if (how == SHUT_WR) {
			state_.store(s & ~kStateWritable);
			code = (s & kStateReadable) ? Ctrl::shutdown : Ctrl::disconnect;
		} else {
			state_.store(s & ~kStateReadable);
			if (s & kStateWritable)
				return 0;
			code = Ctrl::disconnect;
		}
		int ret = 0;
		if (!ctrl_avail())
			ret = process_cq(false, &Stream::conn_can_send_ctrl);
		if (!ret) {
			std::lock_guard<std::mutex> g(cq_mu_);
			if ((state() & kStateConnected) && ctrl_avail()) {
				ctrl_seqno_++;
				if (post_msg(make_msg(Op::ctrl, static_cast<uint32_t>(code))))
					set_error(errno);
			}
		}
		if (state() & kStateConnected)
			process_cq(false, &Stream::all_sends_done);
	}
	if (state() & kStateDisconnected)
		cm_disconnected();
	return 0;
}

void Stream::cm_disconnected()
{
	int s = state();
	if (s & kStateConnected)
		state_.store(kStateDisconnected);
	// Flush the receives: a thread sleeping on the channel wakes up.
	if (qp_) {
		ibv_qp_attr a = {};
		a.qp_state = IBV_QPS_ERR;
		ibv_modify_qp(qp_, &a, IBV_QP_STATE);
		ibv_req_notify_cq(cq_, 0);
	}
}

} // namespace ov::rs
