// The software CM's queue of made events (src/rdmacm/usercm/event_queue.h):
// first in, first out across wrap-around and growth, extraction in order,
// and nothing an event owns outlives its leaving the queue.
#include "rdmacm/usercm/event_queue.h"

#include <gtest/gtest.h>
#include <deque>
#include <memory>
#include <random>

using namespace ov::usercm;

namespace {

// An event that owns something, as RawEvent owns a CONNECT_REQUEST's child.
struct Ev {
	int n = 0;
	std::unique_ptr<int> owned;
};

int g_live = 0;
struct Counted {
	Counted() { g_live++; }
	~Counted() { g_live--; }
};
struct OwningEv {
	int n = 0;
	std::unique_ptr<Counted> owned;
};

} // namespace

TEST(EventQueue, FifoAcrossWrapAndGrowth)
{
	EventQueue<Ev> q;
	std::deque<int> model;
	std::mt19937 rng(7);
	int next = 0;
	for (int step = 0; step < 20000; step++) {
		if (model.empty() || rng() % 3 != 0) {
			q.push_back(Ev{next, std::make_unique<int>(next)});
			model.push_back(next++);
		} else {
			Ev e = q.take_front();
			ASSERT_EQ(e.n, model.front());
			ASSERT_TRUE(e.owned);
			EXPECT_EQ(*e.owned, model.front());
			model.pop_front();
		}
		ASSERT_EQ(q.size(), model.size());
		ASSERT_EQ(q.empty(), model.empty());
	}
	std::vector<int> seen;
	q.for_each([&](const Ev &e) { seen.push_back(e.n); });
	EXPECT_EQ(seen, std::vector<int>(model.begin(), model.end()));
}

TEST(EventQueue, ExtractKeepsBothOrders)
{
	EventQueue<Ev> q;
	// Start past the buffer's beginning so the events wrap around.
	for (int i = 0; i < 3; i++)
		q.push_back(Ev{-1, nullptr});
	for (int i = 0; i < 3; i++)
		q.take_front();
	for (int i = 0; i < 10; i++)
		q.push_back(Ev{i, std::make_unique<int>(i)});
	std::vector<int> taken;
	q.extract_if([](const Ev &e) { return e.n % 3 == 0; },
		     [&](Ev &&e) {
			     ASSERT_TRUE(e.owned);
			     taken.push_back(*e.owned);
		     });
	EXPECT_EQ(taken, (std::vector<int>{0, 3, 6, 9}));
	std::vector<int> left;
	while (!q.empty())
		left.push_back(q.take_front().n);
	EXPECT_EQ(left, (std::vector<int>{1, 2, 4, 5, 7, 8}));
	q.extract_if([](const Ev &) { return true; }, [](Ev &&) {});
	EXPECT_TRUE(q.empty());
}

TEST(EventQueue, NothingOwnedStaysBehind)
{
	{
		EventQueue<OwningEv> q;
		for (int i = 0; i < 40; i++) // grows 4 -> 64
			q.push_back(OwningEv{i, std::make_unique<Counted>()});
		EXPECT_EQ(g_live, 40);
		for (int i = 0; i < 10; i++)
			q.take_front(); // the taken event is destroyed here
		EXPECT_EQ(g_live, 30);
		q.extract_if([](const OwningEv &e) { return e.n % 2 == 0; }, [](OwningEv &&) {});
		EXPECT_EQ(g_live, 15);
		q.clear();
		EXPECT_EQ(g_live, 0);
		EXPECT_TRUE(q.empty());
		q.push_back(OwningEv{1, std::make_unique<Counted>()});
		EXPECT_EQ(q.size(), 1u);
	}
	EXPECT_EQ(g_live, 0); // the queue's own destruction
}

TEST(EventQueue, ReserveMakesPushesInfallible)
{
	EventQueue<Ev> q;
	q.reserve(100);
	for (int i = 0; i < 100; i++)
		q.push_back(Ev{i, nullptr});
	EXPECT_EQ(q.size(), 100u);
	EXPECT_EQ(q.take_front().n, 0);
}

TEST(EventQueue, BurstMemoryIsGivenBackWhenEmpty)
{
	using Q = EventQueue<Ev>;
	Q q;
	const int big = int(Q::kKeepEvents) + 1; // grows past what is kept
	for (int i = 0; i < 1000; i++)
		q.push_back(Ev{i, nullptr});
	while (!q.empty())
		q.take_front();
	EXPECT_EQ(q.capacity(), 1024u); // kept for the next burst
	for (int i = 0; i < big; i++)
		q.push_back(Ev{i, nullptr});
	EXPECT_EQ(q.capacity(), 2 * Q::kKeepEvents);
	for (int i = 0; i < big - 1; i++)
		EXPECT_EQ(q.take_front().n, i);
	EXPECT_EQ(q.capacity(), 2 * Q::kKeepEvents); // not empty yet
	EXPECT_EQ(q.take_front().n, big - 1);
	EXPECT_EQ(q.capacity(), 0u);
	q.push_back(Ev{5, nullptr});
	EXPECT_EQ(q.take_front().n, 5);
	for (int i = 0; i < big; i++)
		q.push_back(Ev{i, nullptr});
	q.extract_if([](const Ev &) { return true; }, [](Ev &&) {});
	EXPECT_EQ(q.capacity(), 0u);
	for (int i = 0; i < big; i++)
		q.push_back(Ev{i, nullptr});
	q.clear();
	EXPECT_EQ(q.capacity(), 0u);
}
