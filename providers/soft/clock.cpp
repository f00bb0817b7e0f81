// openverbs software RDMA device: the device clock.
//
// The clock is CLOCK_MONOTONIC in nanoseconds: one tick per nanosecond, so
// ibv_query_device_ex(3) reports hca_core_clock = 1000000 kHz and
// completion_timestamp_mask = all 64 bits. It is the same for every
// process of the machine, so a completion written by a peer process is
// stamped on the clock the CQ's owner reads.
//  - IBV_WC_EX_WITH_COMPLETION_TIMESTAMP (ibv_create_cq_ex(3)): the tick
//    count when the completion was written into the CQ (for completions of
//    a thread domain's own lane, when they are polled);
//  - IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK: the same instant in
//    nanoseconds since the Epoch (CLOCK_REALTIME), converted with the
//    offset between the two clocks at the time of the read;
//  - ibv_query_rt_values_ex(3): IBV_VALUES_MASK_RAW_CLOCK gives the tick
//    count now, all of it in raw_clock.tv_nsec (tv_sec 0), as HCAs report
//    their cycle counter. Other mask bits are not answered (comp_mask says
//    what was).
// Documented in openverbs-soft(7).
#include "soft.h"

#include <cerrno>
#include <ctime>

namespace ovsoft {

uint64_t device_clock() { return now_ns(); }

static uint64_t realtime_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

int soft_query_rt_values(struct ibv_context *, struct ibv_values_ex *values)
{
	if (!values)
		return EINVAL;
	uint32_t got = 0;
	if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		values->raw_clock.tv_sec = 0;
		values->raw_clock.tv_nsec = long(device_clock());
		got |= IBV_VALUES_MASK_RAW_CLOCK;
	}
	values->comp_mask = got;
	return 0;
}

static inline SoftCq *ex_cq(struct ibv_cq_ex *c) { return reinterpret_cast<SoftCq *>(c); }

static uint64_t read_ts(struct ibv_cq_ex *c) { return ex_cq(c)->cur.ts; }

static uint64_t read_wallclock(struct ibv_cq_ex *c)
{
	uint64_t ts = ex_cq(c)->cur.ts;
	uint64_t mono = device_clock(), real = realtime_ns();
	return real - (mono - ts);
}

void cq_ex_timestamps(SoftCq *cq)
{
	const uint64_t f = cq->wc_flags;
	cq->stamp = f & (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK);
	if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		cq->vcq.cq_ex.read_completion_ts = read_ts;
	if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		cq->vcq.cq_ex.read_completion_wallclock_ns = read_wallclock;
	if (cq->stamp) {
		CqEntry &e = to_sctx(cq->vcq.cq.context)->seg->hdr->cqs[cq->slot];
		__atomic_store_n(&e.stamp, 1u, __ATOMIC_RELAXED);
	}
}

} // namespace ovsoft
