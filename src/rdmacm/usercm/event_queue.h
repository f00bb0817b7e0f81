// The events an event source has made and not yet handed out: a FIFO kept in
// one circular buffer that grows by doubling and never shrinks.
//
// std::deque kept one event per node (an event with its private data is
// larger than the deque's 512-byte node), so every event cost a malloc and a
// free of more than a kilobyte, past glibc's per-thread cache: about 700 of
// the 10,000 instructions a resolved id cost in bench/rdmacm/cm_steps.c.
// Here a source that has once held n events holds the next n without
// allocating. The operations are the ones the engine uses: push at the back,
// take from the front, look at every event in order, and take out (in order)
// the events a predicate picks.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace ov::usercm {

// T: default-constructible and movable. A slot not holding an event holds a
// default-constructed or moved-from T, never anything an event owned.
template <class T> class EventQueue {
public:
	bool empty() const noexcept { return n_ == 0; }
	size_t size() const noexcept { return n_; }
	// Appends e (throws std::bad_alloc when it must grow and cannot; the
	// queue is unchanged then).
	void push_back(T &&e)
	{
		if (n_ == buf_.size())
			grow();
		buf_[index(n_)] = std::move(e);
		n_++;
	}
	// Room for n events in all (throws std::bad_alloc): pushes up to that
	// many cannot fail.
	void reserve(size_t n)
	{
		while (buf_.size() < n)
			grow();
	}
	// Moves the oldest event out (the queue must not be empty). Its slot
	// keeps the moved-from T, which must own nothing (a moved-from
	// std::unique_ptr is null).
	T take_front() noexcept
	{
		T e = std::move(buf_[head_]);
		head_ = (head_ + 1) & (buf_.size() - 1);
		if (--n_ == 0)
			head_ = 0;
		return e;
	}
	void clear() noexcept
	{
		for (size_t i = 0; i < n_; i++)
			buf_[index(i)] = T{};
		head_ = n_ = 0;
	}
	// Calls f(e) for every event, oldest first.
	template <class F> void for_each(F &&f)
	{
		for (size_t i = 0; i < n_; i++)
			f(buf_[index(i)]);
	}
	// Takes out every event `pick(e)` is true for, oldest first, handing
	// each to take(std::move(e)); the others keep their order.
	template <class P, class F> void extract_if(P &&pick, F &&take)
	{
		size_t kept = 0;
		for (size_t i = 0; i < n_; i++) {
			T &e = buf_[index(i)];
			if (pick(e)) {
				take(std::move(e));
				e = T{};
			} else {
				if (kept != i)
					buf_[index(kept)] = std::move(e);
				kept++;
			}
		}
		for (size_t i = kept; i < n_; i++)
			buf_[index(i)] = T{};
		n_ = kept;
		if (n_ == 0)
			head_ = 0;
	}

private:
	size_t index(size_t i) const noexcept { return (head_ + i) & (buf_.size() - 1); }
	void grow()
	{
		std::vector<T> bigger(buf_.empty() ? 4 : buf_.size() * 2);
		for (size_t i = 0; i < n_; i++)
			bigger[i] = std::move(buf_[index(i)]);
		buf_.swap(bigger);
		head_ = 0;
	}

	std::vector<T> buf_; // size: 0 or a power of two
	size_t head_ = 0;
	size_t n_ = 0;
};

} // namespace ov::usercm
