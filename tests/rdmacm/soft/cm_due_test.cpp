// The software CM's time-out heap (src/rdmacm/usercm/due.h): earliest
// first, moves and removals anywhere, membership per heap.
#include "rdmacm/usercm/due.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <random>
#include <vector>

using namespace ov::usercm;

namespace {

struct Node {
	uint64_t deadline = 0;
	size_t due_pos = kNowhere;
};

} // namespace

TEST(CmDue, EarliestFirstAfterRandomSetsMovesAndRemovals)
{
	std::mt19937_64 rng(7);
	std::vector<Node> nodes(500);
	DueHeap<Node> h;
	h.reserve(nodes.size());
	for (int step = 0; step < 20000; step++) {
		Node &n = nodes[rng() % nodes.size()];
		if (rng() % 3 == 0)
			h.remove(&n);
		else
			h.set(&n, 1 + rng() % 1000000);
		ASSERT_TRUE(h.sound()) << "step " << step;
	}
	uint64_t want = UINT64_MAX;
	size_t in = 0;
	for (const Node &n : nodes)
		if (n.due_pos != kNowhere) {
			want = std::min(want, n.deadline);
			in++;
		} else {
			EXPECT_EQ(n.deadline, 0u);
		}
	ASSERT_EQ(h.size(), in);
	ASSERT_NE(h.top(), nullptr);
	EXPECT_EQ(h.top()->deadline, want);
	// Taking the top each time yields the due times in order.
	uint64_t last = 0;
	while (Node *t = h.top()) {
		EXPECT_GE(t->deadline, last);
		last = t->deadline;
		h.remove(t);
		EXPECT_EQ(t->due_pos, kNowhere);
		EXPECT_EQ(t->deadline, 0u);
		ASSERT_TRUE(h.sound());
	}
	EXPECT_TRUE(h.empty());
}

TEST(CmDue, RemoveFromAnotherHeapChangesNothing)
{
	Node a, b;
	DueHeap<Node> h1, h2;
	h1.reserve(2);
	h2.reserve(2);
	h1.set(&a, 10);
	h2.set(&b, 20);
	h2.remove(&a); // a is h1's: its place in h1 is also a valid index in h2
	EXPECT_TRUE(h1.holds(&a));
	EXPECT_EQ(a.deadline, 10u);
	EXPECT_EQ(h2.top(), &b);
	EXPECT_TRUE(h1.sound());
	EXPECT_TRUE(h2.sound());
	h1.remove(&a);
	EXPECT_FALSE(h1.holds(&a));
	h1.remove(&a); // twice: nothing
	EXPECT_TRUE(h1.empty());
}

TEST(CmDue, MovingLaterAndEarlierKeepsOrder)
{
	Node n[3];
	DueHeap<Node> h;
	h.reserve(3);
	h.set(&n[0], 30);
	h.set(&n[1], 20);
	h.set(&n[2], 10);
	EXPECT_EQ(h.top(), &n[2]);
	h.set(&n[2], 40); // later
	EXPECT_EQ(h.top(), &n[1]);
	h.set(&n[0], 5); // earlier
	EXPECT_EQ(h.top(), &n[0]);
	EXPECT_TRUE(h.sound());
}
