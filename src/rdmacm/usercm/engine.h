// The software devices' connection manager: librdmacm's backend for ids whose
// address belongs to a soft device (src/DESIGN.md, "Connection manager for
// software devices"). It implements ov::cm::soft (hooks.h): an EventSource per
// event channel (an epoll fd over the CM sockets of its ids, a timerfd and an
// eventfd; no thread: EventSource::next runs the state machines) and an
// IdBackend per id, in the kernel CM's terms (backend.h).
#pragma once

#include <cstdint>

namespace ov::usercm {

// Connections refused because the peer's SO_PEERCRED uid was not ours
// (for tests; malformed records are counted by wire.h's parse_failures).
uint64_t foreign_peer_count() noexcept;

// Response timeout for REP, RTU, DREP and SIDR_REP, in milliseconds
// (8000; tests shorten it).
void set_response_timeout_ms(uint32_t ms) noexcept;

} // namespace ov::usercm
