// The software devices' connection manager: placeholder until helper
// "usercm" lands it (Build 3 of issue 13). It reports itself disabled, so
// every id is served by the kernel CM, and an event channel without
// /dev/infiniband/rdma_cm fails exactly as rdma-core's does.
#include "../hooks.h"

#include <cerrno>

namespace ov::cm::soft {

bool enabled() noexcept { return false; }

bool claims(const sockaddr *) noexcept { return false; }

std::unique_ptr<EventSource> open_source(int &err) noexcept
{
	err = ENODEV;
	return nullptr;
}

std::unique_ptr<IdBackend> create_id(EventSource &, uint64_t, uint16_t, uint8_t, int &err) noexcept
{
	err = ENODEV;
	return nullptr;
}

} // namespace ov::cm::soft
