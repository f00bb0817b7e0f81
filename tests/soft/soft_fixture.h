// Helpers shared by the software-device test programs (tests/soft, tests/xrc,
// tests/domains): open a software device by index, wait for one completion,
// and the path of the running test binary (peers are exec'ed from it).
#pragma once

#include <infiniband/verbs.h>

#include <string>
#include <unistd.h>

namespace ov_test {

// Opens soft<index> through the library under test, or returns nullptr.
inline ibv_context *open_soft(int index = 0)
{
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	if (!list)
		return nullptr;
	ibv_context *ctx = nullptr;
	std::string want = "soft" + std::to_string(index);
	for (int i = 0; i < n && !ctx; i++)
		if (want == ibv_get_device_name(list[i]))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

// Polls until one completion arrives (true) or about `ms` ms pass or the
// poll fails (false).
inline bool poll_one(ibv_cq *cq, ibv_wc *wc, int ms = 5000)
{
	for (int i = 0; i < ms * 10; i++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n == 1)
			return true;
		if (n < 0)
			return false;
		usleep(100);
	}
	return false;
}

// The path of this executable ("" if /proc is unavailable).
inline std::string self_exe()
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return {};
	exe[n] = 0;
	return exe;
}

} // namespace ov_test
