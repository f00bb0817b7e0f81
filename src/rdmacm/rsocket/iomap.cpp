// riomap()/riounmap()/riowrite() over a stream (rsocket(7) "direct data
// placement"). A PROT_WRITE mapping takes a slot of the peer's iomap table
// and is announced by RDMA-writing the slot (message IOMAP_SGL); riowrite()
// writes straight into a buffer the peer announced in our table, with a
// plain RDMA WRITE (nothing is delivered to the peer's receive path).
#include "stream.h"

#include <algorithm>
#include <byteswap.h>
#include <cerrno>
#include <cstring>
#include <sys/mman.h>

namespace ov::rs {

off_t Stream::iomap(void *buf, size_t len, int prot, int flags, off_t offset)
{
	(void)flags;
	if (!pd_ || (prot & ~(PROT_WRITE | PROT_NONE)) || !buf || !len) {
		errno = EINVAL;
		return -1;
	}
	std::lock_guard<std::mutex> g(map_mu_);
	int access = IBV_ACCESS_LOCAL_WRITE;
	IomapMr *slot = nullptr;
	if (prot & PROT_WRITE) {
		for (auto &m : remote_maps_)
			if (!m.mr) {
				slot = &m;
				break;
			}
		if (!slot) {
			errno = ENOMEM;
			return -1;
		}
		access |= IBV_ACCESS_REMOTE_WRITE;
	}
	ibv_mr *mr = ibv_reg_mr(pd_, buf, len, access);
	if (!mr)
		return -1;
	if (offset == -1)
		offset = static_cast<off_t>(reinterpret_cast<uintptr_t>(buf));
	if (slot) {
		slot->mr = mr;
		slot->offset = static_cast<uint64_t>(offset);
		iomap_queue_.push_back(slot->index);
		iomap_pending_ = true;
	} else {
		IomapMr m;
		m.mr = mr;
		m.offset = static_cast<uint64_t>(offset);
		local_maps_.push_back(m);
	}
	return offset;
}

int Stream::iounmap(void *buf, size_t len)
{
	std::lock_guard<std::mutex> g(map_mu_);
	for (auto &m : remote_maps_) {
		if (m.mr && m.mr->addr == buf && m.mr->length == len) {
			ibv_dereg_mr(m.mr);
			m.mr = nullptr;
			iomap_queue_.remove(m.index);
			iomap_pending_ = !iomap_queue_.empty();
			return 0;
		}
	}
	for (auto it = local_maps_.begin(); it != local_maps_.end(); ++it) {
		if (it->mr->addr == buf && it->mr->length == len) {
			ibv_dereg_mr(it->mr);
			local_maps_.erase(it);
			return 0;
		}
	}
	errno = EINVAL;
	return -1;
}

// Announces queued mappings (called with send_mu_ held).
int Stream::send_iomaps(int flags, bool nonblock)
{
	(void)flags;
	std::lock_guard<std::mutex> g(map_mu_);
	int ret = 0;
	while (!iomap_queue_.empty()) {
		if ((ret = wait_sendable(nonblock)))
			break;
		int index = iomap_queue_.front();
		const IomapMr &m = remote_maps_[static_cast<size_t>(index)];
		IomapEntry e;
		uint64_t addr = reinterpret_cast<uintptr_t>(m.mr->addr);
		uint32_t length = static_cast<uint32_t>(m.mr->length);
		e.offset = swap_sgl_ ? bswap_64(m.offset) : m.offset;
		e.sge.addr = swap_sgl_ ? bswap_64(addr) : addr;
		e.sge.length = swap_sgl_ ? bswap_32(length) : length;
		e.sge.key = swap_sgl_ ? bswap_32(m.mr->rkey) : m.mr->rkey;

		ibv_sge sgl[2];
		int n, fl;
		if (p_.sq_inline >= sizeof(e)) {
			sgl[0] = {reinterpret_cast<uintptr_t>(&e), sizeof(e), 0};
			n = 1;
			fl = IBV_SEND_INLINE;
		} else {
			iovec v = {&e, sizeof(e)};
			const iovec *pv = &v;
			size_t off = 0;
			n = stage(pv, off, sizeof(e), sgl);
			fl = 0;
		}
		sseq_no_++;
		sqe_avail_ -= p_.msg_send ? 2 : 1;
		sbuf_bytes_avail_ -= sizeof(IomapEntry);
		ret = post_write_msg(sgl, n, make_msg(Op::iomap_sgl, static_cast<uint32_t>(index)), fl,
				     remote_iomap_.addr + static_cast<uint64_t>(index) * sizeof(IomapEntry),
				     remote_iomap_.key);
		iomap_queue_.pop_front();
		if (ret) {
			set_error(errno);
			break;
		}
	}
	iomap_pending_ = !iomap_queue_.empty();
	return ret;
}

size_t Stream::iowrite(const void *buf, size_t count, off_t offset, int flags, bool nonblock)
{
	if (count && !buf) {
		errno = EFAULT;
		return static_cast<size_t>(-1);
	}
	std::lock_guard<std::mutex> g(send_mu_);
	if (!(state() & kStateWritable)) {
		errno = (state() & kStateConnected) ? EPIPE : ECONNRESET;
		return static_cast<size_t>(-1);
	}
	if (iomap_pending_ && send_iomaps(flags, nonblock))
		return static_cast<size_t>(-1);
	const uint8_t *src = static_cast<const uint8_t *>(buf);
	size_t left = count;
	uint32_t olen = kFirstChunk;
	int ret = 0;
	const IomapEntry *map = nullptr;
	while (left) {
		uint64_t at = static_cast<uint64_t>(offset);
		if (!map || at >= map->offset + map->sge.length) {
			map = nullptr;
			for (uint16_t i = 0; i < p_.iomap_size; i++) {
				const IomapEntry &e = target_iomap_[i];
				if (e.sge.length && at >= e.offset && at < e.offset + e.sge.length) {
					map = &e;
					break;
				}
			}
			if (!map) {
				if (left == count) {
					errno = EINVAL; // no mapping of the peer covers offset
					ret = -1;
				}
				break;
			}
		}
		if ((ret = wait_sendable(nonblock)))
			break;
		uint32_t xfer = next_chunk(olen, left);
		xfer = static_cast<uint32_t>(std::min<uint64_t>(xfer, map->offset + map->sge.length - at));
		uint64_t raddr = map->sge.addr + (at - map->offset);
		ibv_sge sgl[2];
		int n, fl;
		if (xfer <= p_.sq_inline) {
			sgl[0] = {reinterpret_cast<uintptr_t>(src), xfer, 0};
			n = 1;
			fl = IBV_SEND_INLINE;
		} else {
			iovec v = {const_cast<uint8_t *>(src), xfer};
			const iovec *pv = &v;
			size_t off = 0;
			n = stage(pv, off, xfer, sgl);
			fl = 0;
		}
		sqe_avail_--;
		sbuf_bytes_avail_ -= xfer;
		ret = post_write(sgl, n, make_msg(Op::write, xfer), fl, raddr, map->sge.key);
		if (ret) {
			set_error(errno);
			break;
		}
		left -= xfer;
		src += xfer;
		offset += xfer;
	}
	return (ret && left == count) ? static_cast<size_t>(-1) : count - left;
}

} // namespace ov::rs
