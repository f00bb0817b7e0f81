// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
/*
 * udp_pingpong: the UDP anchor of bench/roce. Two processes bounce a datagram
 * of SIZE bytes back and forth over a UDP socket, as ib_write_lat bounces an
 * RDMA WRITE; the one-way latency of each exchange is half its round trip,
 * and the client prints the median (perftest's "t_typical") and the average
 * over ITERS exchanges after WARMUP unmeasured ones.
 *
 *   udp_pingpong [-p PORT] [-s SIZE] [-n ITERS] [-w WARMUP] [-b] [-t]          (server)
 *   udp_pingpong [-p PORT] [-s SIZE] [-n ITERS] [-w WARMUP] [-b] [-t] SERVER   (client)
 *
 * Both sides spin on recv(MSG_DONTWAIT), as perftest's latency tests spin on
 * ibv_poll_cq and as the RoCE device reads its socket while the application
 * polls its CQ; -b waits in a blocking recv() instead (for information).
 * -t sends what an RC ping-pong of RDMA WRITEs puts on the wire per exchange:
 * the WRITE (SIZE + 32 bytes: BTH, RETH, ICRC) and the ACK of the peer's last
 * WRITE (20 bytes: BTH, AETH, ICRC) as one UDP GSO train, received with
 * UDP_GRO (one datagram, or two where the kernel cuts the train), as the
 * RoCE device does: the socket layer's share of the device's latency.
 * -d IFNAME (implies -t) sets both sockets up as the RoCE device sets up its
 * own (providers/soft/roce/device.cpp, open_socket): dual-stack IPv6,
 * unconnected on both sides, bound to IFNAME (SO_BINDTODEVICE), the
 * destination address and interface of each datagram received (IP_PKTINFO,
 * IPV6_RECVPKTINFO) with its source, Don't Fragment, 4 MiB buffers, and each
 * train sent with its source address and interface (IPV6_PKTINFO): the same
 * two datagrams through the same socket paths, with no RDMA work around them
 * (one recvmsg/sendmsg per call where the device batches with recvmmsg and
 * sendmmsg: if anything, a lower floor than the device's).
 * SERVER is an IPv4 or IPv6 address. The client prints
 *   udp_pingpong: size S iters N mode busy|blocking median_us M average_us A
 * Exit status 0 on success, 1 on a socket error or a lost datagram (nothing
 * for 5 s), 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103 /* <linux/udp.h>: send a GSO train (Linux 4.18) */
#endif
#ifndef UDP_GRO
#define UDP_GRO 104 /* <linux/udp.h>: receive trains whole (Linux 5.0) */
#endif

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* -d: the device's socket set-up. `local` is the address the last datagram
 * arrived at (the source of the next train), ifindex the interface's. */
struct devsock {
	int on;
	int ifindex;
	struct in6_addr local;
};
static struct devsock dev;

static int dev_setup(int fd, const char *ifname)
{
	int zero = 0, one = 1, pmtu = IP_PMTUDISC_DO, pmtu6 = IPV6_PMTUDISC_DO, buf = 4 << 20;
	dev.on = 1;
	dev.ifindex = (int)if_nametoindex(ifname);
	if (!dev.ifindex) {
		perror("udp_pingpong: -d interface");
		return -1;
	}
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
	setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
	setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu6, sizeof(pmtu6));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname, (socklen_t)strlen(ifname))) {
		perror("udp_pingpong: SO_BINDTODEVICE");
		return -1;
	}
	return 0;
}

/* -d: the destination address of a received datagram (its control data). */
static void dev_note_local(struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			dev.local = pi.ipi6_addr;
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			memset(&dev.local, 0, sizeof(dev.local));
			dev.local.s6_addr[10] = dev.local.s6_addr[11] = 0xff;
			memcpy(&dev.local.s6_addr[12], &pi.ipi_addr, 4);
		}
	}
}

/* One datagram of exactly len bytes into buf (with `train`, datagrams until
 * len bytes in all); -1 after 5 s or on an error. */
static int receive(int fd, char *buf, size_t len, int blocking, int train,
		   struct sockaddr_storage *from, socklen_t *fromlen)
{
	uint64_t deadline = now_ns() + 5000000000ull;
	size_t got = 0;
	for (;;) {
		ssize_t n;
		if (dev.on) {
			/* As the device: source address, destination and
			 * interface, GRO segment size. */
			struct sockaddr_storage src;
			union {
				char b[CMSG_SPACE(sizeof(struct in6_pktinfo)) +
				       CMSG_SPACE(sizeof(struct in_pktinfo)) + CMSG_SPACE(sizeof(int))];
				struct cmsghdr align;
			} ctl;
			struct iovec iov = {buf + got, len - got};
			struct msghdr mh;
			memset(&mh, 0, sizeof(mh));
			mh.msg_name = from ? (void *)from : (void *)&src;
			mh.msg_namelen = sizeof(src);
			mh.msg_iov = &iov;
			mh.msg_iovlen = 1;
			mh.msg_control = ctl.b;
			mh.msg_controllen = sizeof(ctl.b);
			n = recvmsg(fd, &mh, blocking ? 0 : MSG_DONTWAIT);
			if (n > 0) {
				dev_note_local(&mh);
				if (from)
					*fromlen = mh.msg_namelen;
			}
		} else {
			if (from)
				*fromlen = sizeof(*from);
			n = recvfrom(fd, buf + got, len - got, blocking ? 0 : MSG_DONTWAIT,
				     (struct sockaddr *)from, from ? fromlen : NULL);
		}
		if (n == (ssize_t)(len - got))
			return 0;
		if (train && n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n >= 0) {
			fprintf(stderr, "udp_pingpong: %zd bytes received, %zu expected\n", n, len - got);
			return -1;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			perror("udp_pingpong: recv");
			return -1;
		}
		if (now_ns() > deadline) {
			fprintf(stderr, "udp_pingpong: no datagram for 5 s\n");
			return -1;
		}
	}
}

/* One exchange's datagrams: SIZE bytes, or with `train` a GSO train of
 * SIZE + 32 and 20 bytes. */
static int transmit(int fd, char *buf, size_t size, int train, const struct sockaddr_storage *to,
		    socklen_t tolen)
{
	if (!train)
		return sendto(fd, buf, size, 0, (const struct sockaddr *)to, tolen) == (ssize_t)size ? 0
														: -1;
	struct iovec iov[2] = {{buf, size + 32}, {buf + size + 32, 20}};
	union {
		char b[CMSG_SPACE(sizeof(uint16_t)) + CMSG_SPACE(sizeof(struct in6_pktinfo))];
		struct cmsghdr align;
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct msghdr mh;
	memset(&mh, 0, sizeof(mh));
	mh.msg_name = (void *)to;
	mh.msg_namelen = tolen;
	mh.msg_iov = iov;
	mh.msg_iovlen = 2;
	mh.msg_control = ctl.b;
	mh.msg_controllen = sizeof(ctl.b);
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = IPPROTO_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
	uint16_t seg = (uint16_t)(size + 32);
	memcpy(CMSG_DATA(c), &seg, sizeof(seg));
	if (dev.on) {
		/* As the device: the train's source address and interface. */
		c = CMSG_NXTHDR(&mh, c);
		c->cmsg_level = IPPROTO_IPV6;
		c->cmsg_type = IPV6_PKTINFO;
		c->cmsg_len = CMSG_LEN(sizeof(struct in6_pktinfo));
		struct in6_pktinfo pi = {dev.local, (unsigned)dev.ifindex};
		memcpy(CMSG_DATA(c), &pi, sizeof(pi));
	} else {
		mh.msg_controllen = CMSG_SPACE(sizeof(uint16_t));
	}
	return sendmsg(fd, &mh, 0) == (ssize_t)(size + 52) ? 0 : -1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *port = "18600";
	size_t size = 8;
	long iters = 10000, warmup = 1000;
	int blocking = 0, train = 0, opt;
	const char *devif = NULL;
	while ((opt = getopt(argc, argv, "p:s:n:w:btd:")) != -1) {
		switch (opt) {
		case 'p': port = optarg; break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'n': iters = strtol(optarg, NULL, 0); break;
		case 'w': warmup = strtol(optarg, NULL, 0); break;
		case 'b': blocking = 1; break;
		case 't': train = 1; break;
		case 'd': devif = optarg; train = 1; break;
		default:
			fprintf(stderr, "usage: %s [-p PORT] [-s SIZE] [-n ITERS] [-w WARMUP] [-b] [-t] [-d IFNAME] [SERVER]\n",
				argv[0]);
			return 2;
		}
	}
	if (size == 0 || size > (train ? 1400 : 65507) || iters <= 0 || warmup < 0) {
		fprintf(stderr, "udp_pingpong: bad size or counts\n");
		return 2;
	}
	const char *server = optind < argc ? argv[optind] : NULL;
	struct addrinfo hints;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = server && !devif ? AF_UNSPEC : AF_INET6;
	hints.ai_socktype = SOCK_DGRAM;
	/* -d: IPv4 servers as IPv4-mapped addresses (the device's socket). */
	hints.ai_flags = (server ? 0 : AI_PASSIVE) | (devif ? AI_V4MAPPED : 0);
	struct addrinfo *ai;
	int rc = getaddrinfo(server, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, "udp_pingpong: %s\n", gai_strerror(rc));
		return 1;
	}
	int fd = socket(ai->ai_family, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("udp_pingpong: socket");
		return 1;
	}
	int one = 1;
	if (devif && dev_setup(fd, devif))
		return 1;
	/* -d: the client's first train to an IPv4 server leaves from
	 * ::ffff:0.0.0.0 (the kernel picks the IPv4 source; IPV6_PKTINFO on
	 * the IPv4 path takes mapped addresses only); later ones from the
	 * address the server's answer arrived at. */
	if (devif && server && IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr))
		dev.local.s6_addr[10] = dev.local.s6_addr[11] = 0xff;
	if (train && setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one))) {
		perror("udp_pingpong: UDP_GRO");
		return 1;
	}
	size_t wire = train ? size + 52 : size; /* bytes per exchange */
	char *buf = calloc(1, wire);
	uint64_t *samples = calloc((size_t)iters, sizeof(*samples));
	if (!buf || !samples) {
		fprintf(stderr, "udp_pingpong: out of memory\n");
		return 1;
	}
	long total = warmup + iters;
	int status = 0;
	if (!server) {
		/* The server listens on IPv6's wildcard, which takes IPv4 too. */
		int off = 0;
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen)) {
			perror("udp_pingpong: bind");
			return 1;
		}
		struct sockaddr_storage peer;
		socklen_t peerlen;
		/* The first datagram may wait for the client to start. */
		for (long i = 0; i < total && !status; i++) {
			if (receive(fd, buf, wire, blocking || i == 0, train, &peer, &peerlen))
				status = 1;
			else if (transmit(fd, buf, size, train, &peer, peerlen)) {
				perror("udp_pingpong: send");
				status = 1;
			}
		}
	} else if (!devif && connect(fd, ai->ai_addr, ai->ai_addrlen)) {
		perror("udp_pingpong: connect");
		status = 1;
	} else {
		double sum = 0;
		for (long i = 0; i < total && !status; i++) {
			uint64_t t0 = now_ns();
			/* -d: unconnected, as the device's socket. */
			if (transmit(fd, buf, size, train,
				     devif ? (const struct sockaddr_storage *)ai->ai_addr : NULL,
				     devif ? (socklen_t)ai->ai_addrlen : 0)) {
				perror("udp_pingpong: send");
				status = 1;
			} else if (receive(fd, buf, wire, blocking, train, NULL, NULL)) {
				status = 1;
			} else if (i >= warmup) {
				samples[i - warmup] = now_ns() - t0;
				sum += (double)samples[i - warmup];
			}
		}
		if (!status) {
			qsort(samples, (size_t)iters, sizeof(*samples), cmp_u64);
			printf("udp_pingpong: size %zu iters %ld mode %s%s%s median_us %.3f average_us %.3f\n",
			       size, iters, blocking ? "blocking" : "busy", train ? " train" : "",
			       devif ? " device-socket" : "",
			       (double)samples[iters / 2] / 2000.0, sum / (double)iters / 2000.0);
		}
	}
	freeaddrinfo(ai);
	free(samples);
	free(buf);
	close(fd);
	return status;
}
