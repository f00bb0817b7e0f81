// An event channel destroyed while another thread waits on it, or just
// before that thread calls in (rping's event thread does both, by timing,
// when rping exits): the thread keeps waiting, as one blocked in the kernel
// CM's read of the closed file does, and never touches freed memory. A
// channel that was never created is refused with EBADF.
#include <rdma/rdma_cma.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace {

#if defined(__SANITIZE_THREAD__)
// The number of threads of this process (/proc/self/status "Threads:").
int threads_in_process()
{
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return 0;
	char line[128];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	return n;
}
#endif

// Runs body in a child process; true when the child is still running
// `ms` milliseconds later (it is then killed).
template <class F> ::testing::AssertionResult still_waiting_after(int ms, F body)
{
	pid_t pid = fork();
	if (pid < 0)
		return ::testing::AssertionFailure() << "fork: " << strerror(errno);
	if (pid == 0) {
		body();
		_exit(0); // returned: not waiting
	}
	std::this_thread::sleep_for(std::chrono::milliseconds(ms));
	int status = 0;
	pid_t got = waitpid(pid, &status, WNOHANG);
	if (got == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return ::testing::AssertionSuccess();
	}
	if (WIFSIGNALED(status))
		return ::testing::AssertionFailure() << "the child died of signal " << WTERMSIG(status);
	return ::testing::AssertionFailure() << "the child returned (status " << status << ")";
}

TEST(SoftCmChannel, CallOnAChannelJustDestroyedWaits)
{
	EXPECT_TRUE(still_waiting_after(300, [] {
		rdma_event_channel *ch = rdma_create_event_channel();
		if (!ch)
			_exit(2);
		rdma_destroy_event_channel(ch);
		rdma_cm_event *ev;
		rdma_get_cm_event(ch, &ev);
	}));
}

TEST(SoftCmChannel, ChannelDestroyedUnderAWaitingThread)
{
#if defined(__SANITIZE_THREAD__)
	// The child starts a thread. ThreadSanitizer cannot start threads in
	// a child forked from a multi-threaded process (it dies: "starting new
	// threads after multi-threaded fork is not supported"), and the tests
	// before this one leave the library's threads running. Run alone
	// (--gtest_filter), the process is single-threaded and the test runs.
	if (threads_in_process() > 1)
		GTEST_SKIP() << "ThreadSanitizer: no thread in a child of a multi-threaded fork";
#endif
	EXPECT_TRUE(still_waiting_after(300, [] {
		rdma_event_channel *ch = rdma_create_event_channel();
		rdma_cm_id *id;
		if (!ch || rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP))
			_exit(2);
		std::atomic<bool> returned{false};
		std::thread waiter([&] {
			rdma_cm_event *ev;
			rdma_get_cm_event(ch, &ev);
			returned = true;
		});
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
		if (rdma_destroy_id(id))
			_exit(2);
		rdma_destroy_event_channel(ch);
		// The channel is gone; other channels still work.
		rdma_event_channel *ch2 = rdma_create_event_channel();
		if (!ch2 || rdma_create_id(ch2, &id, nullptr, RDMA_PS_TCP) || rdma_destroy_id(id))
			_exit(2);
		rdma_destroy_event_channel(ch2);
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		if (returned)
			_exit(3);
		waiter.join(); // forever
	}));
}

TEST(SoftCmChannel, NonBlockingChannelJustDestroyedIsRefused)
{
	rdma_event_channel *ch = rdma_create_event_channel();
	ASSERT_NE(ch, nullptr);
	ASSERT_EQ(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
	rdma_destroy_event_channel(ch);
	rdma_cm_event *ev;
	errno = 0;
	EXPECT_EQ(rdma_get_cm_event(ch, &ev), -1);
	EXPECT_EQ(errno, EBADF);
}

TEST(SoftCmChannel, UnknownChannelIsRefused)
{
	alignas(64) unsigned char bytes[256] = {};
	auto *ch = reinterpret_cast<rdma_event_channel *>(bytes);
	ch->fd = -1;
	rdma_cm_event *ev;
	errno = 0;
	EXPECT_EQ(rdma_get_cm_event(ch, &ev), -1);
	EXPECT_EQ(errno, EBADF);
	rdma_destroy_event_channel(ch); // ignored
}

} // namespace
