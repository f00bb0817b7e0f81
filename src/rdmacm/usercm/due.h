// Due times of the software CM's ids: an intrusive binary min-heap.
//
// Every id with a pending time-out (a request or reply unanswered, a MAD to
// send again, a DISCONNECTED that waits) sits in its event source's heap,
// keyed by `deadline` (CLOCK_MONOTONIC, ns), and knows its place there
// (`due_pos`). Setting, moving or clearing one due time, and finding the
// earliest, cost O(log n) and O(1) for a source of n ids, where a scan of
// every id made each connection set-up and each destroy O(n) (and a server
// that holds many connections O(n^2) over their lifetime).
//
// The heap never allocates once room is reserved: the engine reserves room
// for every id of a source when the id joins it (engine.cpp, Source::join),
// so the calls made from noexcept paths (time-outs, destroy) cannot fail.
#pragma once

#include "placed.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ov::usercm {

// T: a type with `uint64_t deadline` and `size_t due_pos` (kNowhere when in
// no heap). An element is in at most one heap at a time.
template <class T> class DueHeap {
public:
	// Room for n elements (throws std::bad_alloc).
	void reserve(size_t n) { make_room(v_, n); }
	size_t size() const noexcept { return v_.size(); }
	bool empty() const noexcept { return v_.empty(); }
	// The element due first, or nullptr.
	T *top() const noexcept { return v_.empty() ? nullptr : v_.front(); }
	// Puts t in the heap with due time `when` (> 0), or moves it there.
	// Needs reserved room when t is not in the heap yet, and t in no other.
	void set(T *t, uint64_t when) noexcept
	{
		uint64_t was = t->deadline;
		t->deadline = when;
		if (!holds(t)) {
			t->due_pos = v_.size();
			v_.push_back(t); // within the reserved room: no allocation
			up(t->due_pos);
		} else if (when < was) {
			up(t->due_pos);
		} else {
			down(t->due_pos);
		}
	}
	// True when t is in this heap.
	bool holds(const T *t) const noexcept { return t->due_pos < v_.size() && v_[t->due_pos] == t; }
	// Takes t out of this heap (its deadline becomes 0); nothing when it
	// is not in it.
	void remove(T *t) noexcept
	{
		if (!holds(t))
			return;
		size_t i = t->due_pos;
		t->deadline = 0;
		t->due_pos = kNowhere;
		T *last = v_.back();
		v_.pop_back();
		if (last == t)
			return;
		v_[i] = last;
		last->due_pos = i;
		up(i);
		down(last->due_pos);
	}
	// True when the heap order and every element's due_pos hold (tests).
	bool sound() const noexcept
	{
		for (size_t i = 0; i < v_.size(); i++) {
			if (v_[i]->due_pos != i || !v_[i]->deadline)
				return false;
			if (i && v_[(i - 1) / 2]->deadline > v_[i]->deadline)
				return false;
		}
		return true;
	}

private:
	std::vector<T *> v_;

	void place(size_t i, T *t) noexcept
	{
		v_[i] = t;
		t->due_pos = i;
	}
	void up(size_t i) noexcept
	{
		T *t = v_[i];
		while (i) {
			size_t p = (i - 1) / 2;
			if (v_[p]->deadline <= t->deadline)
				break;
			place(i, v_[p]);
			i = p;
		}
		place(i, t);
	}
	void down(size_t i) noexcept
	{
		T *t = v_[i];
		size_t n = v_.size();
		for (;;) {
			size_t c = 2 * i + 1;
			if (c >= n)
				break;
			if (c + 1 < n && v_[c + 1]->deadline < v_[c]->deadline)
				c++;
			if (t->deadline <= v_[c]->deadline)
				break;
			place(i, v_[c]);
			i = c;
		}
		place(i, t);
	}
};

} // namespace ov::usercm
