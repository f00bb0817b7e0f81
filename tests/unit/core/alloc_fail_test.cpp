// Allocation failures at the facade: core_unit is linked with
// -Wl,--wrap=calloc, so every calloc of the static archive goes through
// __wrap_calloc below, which fails while a FailCalloc object is alive.
#include "fixtures.h"

#include <cerrno>
#include <cstdlib>

extern "C" void *__real_calloc(size_t n, size_t size);

namespace {
thread_local bool g_fail_calloc = false;

struct FailCalloc {
	FailCalloc() { g_fail_calloc = true; }
	~FailCalloc() { g_fail_calloc = false; }
};
} // namespace

extern "C" void *__wrap_calloc(size_t n, size_t size)
{
	if (g_fail_calloc) {
		errno = ENOMEM;
		return nullptr;
	}
	return __real_calloc(n, size);
}

using namespace ovtest;

// rdma-core sets *num_devices to 0 before anything can fail; callers that
// ignore the NULL return and loop over the count must see no device.
TEST(DeviceList, FailureSetsNumDevicesToZero)
{
	CoreEnv env;
	ibv_free_device_list(ibv_get_device_list(nullptr)); // warm: the next call only copies
	int n = 7;
	ibv_device **list;
	{
		FailCalloc fail;
		list = ibv_get_device_list(&n);
	}
	EXPECT_EQ(list, nullptr);
	EXPECT_EQ(errno, ENOMEM);
	EXPECT_EQ(n, 0);
	ibv_free_device_list(list);
}
