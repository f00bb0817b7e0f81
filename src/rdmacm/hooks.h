// How the front end reaches the two connection managers. The kernel's is in
// kernel/ (this library's), the software devices' in usercm/ (its own
// owner); both implement the interfaces of backend.h.
#pragma once

#include "backend.h"

namespace ov::cm::kernel {
// Opens /dev/infiniband/rdma_cm: a source for one event channel, or null
// with err set (the open's errno: ENOENT without kernel RDMA CM).
std::unique_ptr<EventSource> open_source(int &err) noexcept;
// CREATE_ID on the source's fd; null with err set on failure.
std::unique_ptr<IdBackend> create_id(EventSource &src, uint64_t uid, uint16_t ps, uint8_t qp_type,
				     int &err) noexcept;
} // namespace ov::cm::kernel

namespace ov::cm::soft {
// True when this process has software devices (RDMAV_SOFT_DEVICES, ...).
bool enabled() noexcept;
// Whether the software CM serves this address (it is a local address that
// no kernel RDMA device owns). Called before bind and resolve.
bool claims(const sockaddr *addr) noexcept;
// A source for one event channel, or null with err set.
std::unique_ptr<EventSource> open_source(int &err) noexcept;
// Reads now what the first bind or resolve would otherwise read: the
// address bindings of the configuration files and the kernel's RDMA
// network devices. Called when a channel is made, where rdma-core 44
// reads its device list (ucma_init); idempotent.
void prepare() noexcept;
// A new id on the source; null with err set.
std::unique_ptr<IdBackend> create_id(EventSource &src, uint64_t uid, uint16_t ps, uint8_t qp_type,
				     int &err) noexcept;
} // namespace ov::cm::soft
