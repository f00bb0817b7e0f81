// rsockets: placeholder entry points until helper "rsocket" lands them
// (Build 4 of issue 13). Every call fails with ENOSYS and returns what its
// socket(2) namesake returns on failure; nothing here pretends to work.
#include <rdma/rsocket.h>

#include <cerrno>

#define OV_RS_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
template <typename R> R nosys(R ret) noexcept
{
	errno = ENOSYS;
	return ret;
}
} // namespace

OV_RS_EXPORT int rsocket(int, int, int) { return nosys(-1); }
OV_RS_EXPORT int rbind(int, const struct sockaddr *, socklen_t) { return nosys(-1); }
OV_RS_EXPORT int rlisten(int, int) { return nosys(-1); }
OV_RS_EXPORT int raccept(int, struct sockaddr *, socklen_t *) { return nosys(-1); }
OV_RS_EXPORT int rconnect(int, const struct sockaddr *, socklen_t) { return nosys(-1); }
OV_RS_EXPORT int rshutdown(int, int) { return nosys(-1); }
OV_RS_EXPORT int rclose(int) { return nosys(-1); }
OV_RS_EXPORT ssize_t rrecv(int, void *, size_t, int) { return nosys<ssize_t>(-1); }
OV_RS_EXPORT ssize_t rrecvfrom(int, void *, size_t, int, struct sockaddr *, socklen_t *)
{
	return nosys<ssize_t>(-1);
}
OV_RS_EXPORT ssize_t rrecvmsg(int, struct msghdr *, int) { return nosys<ssize_t>(-1); }
OV_RS_EXPORT ssize_t rsend(int, const void *, size_t, int) { return nosys<ssize_t>(-1); }
OV_RS_EXPORT ssize_t rsendto(int, const void *, size_t, int, const struct sockaddr *, socklen_t)
{
	return nosys<ssize_t>(-1);
}
OV_RS_EXPORT ssize_t rsendmsg(int, const struct msghdr *, int) { return nosys<ssize_t>(-1); }
OV_RS_EXPORT ssize_t rread(int, void *, size_t) { return nosys<ssize_t>(-1); }
OV_RS_EXPORT ssize_t rreadv(int, const struct iovec *, int) { return nosys<ssize_t>(-1); }
OV_RS_EXPORT ssize_t rwrite(int, const void *, size_t) { return nosys<ssize_t>(-1); }
OV_RS_EXPORT ssize_t rwritev(int, const struct iovec *, int) { return nosys<ssize_t>(-1); }
OV_RS_EXPORT int rpoll(struct pollfd *, nfds_t, int) { return nosys(-1); }
OV_RS_EXPORT int rselect(int, fd_set *, fd_set *, fd_set *, struct timeval *) { return nosys(-1); }
OV_RS_EXPORT int rgetpeername(int, struct sockaddr *, socklen_t *) { return nosys(-1); }
OV_RS_EXPORT int rgetsockname(int, struct sockaddr *, socklen_t *) { return nosys(-1); }
OV_RS_EXPORT int rsetsockopt(int, int, int, const void *, socklen_t) { return nosys(-1); }
OV_RS_EXPORT int rgetsockopt(int, int, int, void *, socklen_t *) { return nosys(-1); }
OV_RS_EXPORT int rfcntl(int, int, ...) { return nosys(-1); }
OV_RS_EXPORT off_t riomap(int, void *, size_t, int, int, off_t) { return nosys<off_t>(-1); }
OV_RS_EXPORT int riounmap(int, void *, size_t) { return nosys(-1); }
OV_RS_EXPORT size_t riowrite(int, const void *, size_t, off_t, int) { return nosys<size_t>(0); }
