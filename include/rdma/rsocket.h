/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * openverbs: <rdma/rsocket.h>
 *
 * rsockets (rsocket(7)): a socket-like API over RDMA connections.  Each
 * function takes and returns what its socket(2)-family namesake does, with
 * the same errno conventions; riomap()/riowrite() add direct placement.
 * Prototypes and values match rdma-core 44 (Debian 12's librdmacm-dev).
 */
#ifndef RSOCKET_H
#define RSOCKET_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <errno.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/mman.h>

#ifdef __cplusplus
extern "C" {
#endif

int rsocket(int domain, int type, int protocol);
int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen);
int rlisten(int socket, int backlog);
int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen);
int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen);
int rshutdown(int socket, int how);
int rclose(int socket);

ssize_t rrecv(int socket, void *buf, size_t len, int flags);
ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
		  struct sockaddr *src_addr, socklen_t *addrlen);
ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags);
ssize_t rsend(int socket, const void *buf, size_t len, int flags);
ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
		const struct sockaddr *dest_addr, socklen_t addrlen);
ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags);
ssize_t rread(int socket, void *buf, size_t count);
ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt);
ssize_t rwrite(int socket, const void *buf, size_t count);
ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt);

int rpoll(struct pollfd *fds, nfds_t nfds, int timeout);
int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
	    struct timeval *timeout);

int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen);
int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen);

/* rsetsockopt()/rgetsockopt() level of the rsocket-specific options. */
#define SOL_RDMA 0x10000
enum {
	RDMA_SQSIZE,   /* int: send queue depth */
	RDMA_RQSIZE,   /* int: receive queue depth */
	RDMA_INLINE,   /* int: inline data size */
	RDMA_IOMAPSIZE, /* int: number of riomap() slots */
	RDMA_ROUTE     /* struct ibv_path_data[]: the route to use */
};

int rsetsockopt(int socket, int level, int optname, const void *optval,
		socklen_t optlen);
int rgetsockopt(int socket, int level, int optname, void *optval,
		socklen_t *optlen);
int rfcntl(int socket, int cmd, ... /* arg */);

off_t riomap(int socket, void *buf, size_t len, int prot, int flags,
	     off_t offset);
int riounmap(int socket, void *buf, size_t len);
size_t riowrite(int socket, const void *buf, size_t count, off_t offset,
		int flags);

#ifdef __cplusplus
}
#endif

#endif /* RSOCKET_H */
