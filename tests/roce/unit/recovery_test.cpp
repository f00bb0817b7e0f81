// The RoCE v2 requester's loss-recovery rules (providers/soft/roce/recovery.h).
//
// Regression: Debian's ib_send_bw over sroce with 1 % each of loss,
// reordering, duplication and damage failed now and then with "transport
// retry counter exceeded" (status 12; the client's completions stopped,
// "scnt=157, ccnt=29"). Three rules spent the QP's retry count (7) on
// nothing: a PSN sequence NAK that arrived while the requester was sending
// an earlier flight again was taken as a leftover of that flight and ignored
// whenever it named a later PSN (a packet lost a second time waited for the
// QP's timeout); the PSNs such a NAK acknowledged did not reset the retry
// count; and the count ran out after 8 timeouts in a row (0.54 s at
// perftest's timeout 14), while the logs of the failed runs showed the
// responder answering every one of those flights, just after the requester
// had given up: its process had not been scheduled for that long.
#include "recovery.h"

#include <gtest/gtest.h>

using namespace ovroce;

namespace {

constexpr uint64_t kMs = 1000000;

TEST(RoceRecovery, PsnDistanceWrapsAt24Bits)
{
	EXPECT_EQ(psn_distance(5, 3), 2);
	EXPECT_EQ(psn_distance(3, 5), -2);
	EXPECT_EQ(psn_distance(0x000002, 0xfffffe), 4);
	EXPECT_EQ(psn_distance(0xfffffe, 0x000002), -4);
}

TEST(RoceRecovery, NakForAPacketLostAgainInTheFlightSentAgainGoesBack)
{
	// Went back to 0x100 (a NAK), the flight 0x100.. is being sent again,
	// and the responder now reports 0x104 missing: that packet was lost in
	// the new flight. Before the fix this NAK was ignored (0x104 is past the
	// PSN gone back to and before the next PSN to send).
	GoBackState s{0x104, true, 0x100, 10 * kMs};
	EXPECT_TRUE(nak_goes_back(s, 0x104, 10 * kMs + 100000));
}

TEST(RoceRecovery, NakPastAnOlderTimeoutRewindGoesBack)
{
	// A timeout went back to the oldest unacknowledged PSN (its ACK was
	// lost); the responder is missing a later one and says so.
	GoBackState s{0x2a, true, 0x27, 50 * kMs};
	EXPECT_TRUE(nak_goes_back(s, 0x2a, 50 * kMs + 20000));
}

TEST(RoceRecovery, CopyOfTheNakThatSentItBackIsIgnored)
{
	// A duplicated NAK, or one the earlier flight's packets still raise,
	// arriving right after going back to the same PSN.
	GoBackState s{0x100, true, 0x100, 10 * kMs};
	EXPECT_FALSE(nak_goes_back(s, 0x100, 10 * kMs + 50000));
	EXPECT_FALSE(nak_goes_back(s, 0x100, 10 * kMs + kSameNakNs - 1));
}

TEST(RoceRecovery, CopyOfTheNakSeenWithAnOlderClockReadingIsIgnored)
{
	// The thread that handles the NAK read its clock for the batch before
	// another thread went back (transport.cpp, ClockScope): the difference
	// must not wrap into "long ago".
	GoBackState s{0x100, true, 0x100, 10 * kMs};
	EXPECT_FALSE(nak_goes_back(s, 0x100, 10 * kMs - 3000));
}

TEST(RoceRecovery, ResponderRepeatForTheSamePsnIsTaken)
{
	// The responder NAKs a gap again only after its repeat time (2 ms):
	// by then the packet sent again was lost too, and it is sent once more.
	GoBackState s{0x100, true, 0x100, 10 * kMs};
	EXPECT_TRUE(nak_goes_back(s, 0x100, 10 * kMs + kSameNakNs));
	EXPECT_TRUE(nak_goes_back(s, 0x100, 12 * kMs));
}

TEST(RoceRecovery, LateNakBehindTheAcknowledgedPsnIsIgnored)
{
	GoBackState s{0x200, true, 0x100, 10 * kMs};
	EXPECT_FALSE(nak_goes_back(s, 0x1ff, 20 * kMs));
	EXPECT_FALSE(nak_goes_back(s, 0x100, 20 * kMs));
	// Across the 24-bit wrap.
	GoBackState w{0x000003, true, 0xfffff0, 10 * kMs};
	EXPECT_FALSE(nak_goes_back(w, 0xfffffe, 20 * kMs));
	EXPECT_TRUE(nak_goes_back(w, 0x000003, 20 * kMs));
}

TEST(RoceRecovery, FirstNakEverGoesBack)
{
	GoBackState s{0x10, false, 0, 0};
	EXPECT_TRUE(nak_goes_back(s, 0x10, 0));
	EXPECT_TRUE(nak_goes_back(s, 0x10, 5 * kMs));
}

TEST(RoceRecovery, NakAcknowledgingNewPsnsIsProgress)
{
	// A NAK for 0x120 acknowledges 0x100..0x11f: the retry count starts
	// again, as for an ACK.
	EXPECT_TRUE(acknowledges_new(0x120, 0x100));
	// A NAK for the first unacknowledged PSN acknowledges nothing new.
	EXPECT_FALSE(acknowledges_new(0x100, 0x100));
	EXPECT_FALSE(acknowledges_new(0x0ff, 0x100));
	EXPECT_TRUE(acknowledges_new(0x000001, 0xffffff));
}

TEST(RoceRecovery, WaitDoublesWithTimeoutsInARowUpTo32Times)
{
	const uint64_t to = 67108864; // perftest's timeout 14: 4.096 us * 2^14
	EXPECT_EQ(retransmit_wait_ns(to, 0), to);
	EXPECT_EQ(retransmit_wait_ns(to, 1), 2 * to);
	EXPECT_EQ(retransmit_wait_ns(to, 2), 4 * to);
	EXPECT_EQ(retransmit_wait_ns(to, 5), 32 * to);
	EXPECT_EQ(retransmit_wait_ns(to, 7), 32 * to);
	// Retry count 7: the peer must stay silent for 127 timeouts (8.5 s at
	// timeout 14) before the QP gives up, instead of 8 (0.54 s): long
	// enough for a peer process that a loaded host did not schedule.
	uint64_t total = 0;
	for (uint32_t i = 0; i <= 7; i++)
		total += retransmit_wait_ns(to, i);
	EXPECT_EQ(total, 127 * to);
}

} // namespace
