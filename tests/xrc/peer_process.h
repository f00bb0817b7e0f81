// A peer process for multi-process tests: fork + exec of a helper binary
// (a fresh process, never a forked copy of the test), talking one line per
// command over a pipe pair. Replies are read with a timeout so that a hung
// peer fails the test instead of hanging it.
#pragma once

#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace xrcpd {

class PeerProcess {
public:
	PeerProcess() = default;
	PeerProcess(const PeerProcess &) = delete;
	PeerProcess &operator=(const PeerProcess &) = delete;
	~PeerProcess() { stop(); }

	// Starts argv[0] with argv; returns the first line the peer printed
	// (empty on failure).
	std::string start(const std::vector<std::string> &argv)
	{
		int to[2], from[2];
		if (pipe2(to, O_CLOEXEC) || pipe2(from, O_CLOEXEC))
			return "";
		pid_ = fork();
		if (pid_ == 0) {
			dup2(to[0], 0);
			dup2(from[1], 1);
			std::vector<char *> args;
			for (const auto &a : argv)
				args.push_back(const_cast<char *>(a.c_str()));
			args.push_back(nullptr);
			execv(args[0], args.data());
			_exit(127);
		}
		close(to[0]);
		close(from[1]);
		in_ = to[1];
		out_ = from[0];
		return read_line(60000);
	}

	// Sends one command line and returns the peer's one-line answer.
	std::string cmd(const char *fmt, ...) __attribute__((format(printf, 2, 3)))
	{
		char line[1024];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(line, sizeof(line) - 1, fmt, ap);
		va_end(ap);
		std::string s = std::string(line) + "\n";
		if (in_ < 0 || write(in_, s.data(), s.size()) != ssize_t(s.size()))
			return "dead";
		return read_line(60000);
	}

	// Split form of cmd(): send now, read the answer later (to let several
	// peers race on the same command).
	bool send_line(const std::string &line)
	{
		std::string s = line + "\n";
		return in_ >= 0 && write(in_, s.data(), s.size()) == ssize_t(s.size());
	}
	std::string read_reply() { return read_line(60000); }

	// The number after "ok" (or ~0u).
	static unsigned value(const std::string &reply)
	{
		unsigned v = ~0u;
		if (sscanf(reply.c_str(), "ok %u", &v) != 1)
			return ~0u;
		return v;
	}

	// Kills the peer with SIGKILL and reaps it.
	void kill_now()
	{
		if (pid_ > 0)
			::kill(pid_, SIGKILL);
		stop();
	}

	// Closes the pipes and waits for the peer; returns its wait status.
	int stop()
	{
		if (in_ >= 0)
			close(in_);
		in_ = -1;
		int st = -1;
		if (pid_ > 0) {
			// A peer reads EOF and leaves; give it a few seconds.
			for (int i = 0; i < 500; i++) {
				if (waitpid(pid_, &st, WNOHANG) == pid_)
					break;
				usleep(10000);
				if (i == 499) {
					::kill(pid_, SIGKILL);
					waitpid(pid_, &st, 0);
				}
			}
			pid_ = -1;
		}
		if (out_ >= 0)
			close(out_);
		out_ = -1;
		return st;
	}

	pid_t pid() const { return pid_; }

private:
	std::string read_line(int timeout_ms)
	{
		std::string line;
		while (true) {
			size_t nl = buf_.find('\n');
			if (nl != std::string::npos) {
				line = buf_.substr(0, nl);
				buf_.erase(0, nl + 1);
				return line;
			}
			pollfd p = {out_, POLLIN, 0};
			int n = poll(&p, 1, timeout_ms);
			if (n <= 0)
				return n == 0 ? "timeout" : "dead";
			char chunk[512];
			ssize_t r = read(out_, chunk, sizeof(chunk));
			if (r <= 0)
				return "dead";
			buf_.append(chunk, size_t(r));
		}
	}

	pid_t pid_ = -1;
	int in_ = -1, out_ = -1;
	std::string buf_;
};

} // namespace xrcpd
