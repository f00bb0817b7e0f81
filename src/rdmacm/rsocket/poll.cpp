// rpoll()/rselect(): poll(2)/select(2) over rsockets and ordinary fds.
//
// First every entry is checked without sleeping, for up to the polling
// time (rsocket(7) "polling_time"); then each rsocket is armed and replaced
// by the fds that wake it (its completion channel and its CM channel; the
// CM channel alone while connecting or listening) and the thread sleeps in
// poll(2) for at most the wake-up interval at a time.
//
// Several threads may sleep on the same rsocket, but only one can consume
// its completion event. As in rdma-core, a thread that consumed an event
// raises a process-wide eventfd that every sleeper also watches; the raised
// signal stays up until the last sleeper has left, and no thread goes to
// sleep meanwhile, so every thread re-checks its rsockets.
#include "rsocket.h"

#include <rdma/rsocket.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>
#include <vector>

#define OV_RS_EXPORT extern "C" __attribute__((visibility("default")))

using namespace ov::rs;

namespace {

std::mutex g_gate_mu;
int g_signal_fd = -1;
unsigned g_sleepers = 0;
bool g_suspended = false;

uint64_t now_ms()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000u + static_cast<uint64_t>(ts.tv_nsec) / 1000000u;
}

uint64_t now_us()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

int signal_fd()
{
	std::lock_guard<std::mutex> g(g_gate_mu);
	if (g_signal_fd < 0)
		g_signal_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC | EFD_SEMAPHORE);
	return g_signal_fd;
}

// false: a signal is up, re-check instead of sleeping.
bool gate_enter()
{
	std::lock_guard<std::mutex> g(g_gate_mu);
	if (g_suspended)
		return false;
	g_sleepers++;
	return true;
}

// Leaves the gate; `woke_others`: this thread changed rsocket state the
// others may be waiting for.
void gate_leave(bool woke_others)
{
	std::lock_guard<std::mutex> g(g_gate_mu);
	uint64_t one = 1;
	if (--g_sleepers == 0) {
		if (g_suspended) {
			ssize_t r = read(g_signal_fd, &one, sizeof(one));
			(void)r;
		}
		g_suspended = false;
	} else if (woke_others && !g_suspended) {
		g_suspended = true;
		ssize_t r = write(g_signal_fd, &one, sizeof(one));
		(void)r;
	}
}

// One pass without sleeping. Ordinary fds are polled together.
int check_all(pollfd *fds, nfds_t nfds, std::vector<RSocket *> &rss)
{
	std::vector<pollfd> plain;
	std::vector<nfds_t> where;
	int cnt = 0;
	for (nfds_t i = 0; i < nfds; i++) {
		fds[i].revents = 0;
		if (rss[i]) {
			fds[i].revents = rss[i]->poll_events(fds[i].events);
			if (fds[i].revents)
				cnt++;
		} else if (fds[i].fd >= 0) {
			plain.push_back({fds[i].fd, fds[i].events, 0});
			where.push_back(i);
		}
	}
	if (!plain.empty() && ::poll(plain.data(), plain.size(), 0) > 0) {
		for (size_t k = 0; k < plain.size(); k++) {
			fds[where[k]].revents = plain[k].revents;
			if (plain[k].revents)
				cnt++;
		}
	}
	return cnt;
}

} // namespace

OV_RS_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	if (nfds && !fds) {
		errno = EFAULT;
		return -1;
	}
	rlimit rl;
	if (nfds > INT_MAX || (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY &&
			       nfds > rl.rlim_cur)) {
		errno = EINVAL;
		return -1;
	}
	try {
		std::vector<RSocket *> rss(nfds);
		for (nfds_t i = 0; i < nfds; i++)
			rss[i] = lookup(fds[i].fd);

		uint64_t start_us = now_us();
		uint64_t start_ms = now_ms();
		for (;;) {
			int cnt = check_all(fds, nfds, rss);
			if (cnt || timeout == 0)
				return cnt;
			if (now_us() - start_us > tunables().polling_us)
				break;
		}

		int sig = signal_fd();
		std::vector<pollfd> rfds;
		std::vector<nfds_t> owner; // entry of fds each rfds element serves
		for (;;) {
			rfds.clear();
			owner.clear();
			int ready = 0;
			for (nfds_t i = 0; i < nfds; i++) {
				fds[i].revents = 0;
				if (rss[i]) {
					int wfd[2], n = 0;
					short rev = rss[i]->arm(fds[i].events, wfd, &n);
					if (rev) {
						fds[i].revents = rev;
						ready++;
					}
					for (int k = 0; k < n; k++) {
						rfds.push_back({wfd[k], POLLIN, 0});
						owner.push_back(i);
					}
				} else {
					rfds.push_back({fds[i].fd, fds[i].events, 0});
					owner.push_back(i);
				}
			}
			if (ready) {
				// Report ordinary fds that are ready as well.
				check_all(fds, nfds, rss);
				int cnt = 0;
				for (nfds_t i = 0; i < nfds; i++)
					cnt += fds[i].revents != 0;
				return cnt;
			}
			if (sig >= 0)
				rfds.push_back({sig, POLLIN, 0});
			if (!gate_enter()) {
				sched_yield();
				continue;
			}
			int sleep_ms = tunables().wake_up_ms;
			if (timeout >= 0) {
				int64_t left = static_cast<int64_t>(timeout) -
					       static_cast<int64_t>(now_ms() - start_ms);
				if (left <= 0) {
					gate_leave(false);
					return 0;
				}
				if (left < sleep_ms)
					sleep_ms = static_cast<int>(left);
			}
			int r = ::poll(rfds.data(), rfds.size(), sleep_ms);
			if (r < 0) {
				int e = errno;
				gate_leave(false);
				errno = e;
				return -1;
			}
			bool consumed = false;
			int cnt = 0;
			std::vector<char> seen(nfds, 0);
			for (size_t k = 0; k < owner.size(); k++) {
				nfds_t i = owner[k];
				if (rss[i]) {
					if (rfds[k].revents) {
						rss[i]->after_poll(rfds[k].fd, rfds[k].revents);
						consumed = true;
					}
				} else {
					fds[i].revents = rfds[k].revents;
				}
			}
			for (nfds_t i = 0; i < nfds; i++) {
				if (rss[i] && !seen[i]) {
					seen[i] = 1;
					fds[i].revents = rss[i]->poll_events(fds[i].events);
				}
				cnt += fds[i].revents != 0;
			}
			gate_leave(consumed || cnt);
			if (cnt)
				return cnt;
		}
	} catch (const std::bad_alloc &) {
		errno = ENOMEM;
		return -1;
	}
}

OV_RS_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
			 struct timeval *timeout)
{
	if (nfds < 0 || nfds > FD_SETSIZE) {
		errno = EINVAL;
		return -1;
	}
	int ms = -1;
	if (timeout) {
		if (timeout->tv_sec < 0 || timeout->tv_usec < 0 || timeout->tv_usec >= 1000000) {
			errno = EINVAL;
			return -1;
		}
		long long t = static_cast<long long>(timeout->tv_sec) * 1000 + timeout->tv_usec / 1000;
		ms = t > INT_MAX ? INT_MAX : static_cast<int>(t);
	}
	try {
		std::vector<pollfd> fds;
		for (int fd = 0; fd < nfds; fd++) {
			short ev = 0;
			bool want = false;
			if (readfds && FD_ISSET(fd, readfds)) {
				ev |= POLLIN;
				want = true;
			}
			if (writefds && FD_ISSET(fd, writefds)) {
				ev |= POLLOUT;
				want = true;
			}
			if (exceptfds && FD_ISSET(fd, exceptfds)) {
				ev |= POLLPRI;
				want = true;
			}
			if (want)
				fds.push_back({fd, ev, 0});
		}
		int r = rpoll(fds.data(), fds.size(), ms);
		if (r < 0)
			return -1;
		if (readfds)
			FD_ZERO(readfds);
		if (writefds)
			FD_ZERO(writefds);
		if (exceptfds)
			FD_ZERO(exceptfds);
		int cnt = 0;
		for (const pollfd &p : fds) {
			if (readfds && (p.events & POLLIN) && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
				FD_SET(p.fd, readfds);
				cnt++;
			}
			if (writefds && (p.events & POLLOUT) && (p.revents & (POLLOUT | POLLERR))) {
				FD_SET(p.fd, writefds);
				cnt++;
			}
			if (exceptfds && (p.events & POLLPRI) && (p.revents & POLLPRI)) {
				FD_SET(p.fd, exceptfds);
				cnt++;
			}
		}
		return cnt;
	} catch (const std::bad_alloc &) {
		errno = ENOMEM;
		return -1;
	}
}
