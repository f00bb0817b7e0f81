// Printable names of verbs enums and link-rate conversions
// (ibv_node_type_str(3), ibv_port_state_str(3), ibv_event_type_str(3),
// ibv_wc_status_str(3), ibv_rate_to_mult(3), ibv_rate_to_mbps(3)).
//
// The strings are what Debian's ibv_devinfo, the pingpongs and perftest print;
// they are compared with rdma-core's output, so each one is fixed.
#include "core/verbs/verbs.h"

#include <cstddef>

namespace ov::verbs {

namespace {

template <size_t N>
const char *lookup(const char *const (&names)[N], long value)
{
	if (value < 0 || static_cast<size_t>(value) >= N || !names[value])
		return "unknown";
	return names[value];
}

// Link rate: enum value, multiple of 2.5 Gb/s (-1: not a multiple), Mb/s.
struct RateRow {
	enum ibv_rate rate;
	int mult;
	int mbps;
};

constexpr RateRow kRates[] = {
	{IBV_RATE_2_5_GBPS, 1, 2500},     {IBV_RATE_5_GBPS, 2, 5000},
	{IBV_RATE_10_GBPS, 4, 10000},     {IBV_RATE_20_GBPS, 8, 20000},
	{IBV_RATE_30_GBPS, 12, 30000},    {IBV_RATE_40_GBPS, 16, 40000},
	{IBV_RATE_60_GBPS, 24, 60000},    {IBV_RATE_80_GBPS, 32, 80000},
	{IBV_RATE_120_GBPS, 48, 120000},  {IBV_RATE_14_GBPS, -1, 14062},
	{IBV_RATE_56_GBPS, -1, 56250},    {IBV_RATE_112_GBPS, -1, 112500},
	{IBV_RATE_168_GBPS, -1, 168750},  {IBV_RATE_25_GBPS, -1, 25781},
	{IBV_RATE_100_GBPS, -1, 103125},  {IBV_RATE_200_GBPS, -1, 206250},
	{IBV_RATE_300_GBPS, -1, 309375},  {IBV_RATE_28_GBPS, 11, 28125},
	{IBV_RATE_50_GBPS, 20, 53125},    {IBV_RATE_400_GBPS, 160, 425000},
	{IBV_RATE_600_GBPS, 240, 637500}, {IBV_RATE_800_GBPS, 320, 850000},
	{IBV_RATE_1200_GBPS, 480, 1275000},
};

} // namespace

const char *node_type_str(enum ibv_node_type type) noexcept
{
	static const char *const names[] = {
		nullptr,
		"InfiniBand channel adapter",
		"InfiniBand switch",
		"InfiniBand router",
		"iWARP NIC",
		"usNIC",
		"usNIC UDP",
		"unspecified",
	};
	return lookup(names, type);
}

const char *port_state_str(enum ibv_port_state state) noexcept
{
	static const char *const names[] = {
		"no state change (NOP)", "down", "init", "armed", "active", "active defer",
	};
	return lookup(names, state);
}

const char *event_type_str(enum ibv_event_type event) noexcept
{
	static const char *const names[] = {
		"CQ error",
		"local work queue catastrophic error",
		"invalid request local work queue error",
		"local access violation work queue error",
		"communication established",
		"send queue drained",
		"path migrated",
		"path migration request error",
		"local catastrophic error",
		"port active",
		"port error",
		"LID change",
		"P_Key change",
		"SM change",
		"SRQ catastrophic error",
		"SRQ limit reached",
		"last WQE reached",
		"client reregistration",
		"GID table change",
		"WQ fatal",
	};
	return lookup(names, event);
}

const char *wc_status_str(enum ibv_wc_status status) noexcept
{
	static const char *const names[] = {
		"success",
		"local length error",
		"local QP operation error",
		"local EE context operation error",
		"local protection error",
		"Work Request Flushed Error",
		"memory management operation error",
		"bad response error",
		"local access error",
		"remote invalid request error",
		"remote access error",
		"remote operation error",
		"transport retry counter exceeded",
		"RNR retry counter exceeded",
		"local RDD violation error",
		"remote invalid RD request",
		"aborted error",
		"invalid EE context number",
		"invalid EE context state",
		"fatal error",
		"response timeout error",
		"general error",
		"TM error",
		"TM software rendezvous",
	};
	return lookup(names, status);
}

#if _OPENVERBS_ABI >= 56
const char *wr_opcode_str(enum ibv_wr_opcode opcode) noexcept
{
	// rdma-core 56's names (lower case, words joined by '-'), indexed by
	// the opcode's value; 12 and 13 are no opcodes.
	static const char *const names[] = {
		"rdma-write",	     "rdma-write-with-imm", "send",	 "send-with-imm",
		"rdma-read",	     "atomic-cmp-and-swp",  "atomic-fetch-and-add",
		"local-inv",	     "bind-mw",		    "send-with-inv", "tso",
		"driver1",	     nullptr,		    nullptr,	     "flush",
		"atomic-write",
	};
	static_assert(IBV_WR_FLUSH == 14 && IBV_WR_ATOMIC_WRITE == 15 && IBV_WR_DRIVER1 == 11);
	auto i = static_cast<unsigned>(opcode);
	if (i < sizeof(names) / sizeof(names[0]) && names[i])
		return names[i];
	return "unknown";
}
#endif

int rate_to_mult(enum ibv_rate rate) noexcept
{
	for (const auto &row : kRates)
		if (row.rate == rate)
			return row.mult;
	return -1;
}

enum ibv_rate mult_to_rate(int mult) noexcept
{
	for (const auto &row : kRates)
		if (row.mult > 0 && row.mult == mult)
			return row.rate;
	return IBV_RATE_MAX;
}

int rate_to_mbps(enum ibv_rate rate) noexcept
{
	for (const auto &row : kRates)
		if (row.rate == rate)
			return row.mbps;
	return -1;
}

enum ibv_rate mbps_to_rate(int mbps) noexcept
{
	for (const auto &row : kRates)
		if (row.mbps == mbps)
			return row.rate;
	return IBV_RATE_MAX;
}

} // namespace ov::verbs
