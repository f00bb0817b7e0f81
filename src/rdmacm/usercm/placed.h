// Vectors of pointers whose elements record their own index: taking one
// out costs O(1) (the last element moves into its place), and room is made
// geometrically. The software CM keeps its ids per event source and its
// links this way (engine.cpp), and the time-out heap (due.h) its elements.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ov::usercm {

// The index of an element that is in no such vector.
inline constexpr size_t kNowhere = SIZE_MAX;

// Room for n elements, doubling the capacity when it grows (a reserve of
// exactly size() + 1 before every add would copy the vector every time).
// Throws std::bad_alloc.
template <class T> void make_room(std::vector<T> &v, size_t n)
{
	if (v.capacity() < n)
		v.reserve(std::max(n, 2 * v.capacity()));
}

// Appends t, room made, and records its index in t->*pos.
template <class T> void place_back(std::vector<T *> &v, T *t, size_t T::*pos) noexcept
{
	t->*pos = v.size();
	v.push_back(t); // within the room made: no allocation
}

// Takes t (at index t->*pos) out; the last element takes its place.
template <class T> void take_out(std::vector<T *> &v, T *t, size_t T::*pos) noexcept
{
	T *last = v.back();
	v[t->*pos] = last;
	last->*pos = t->*pos;
	v.pop_back();
	t->*pos = kNowhere;
}

} // namespace ov::usercm
