// RoCE v2 software device: the requester's rules for loss recovery, as pure
// functions of its PSN state (no device state), so that unit tests check
// them alone (tests/roce/unit/recovery_test.cpp). transport.cpp applies them.
//
// The requester sends again from the oldest PSN the responder has not
// acknowledged (go-back-N, as IBA vol 1 9.7 allows): on a PSN sequence error NAK
// from the PSN the NAK names, on the QP's timeout from the oldest
// unacknowledged one. A NAK, like an ACK, acknowledges every PSN before the
// one it names, so it is progress for the retry counter: the transport retry
// count (the QP's retry_cnt) is spent only by timeouts in a row that brought
// no acknowledgement of a new PSN (IBA vol 1 9.7, the requester's
// acknowledgement and retry rules).
#pragma once

#include <cstdint>

namespace ovroce {

// Signed distance a - b of two 24-bit PSNs (a later PSN is positive).
inline int32_t psn_distance(uint32_t a, uint32_t b) { return int32_t((a - b) << 8) >> 8; }

// Nanoseconds from `then` to `now`, 0 when `now` is the earlier: the
// transport reads its clock once per unit of work (transport.cpp,
// ClockScope), so a reading may be a little older than a stamp another
// thread made meanwhile; an unsigned difference would wrap into "long ago".
inline uint64_t ns_since(uint64_t now, uint64_t then) { return now > then ? now - then : 0; }

// The requester's state the NAK rule reads.
struct GoBackState {
	uint32_t una;         // first PSN not acknowledged (already moved by the NAK)
	bool went_back;       // it has gone back to back_psn before
	uint32_t back_psn;    // where it went back to
	uint64_t back_ns;     // when
};

// How long after going back to a PSN a NAK for that same PSN is taken as a
// copy of the one that sent it back (the responder NAKs a gap once, and again
// only after its own repeat time, kRoceNakRepeatNs in roce.h, which is
// longer): half the responder's repeat time, so that the responder's repeat
// for a packet lost again is always taken.
inline constexpr uint64_t kSameNakNs = 1000000;

// Whether a PSN sequence error NAK for `psn`, received at `now_ns`, sends the
// requester back to `psn`. Not when it names a PSN acknowledged already (a
// late or duplicated NAK), nor when it repeats, within kSameNakNs, the NAK
// that sent the requester back to that PSN. Every other NAK names a packet
// the responder is missing now: one of the flight being sent again was lost
// too, or a timeout went back to a PSN older than the responder's gap. Both
// must be acted on at once; waiting for the timeout instead spends the retry
// count on losses the NAK already reported.
inline bool nak_goes_back(const GoBackState &s, uint32_t psn, uint64_t now_ns)
{
	if (psn_distance(psn, s.una) < 0)
		return false;
	if (s.went_back && psn == s.back_psn && ns_since(now_ns, s.back_ns) < kSameNakNs)
		return false;
	return true;
}

// Whether a response naming `psn` (an ACK for psn, or a NAK or RNR NAK
// refusing psn: everything before it done) acknowledges PSNs not
// acknowledged so far: `acked_next` is the first PSN it leaves
// unacknowledged (ACK: psn + 1; NAK: psn).
inline bool acknowledges_new(uint32_t acked_next, uint32_t una)
{
	return psn_distance(acked_next, una) > 0;
}

// The wait before sending again after `timeouts` timeouts in a row without
// an acknowledgement of a new PSN, for the QP's timeout `base_ns`: the
// timeout itself first, then twice as long for each timeout in a row, up to
// 32 times the timeout. The QP's timeout is the least a requester waits;
// waiting longer after each miss keeps the retry count (7 at most,
// IBV_QP_RETRY_CNT) from running out while a software peer is merely not
// scheduled (a busy host holds a process off its CPU for longer than
// (retry_cnt + 1) * timeout: 0.54 s for perftest's timeout 14 and retry
// count 7), while a peer that is gone is still reported, after
// 1 + 2 + 4 + 8 + 16 + 32 * (retry_cnt - 4) timeouts (127 for retry count
// 7: 8.5 s at timeout 14).
inline constexpr uint32_t kMaxBackoffShift = 5; // 32 times the timeout
inline uint64_t retransmit_wait_ns(uint64_t base_ns, uint32_t timeouts)
{
	return base_ns << (timeouts < kMaxBackoffShift ? timeouts : kMaxBackoffShift);
}

} // namespace ovroce
