// openverbs software RDMA device: memory of the queues.
//
// Every buffer the provider keeps for a CQ, QP or SRQ comes either from the
// provider itself (the shared arena for rings, calloc for process-local
// buffers) or, for objects created under a parent domain with
// IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS, from the application's `alloc`
// callback (ibv_alloc_parent_domain(3)). The resource codes passed to it are
// enum openverbs_soft_resource in <infiniband/openverbs.h>; openverbs-soft(7)
// describes what happens to the application's pages.
#pragma once

#include "shm.h"

#include <cstddef>
#include <cstdint>

namespace ovsoft {

struct SoftPd;

// One buffer handed out by a parent domain's allocator (or by calloc).
struct QueueBuf {
	void *ptr = nullptr;  // what the provider uses; nullptr: none
	size_t size = 0;      // bytes asked for
	uint64_t type = 0;    // resource type given to alloc; 0: the provider's own
	SoftPd *pd = nullptr; // the parent domain whose free gets it back
	int memfd = -1;       // rings: the memfd now backing [ptr, ptr+size)
	uint32_t memfd_ino = 0;
};

// The parent domain behind `pd` when it has allocators, else nullptr.
SoftPd *allocator_of(struct ibv_pd *pd);

// A process-local buffer of `size` bytes aligned to `align` (a power of two):
// from pd's alloc (zeroed, its whole pages marked MADV_DONTFORK) or, with no
// allocator or on IBV_ALLOCATOR_USE_DEFAULT, from calloc. 0 or ENOMEM (alloc
// returned NULL or calloc failed), EINVAL (alloc broke the alignment; the
// buffer was handed back to free).
int queue_buf_alloc(SoftPd *pd, uint32_t code, size_t size, size_t align, QueueBuf *out);

// A shared ring of `bytes` bytes from pd's alloc: whole pages (size rounded
// up, aligned to the page size) that are replaced in place by a shared
// mapping of a fresh (zeroed) memfd, so that peers can map them; the NUMA
// policy of the range is carried over and the pages are MADV_DONTFORK.
// Returns 0 with out->ptr == nullptr when the provider's arena must be used
// (pd is nullptr, or alloc answered IBV_ALLOCATOR_USE_DEFAULT); ENOMEM when
// alloc returned NULL; EINVAL / EMFILE / ... when the buffer could not be
// converted (then it has been handed back to free already).
int ring_buf_alloc(SoftPd *pd, uint32_t code, uint64_t bytes, QueueBuf *out);

// Where peers find a ring from ring_buf_alloc.
RingLoc ring_buf_loc(const QueueBuf &b);

// Gives a buffer back: free() for the provider's own, and for the
// allocator's ones (rings: after putting fresh private anonymous pages, with
// the same NUMA policy and MADV_DONTFORK, back in place of the memfd) the
// parent domain's free with the type it was allocated with. Idempotent:
// the buffer is emptied.
void queue_buf_free(QueueBuf *b);

} // namespace ovsoft
