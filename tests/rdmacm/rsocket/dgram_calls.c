/*
 * Datagram rsocket calls whose outcome rdma-core 44 defines without an RDMA
 * device (no queue pair is made): one line per call with its return value
 * and errno. dgram_calls_debian.sh runs it on Debian's librdmacm.so.1 and on
 * ours and compares the lines (calls where rdma-core crashes or overruns a
 * buffer are left out: rsend unconnected, rlisten, oversized datagrams;
 * and rconnect, which makes a queue pair: ENODEV for Debian's library on a
 * host without kernel RDMA, a QP on soft0 for ours; and rclose of an
 * rsocket never bound, connected or sent from, where rdma-core 44 waits
 * for ever in epoll_wait for sends that were never posted).
 */
#include <rdma/rsocket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#define SHOW(name, call)                                                                           \
	do {                                                                                       \
		errno = 0;                                                                         \
		long r_ = (long)(call);                                                            \
		printf("%-36s ret=%ld errno=%s\n", name, r_, r_ < 0 ? strerror(errno) : "-");    \
	} while (0)

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	char buf[16];
	int v;
	socklen_t l;
	struct sockaddr_in a;
	SHOW("rsocket(INET,DGRAM,TCP)", rsocket(AF_INET, SOCK_DGRAM, IPPROTO_TCP));
	SHOW("rsocket(UNIX,DGRAM,0)", rsocket(AF_UNIX, SOCK_DGRAM, 0));
	SHOW("rsocket(IB,DGRAM,0)", rsocket(AF_IB, SOCK_DGRAM, 0));
	int s = rsocket(AF_INET, SOCK_DGRAM, IPPROTO_UDP);
	printf("rsocket made: %d\n", s >= 0);
	SHOW("rrecv before bind", rrecv(s, buf, sizeof(buf), MSG_DONTWAIT));
	l = sizeof(a);
	SHOW("rgetpeername unconnected", rgetpeername(s, (struct sockaddr *)&a, &l));
	memset(&a, 0xff, sizeof(a));
	l = sizeof(a);
	SHOW("rgetsockname unbound", rgetsockname(s, (struct sockaddr *)&a, &l));
	printf("  family %d port %d len %u\n", a.sin_family, ntohs(a.sin_port), l);
	l = sizeof(v);
	SHOW("rgetsockopt SO_RCVBUF", rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &l));
	printf("  %d\n", v);
	v = 4096;
	SHOW("rsetsockopt SO_RCVBUF 4096", rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)));
	SHOW("rsetsockopt SO_SNDBUF 4096", rsetsockopt(s, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)));
	l = sizeof(v);
	SHOW("rgetsockopt SO_RCVBUF", rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &l));
	printf("  %d\n", v);
	v = 1;
	SHOW("rsetsockopt SO_REUSEADDR", rsetsockopt(s, SOL_SOCKET, SO_REUSEADDR, &v, sizeof(v)));
	l = sizeof(v);
	SHOW("rgetsockopt SO_REUSEADDR", rgetsockopt(s, SOL_SOCKET, SO_REUSEADDR, &v, &l));
	printf("  %d\n", v);
	SHOW("rsetsockopt IPPROTO_TCP TCP_NODELAY", rsetsockopt(s, IPPROTO_TCP, 1, &v, sizeof(v)));
	SHOW("rsetsockopt IP_TOS", rsetsockopt(s, IPPROTO_IP, IP_TOS, &v, sizeof(v)));
	SHOW("rsetsockopt SOL_SOCKET 12345", rsetsockopt(s, SOL_SOCKET, 12345, &v, sizeof(v)));
	v = 32;
	SHOW("rsetsockopt RDMA_SQSIZE before bind", rsetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, sizeof(v)));
	SHOW("rfcntl F_SETFL O_NONBLOCK", rfcntl(s, F_SETFL, O_NONBLOCK));
	SHOW("rfcntl F_GETFL", rfcntl(s, F_GETFL));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	SHOW("rbind 127.0.0.1:0", rbind(s, (struct sockaddr *)&a, sizeof(a)));
	SHOW("rbind again", rbind(s, (struct sockaddr *)&a, sizeof(a)));
	l = sizeof(a);
	SHOW("rgetsockname bound", rgetsockname(s, (struct sockaddr *)&a, &l));
	printf("  family %d port>0 %d addr %08x len %u\n", a.sin_family, a.sin_port != 0,
	       ntohl(a.sin_addr.s_addr), l);
	v = 16;
	SHOW("rsetsockopt RDMA_SQSIZE after bind", rsetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, sizeof(v)));
	SHOW("rrecv after bind, non-blocking", rrecv(s, buf, sizeof(buf), 0));
	SHOW("rrecvfrom after bind, MSG_DONTWAIT", rrecvfrom(s, buf, sizeof(buf), MSG_DONTWAIT, NULL, NULL));
	SHOW("rshutdown SHUT_RDWR", rshutdown(s, SHUT_RDWR));
	SHOW("rclose", rclose(s));
	return 0;
}
