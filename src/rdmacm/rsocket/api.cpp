// The exported rsocket entry points (rsocket(7), <rdma/rsocket.h>): argument
// checks, then the RSocket/Stream objects. Every call returns what its
// socket(2)-family namesake returns and sets errno the same way; nothing
// throws across the boundary (allocation failures become ENOMEM).
//
// Differences from rdma-core 44 (which dereferences or ignores bad input):
// NULL buffers and addresses are EFAULT, unknown rsocket numbers EBADF,
// out-of-range lengths and `how` values EINVAL, data calls on an rsocket
// that never connected ENOTCONN, rsendto with an address on a stream
// EISCONN (as rdma-core).
//
// Datagram rsockets (dgram.h) as rdma-core 44's, and where it crashes or
// overruns: rsend/rsendto without an address on an unconnected socket
// EDESTADDRREQ, a datagram larger than a peer's 2048-byte slot holds
// EMSGSIZE, rlisten/raccept EOPNOTSUPP, riomap/riounmap/riowrite EINVAL;
// rsendmsg/rsendv gather and rrecvmsg/rreadv scatter one datagram (with
// msg_name and MSG_TRUNC), and MSG_TRUNC in the flags returns a datagram's
// full length, as for a UDP socket.
#include "rsocket.h"

#include <rdma/rsocket.h>

#include <cerrno>
#include <climits>
#include <cstdarg>
#include <fcntl.h>
#include <new>

#define OV_RS_EXPORT extern "C" __attribute__((visibility("default")))

using namespace ov::rs;

namespace {

template <typename R> R fail(int e, R ret = static_cast<R>(-1))
{
	errno = e;
	return ret;
}

// The stream of a connected (or connecting) rsocket, or null with errno.
Stream *stream_of(RSocket *rs, int flags)
{
	return rs->ready_stream(rs->nonblocking(flags));
}

// The rsocket and its stream for a data call, after the checks every data
// call shares; null with errno.
Stream *data_stream(int socket, const iovec *iov, int iovcnt, int flags, RSocket *&rs)
{
	rs = lookup(socket);
	if (!rs)
		return fail<Stream *>(EBADF, nullptr);
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return fail<Stream *>(EINVAL, nullptr);
	if (iovcnt && !iov)
		return fail<Stream *>(EFAULT, nullptr);
	return stream_of(rs, flags);
}

// Ancillary data is not carried (ENOTSUP, as rdma-core).
bool bad_msghdr(const msghdr *msg)
{
	if (!msg)
		return fail<bool>(EFAULT, true);
	if (msg->msg_control && msg->msg_controllen)
		return fail<bool>(ENOTSUP, true);
	if (msg->msg_iovlen > IOV_MAX)
		return fail<bool>(EMSGSIZE, true);
	return false;
}

// A datagram rsocket's data calls: -1/errno or the Dgram's answer.
ssize_t dgram_recv(RSocket *rs, const iovec *iov, int iovcnt, int flags, sockaddr *src,
		   socklen_t *srclen, int *out_flags)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return fail<ssize_t>(EINVAL);
	if (iovcnt && !iov)
		return fail<ssize_t>(EFAULT);
	for (int i = 0; i < iovcnt; i++)
		if (iov[i].iov_len && !iov[i].iov_base)
			return fail<ssize_t>(EFAULT);
	return rs->dgram()->recv(iov, iovcnt, flags, src, srclen, out_flags, rs->nonblocking(flags));
}

ssize_t dgram_send(RSocket *rs, const iovec *iov, int iovcnt, int flags, const sockaddr *dst,
		   socklen_t dstlen)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX - 1)
		return fail<ssize_t>(EINVAL);
	if (iovcnt && !iov)
		return fail<ssize_t>(EFAULT);
	try {
		return rs->dgram()->send(iov, iovcnt, flags, dst, dstlen, rs->nonblocking(flags));
	} catch (const std::bad_alloc &) {
		return fail<ssize_t>(ENOMEM);
	}
}

ssize_t do_recv(int socket, const iovec *iov, int iovcnt, int flags)
{
	RSocket *rs = lookup(socket);
	if (rs && rs->dgram())
		return dgram_recv(rs, iov, iovcnt, flags, nullptr, nullptr, nullptr);
	rs = nullptr;
	Stream *s = data_stream(socket, iov, iovcnt, flags, rs);
	if (!s)
		return -1;
	bool nonblock = rs->nonblocking(flags);
	ssize_t total = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (!iov[i].iov_len)
			continue;
		// After the first bytes, take only what is already there.
		ssize_t n = s->recv(iov[i].iov_base, iov[i].iov_len, total ? (flags & ~MSG_WAITALL) : flags,
				    total ? true : nonblock);
		if (n < 0)
			return total ? total : -1;
		total += n;
		if (static_cast<size_t>(n) < iov[i].iov_len || (flags & MSG_PEEK))
			break;
	}
	return total;
}

ssize_t do_send(int socket, const iovec *iov, int iovcnt, int flags)
{
	RSocket *rs = lookup(socket);
	if (rs && rs->dgram())
		return dgram_send(rs, iov, iovcnt, flags, nullptr, 0);
	rs = nullptr;
	Stream *s = data_stream(socket, iov, iovcnt, flags, rs);
	if (!s)
		return -1;
	return s->send(iov, iovcnt, flags, rs->nonblocking(flags));
}

} // namespace

OV_RS_EXPORT int rsocket(int domain, int type, int protocol)
{
	int kind = type & ~(SOCK_CLOEXEC | SOCK_NONBLOCK);
	if ((domain != AF_INET && domain != AF_INET6 && domain != AF_IB) ||
	    (kind != SOCK_STREAM && kind != SOCK_DGRAM) ||
	    (kind == SOCK_STREAM && protocol && protocol != IPPROTO_TCP) ||
	    (kind == SOCK_DGRAM && protocol && protocol != IPPROTO_UDP))
		return fail<int>(ENOTSUP);
	try {
		auto rs = std::make_shared<RSocket>(domain, kind, tunables().defaults);
		rs->fd_flags = (type & SOCK_CLOEXEC) ? FD_CLOEXEC : 0;
		rs->fs_flags = (type & SOCK_NONBLOCK) ? O_NONBLOCK : 0;
		if (rs->create())
			return -1;
		if (!insert(rs))
			return fail<int>(EMFILE);
		return rs->fd();
	} catch (const std::bad_alloc &) {
		return fail<int>(ENOMEM);
	}
}

OV_RS_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	auto rs = lookup(socket);
	return rs ? rs->bind(addr, addrlen) : fail<int>(EBADF);
}

OV_RS_EXPORT int rlisten(int socket, int backlog)
{
	auto rs = lookup(socket);
	return rs ? rs->listen(backlog) : fail<int>(EBADF);
}

OV_RS_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	auto rs = lookup(socket);
	if (!rs)
		return fail<int>(EBADF);
	if (addr && !addrlen)
		return fail<int>(EFAULT);
	try {
		auto child = rs->accept();
		if (!child)
			return -1;
		if (!insert(child))
			return fail<int>(EMFILE);
		if (addr)
			child->getpeername(addr, addrlen);
		return child->fd();
	} catch (const std::bad_alloc &) {
		return fail<int>(ENOMEM);
	}
}

OV_RS_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	auto rs = lookup(socket);
	if (!rs)
		return fail<int>(EBADF);
	try {
		return rs->connect(addr, addrlen);
	} catch (const std::bad_alloc &) {
		return fail<int>(ENOMEM);
	}
}

OV_RS_EXPORT int rshutdown(int socket, int how)
{
	auto rs = lookup(socket);
	return rs ? rs->shutdown(how) : fail<int>(EBADF);
}

OV_RS_EXPORT int rclose(int socket)
{
	auto rs = remove(socket);
	if (!rs)
		return fail<int>(EBADF);
	rs->close();
	return 0; // the last reference releases the connection
}

OV_RS_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	iovec v = {buf, len};
	return do_recv(socket, &v, 1, flags);
}

OV_RS_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
			       struct sockaddr *src_addr, socklen_t *addrlen)
{
	if (src_addr && !addrlen)
		return fail<ssize_t>(EFAULT);
	iovec v = {buf, len};
	RSocket *rs = lookup(socket);
	if (rs && rs->dgram())
		return dgram_recv(rs, &v, 1, flags, src_addr, addrlen, nullptr);
	ssize_t n = do_recv(socket, &v, 1, flags);
	if (n > 0 && src_addr) {
		if (auto rs = lookup(socket))
			rs->getpeername(src_addr, addrlen);
	}
	return n;
}

OV_RS_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	if (bad_msghdr(msg))
		return -1;
	RSocket *rs = lookup(socket);
	if (rs && rs->dgram()) {
		int out = 0;
		socklen_t *nl = msg->msg_name ? &msg->msg_namelen : nullptr;
		ssize_t n = dgram_recv(rs, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags,
				       static_cast<sockaddr *>(msg->msg_name), nl, &out);
		if (n >= 0)
			msg->msg_flags = out;
		return n;
	}
	ssize_t n = do_recv(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
	if (n >= 0) {
		msg->msg_flags = 0;
		if (msg->msg_name && msg->msg_namelen) {
			if (auto rs = lookup(socket))
				rs->getpeername(static_cast<sockaddr *>(msg->msg_name), &msg->msg_namelen);
		}
	}
	return n;
}

OV_RS_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

OV_RS_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return do_recv(socket, iov, iovcnt, 0);
}

OV_RS_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	iovec v = {const_cast<void *>(buf), len};
	return do_send(socket, &v, 1, flags);
}

OV_RS_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			     const struct sockaddr *dest_addr, socklen_t addrlen)
{
	RSocket *rs = lookup(socket);
	if (!rs)
		return fail<ssize_t>(EBADF);
	if (rs->dgram()) {
		iovec v = {const_cast<void *>(buf), len};
		return dgram_send(rs, &v, 1, flags, dest_addr, addrlen);
	}
	if (dest_addr || addrlen)
		return fail<ssize_t>(EISCONN);
	return rsend(socket, buf, len, flags);
}

OV_RS_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	if (bad_msghdr(msg))
		return -1;
	RSocket *rs = lookup(socket);
	if (rs && rs->dgram())
		return dgram_send(rs, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags,
				  static_cast<const sockaddr *>(msg->msg_name), msg->msg_namelen);
	return do_send(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

OV_RS_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

OV_RS_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return do_send(socket, iov, iovcnt, 0);
}

OV_RS_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	auto rs = lookup(socket);
	return rs ? rs->getpeername(addr, addrlen) : fail<int>(EBADF);
}

OV_RS_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	auto rs = lookup(socket);
	return rs ? rs->getsockname(addr, addrlen) : fail<int>(EBADF);
}

OV_RS_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval,
			     socklen_t optlen)
{
	auto rs = lookup(socket);
	if (!rs)
		return fail<int>(EBADF);
	try {
		return rs->setsockopt(level, optname, optval, optlen);
	} catch (const std::bad_alloc &) {
		return fail<int>(ENOMEM);
	}
}

OV_RS_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	auto rs = lookup(socket);
	return rs ? rs->getsockopt(level, optname, optval, optlen) : fail<int>(EBADF);
}

OV_RS_EXPORT int rfcntl(int socket, int cmd, ...)
{
	auto rs = lookup(socket);
	if (!rs)
		return fail<int>(EBADF);
	va_list ap;
	va_start(ap, cmd);
	int ret = 0;
	switch (cmd) {
	case F_GETFL:
		ret = rs->fs_flags;
		break;
	case F_SETFL:
		rs->fs_flags = va_arg(ap, int);
		break;
	case F_GETFD:
		ret = rs->fd_flags;
		break;
	case F_SETFD:
		rs->fd_flags = va_arg(ap, int);
		break;
	default:
		ret = fail<int>(ENOTSUP);
		break;
	}
	va_end(ap);
	return ret;
}

OV_RS_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	auto rs = lookup(socket);
	if (!rs)
		return fail<off_t>(EBADF);
	Stream *s = rs->stream();
	if (!s)
		return fail<off_t>(EINVAL);
	try {
		return s->iomap(buf, len, prot, flags, offset);
	} catch (const std::bad_alloc &) {
		return fail<off_t>(ENOMEM);
	}
}

OV_RS_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	auto rs = lookup(socket);
	if (!rs)
		return fail<int>(EBADF);
	Stream *s = rs->stream();
	return s ? s->iounmap(buf, len) : fail<int>(EINVAL);
}

OV_RS_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	auto rs = lookup(socket);
	if (!rs)
		return fail<size_t>(EBADF);
	if (rs->dgram())
		return fail<size_t>(EINVAL);
	Stream *s = stream_of(rs, flags);
	if (!s)
		return static_cast<size_t>(-1);
	return s->iowrite(buf, count, offset, flags, rs->nonblocking(flags));
}
