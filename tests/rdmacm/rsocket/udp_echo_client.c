/*
 * A plain UDP program (socket, connect, send, recv, poll: no rsocket call)
 * that speaks udpong's protocol to a udpong server in echo mode and checks
 * every byte it gets back. Run under Debian's librspreload.so it exercises
 * the preload library's UDP interception through our librdmacm:
 *   udp_echo_client HOST PORT COUNT SIZE...
 * Exit 0 when every echo of every size came back intact, 1 otherwise.
 * Messages: op (login 0, start 1, echo 3, end 4), id, seqno, reserved, a
 * 32-bit word, then the payload (udpong's struct message).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { op_login = 0, op_start = 1, op_echo = 3, op_end = 4 };
#define CTRL_SIZE 16

static int fd;
static uint8_t id;

static void fill(uint8_t *m, size_t n, unsigned seed)
{
	for (size_t i = 8; i < n; i++)
		m[i] = (uint8_t)(seed * 131 + i * 7);
}

/* Sends m (n bytes) and waits for the reply with the same seqno, resending
 * after 200 ms of silence. Returns the reply's length or -1. */
static ssize_t exchange(uint8_t *m, size_t n, uint8_t *reply, size_t cap)
{
	for (int tries = 0; tries < 25; tries++) {
		if (send(fd, m, n, 0) != (ssize_t)n) {
			perror("send");
			return -1;
		}
		for (;;) {
			struct pollfd p = {fd, POLLIN, 0};
			int r = poll(&p, 1, 200);
			if (r < 0) {
				perror("poll");
				return -1;
			}
			if (!r)
				break; /* resend */
			ssize_t k = recv(fd, reply, cap, MSG_DONTWAIT);
			if (k < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					continue;
				perror("recv");
				return -1;
			}
			if (k >= 4 && reply[2] == m[2])
				return k;
			/* an echo of an earlier resend: skip it */
		}
	}
	fprintf(stderr, "no answer to op %u seqno %u\n", m[0], m[2]);
	return -1;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: %s HOST PORT COUNT SIZE...\n", argv[0]);
		return 2;
	}
	struct addrinfo hints = {0}, *res;
	hints.ai_socktype = SOCK_DGRAM;
	if (getaddrinfo(argv[1], argv[2], &hints, &res)) {
		fprintf(stderr, "getaddrinfo failed\n");
		return 2;
	}
	fd = socket(res->ai_family, SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen)) {
		perror("socket/connect");
		return 1;
	}
	freeaddrinfo(res);
	int count = atoi(argv[3]);
	static uint8_t m[2056], r[2056];
	uint8_t seq = 0;
	memset(m, 0, sizeof(m));
	m[0] = op_login;
	m[2] = seq++;
	if (exchange(m, CTRL_SIZE, r, sizeof(r)) != CTRL_SIZE)
		return 1;
	id = r[1];
	int bad = 0;
	for (int a = 4; a < argc; a++) {
		size_t n = (size_t)atoi(argv[a]);
		if (n < CTRL_SIZE || n > 2048) {
			fprintf(stderr, "size %zu out of range\n", n);
			return 2;
		}
		m[0] = op_start;
		m[1] = id;
		m[2] = seq++;
		if (exchange(m, CTRL_SIZE, r, sizeof(r)) != CTRL_SIZE)
			return 1;
		int ok = 0;
		for (int i = 0; i < count; i++) {
			m[0] = op_echo;
			m[1] = id;
			m[2] = seq++;
			fill(m, n, (unsigned)i + 1000u * (unsigned)a);
			ssize_t k = exchange(m, n, r, sizeof(r));
			if (k != (ssize_t)n || memcmp(m, r, n)) {
				fprintf(stderr, "size %zu echo %d: %zd bytes back, %s\n", n, i, k,
					k == (ssize_t)n ? "content differs" : "wrong length");
				bad++;
				break;
			}
			ok++;
		}
		m[0] = op_end;
		m[1] = id;
		m[2] = seq++;
		if (exchange(m, CTRL_SIZE, r, sizeof(r)) != CTRL_SIZE)
			return 1;
		uint32_t got;
		memcpy(&got, r + 4, 4);
		printf("size %zu: %d echoes intact (server counted %u)\n", n, ok, ntohl(got));
	}
	close(fd);
	return bad ? 1 : 0;
}
