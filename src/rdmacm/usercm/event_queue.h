// The events an event source has made and not yet handed out: a FIFO kept in
// one circular buffer that grows by doubling.
//
// std::deque kept one event per node (an event, 616 bytes with its private
// data, is larger than the deque's 512-byte node), so every event cost a
// malloc and a free; with many events waiting (a burst of resolutions or
// connections) glibc's per-thread cache, seven chunks of a size, is soon
// empty and each took malloc's slow path: about 500 of the 10,200
// instructions a resolved id cost in bench/rdmacm/cm_steps.c. Here a source
// that has held n events holds the next n without allocating. When it
// empties after holding more than kKeepEvents, the buffer is given back, so
// a very large burst does not keep its memory for the channel's life. The operations
// are the ones the engine uses: push at the back, take from the front, look
// at every event in order, and take out (in order) the events a predicate
// picks.
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
			emptied();
		return e;
	}
	void clear() noexcept
	{
		for (size_t i = 0; i < n_; i++)
			buf_[index(i)] = T{};
		n_ = 0;
		emptied();
	}
	// Slots in the buffer (for tests).
	size_t capacity() const noexcept { return buf_.size(); }
	// A buffer larger than this (2.5 MB of RawEvents) is given back when
	// the queue empties; a smaller one is kept, so that a program that
	// resolves or connects in bursts (cm_steps, cmtime) does not make it
	// again for every burst: given back at 64, cm_steps' 2,000-id rounds
	// cost as many instructions as with the deque.
	static constexpr size_t kKeepEvents = 4096;
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
			emptied();
	}

private:
	void emptied() noexcept
	{
		head_ = 0;
		if (buf_.size() > kKeepEvents)
			std::vector<T>().swap(buf_);
	}
	size_t index(size_t i) const noexcept { return (head_ + i) & (buf_.size() - 1); }
	void grow()
	{
		std::vector<T> bigger(buf_.empty() ? 4 : buf_.size() * 2);
		for (size_t i = 0; i < n_; i++)
			bigger[i] = std::move(buf_[index(i)]);
		buf_.swap(bigger);
		head_ = 0;
	}

	std::vector<T> buf_; // size: 0 or a power of two (4 at least)
	size_t head_ = 0;
	size_t n_ = 0;
};

} // namespace ov::usercm
