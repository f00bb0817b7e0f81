// openverbs software RDMA device: on-demand paging (ODP).
//
// A region registered with IBV_ACCESS_ON_DEMAND (ibv_reg_mr(3)) is not
// pinned and not converted to a shareable backing (mr.cpp): it follows
// the process's address space, as an HCA's ODP region follows the process's
// page tables. Pages may be unmapped, mapped anew or never touched between
// registration and use; the device resolves them when an operation reaches
// them, as an HCA's page-fault handler does:
//  - in the registering process, odp_fault asks the kernel to fault the
//    pages in with the access the operation needs (madvise(2)
//    MADV_POPULATE_READ / MADV_POPULATE_WRITE, Linux 5.14). A range that is
//    not mapped, or lacks the permission, makes the operation fail with a
//    protection error (local: IBV_WC_LOC_PROT_ERR; remote: the requester's
//    IBV_WC_REM_ACCESS_ERR) instead of a crash;
//  - a peer process reaches the region with process_vm_readv/writev(2)
//    (the region has no memfd), which fail the same way.
// An implicit ODP region (address NULL, length SIZE_MAX: the whole address
// space; IBV_ODP_SUPPORT_IMPLICIT) is a region whose iova is the process's
// virtual address, from 0 to SIZE_MAX.
// ibv_advise_mr(3) prefetches: PREFETCH and PREFETCH_WRITE fault the pages
// in (read / write access), PREFETCH_NO_FAULT does nothing the device needs
// (it keeps no page table of its own). Documented in openverbs-soft(7).
#include "keys.h"
#include "soft.h"
#include "sysmm.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <sys/mman.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // <linux/mman.h>, Linux 5.14
#define MADV_POPULATE_WRITE 23
#endif

namespace ovsoft {

// -1 unknown, 0 the kernel lacks MADV_POPULATE_*, 1 it has them.
static std::atomic<int> g_populate{-1};

static bool populate_known()
{
	int k = g_populate.load(std::memory_order_relaxed);
	if (k < 0) {
		// A page of our own stack: mapped and writable, so only an
		// unknown advice fails (EINVAL).
		static thread_local uint64_t probe[1];
		uintptr_t page = uintptr_t(probe) & ~uintptr_t(4095);
		k = sys_madvise(reinterpret_cast<void *>(page), 4096, MADV_POPULATE_READ) == 0 ||
				    errno != EINVAL
			    ? 1
			    : 0;
		g_populate.store(k, std::memory_order_relaxed);
	}
	return k == 1;
}

bool odp_fault(uint64_t addr, uint64_t len, bool write)
{
	if (!len)
		return true;
	uint64_t end = addr + len;
	if (end < addr)
		return false;
	uint64_t lo = addr & ~uint64_t(4095);
	uint64_t hi = (end + 4095) & ~uint64_t(4095);
	if (hi < end) // the last page of the address space
		return false;
	auto *p = reinterpret_cast<void *>(uintptr_t(lo));
	if (populate_known())
		return sys_madvise(p, hi - lo, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0;
	// Older kernels: the range must at least be mapped (madvise fails with
	// ENOMEM on any unmapped page); its permissions are not checked.
	return sys_madvise(p, hi - lo, MADV_NORMAL) == 0;
}

void odp_caps(struct ibv_device_attr_ex &a)
{
	const uint32_t rc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
			    IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
	a.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	a.odp_caps.per_transport_caps.rc_odp_caps = rc;
	a.odp_caps.per_transport_caps.uc_odp_caps =
		IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
		IBV_ODP_SUPPORT_SRQ_RECV;
	a.odp_caps.per_transport_caps.ud_odp_caps =
		IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
	a.xrc_odp_caps = rc;
}

bool odp_implicit(const void *addr, size_t length, int access)
{
	return (access & IBV_ACCESS_ON_DEMAND) && !addr && length == SIZE_MAX;
}

// ibv_advise_mr(3) (rdma-core verbs.h; the kernel's ib_uverbs_advise_mr
// checks): advice one of PREFETCH, PREFETCH_WRITE, PREFETCH_NO_FAULT, flags
// a subset of IBV_ADVISE_MR_FLAG_FLUSH (else EOPNOTSUPP); at least one SGE
// (EINVAL), each naming an ODP region of this process in pd's protection
// domain with its range inside the region (EINVAL), PREFETCH_WRITE only on
// regions with IBV_ACCESS_LOCAL_WRITE (EINVAL). With IBV_ADVISE_MR_FLAG_FLUSH
// the pages are in when the call returns, and a range that cannot be faulted
// in (unmapped, no permission) fails it with EFAULT; without it the
// prefetch is a hint and such ranges are left for the operations to find.
int soft_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		   struct ibv_sge *sg_list, uint32_t num_sge)
{
	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return EOPNOTSUPP;
	if (flags & ~uint32_t(IBV_ADVISE_MR_FLAG_FLUSH))
		return EOPNOTSUPP;
	if (!num_sge || !sg_list)
		return EINVAL;
	SoftContext *ctx = to_sctx(pd->context);
	Segment *seg = ctx->seg;
	const uint32_t pd_id = to_spd(pd)->id; // a parent domain has its PD's
	const bool write = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
	for (uint32_t i = 0; i < num_sge; i++) {
		const struct ibv_sge &s = sg_list[i];
		KeySnap m;
		if (!key_read(seg, s.lkey, m) || m.kind != KEY_MR || m.owner != seg->my_proc ||
		    m.owner_pid != getpid() || m.pd_id != pd_id ||
		    !(m.access & IBV_ACCESS_ON_DEMAND) || !key_range_ok(m, s.addr, s.length))
			return EINVAL;
		if (write && !(m.access & IBV_ACCESS_LOCAL_WRITE))
			return EINVAL;
	}
	if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return 0;
	for (uint32_t i = 0; i < num_sge; i++) {
		const struct ibv_sge &s = sg_list[i];
		KeySnap m;
		if (!key_read(seg, s.lkey, m))
			return EINVAL; // deregistered meanwhile
		if (!odp_fault(m.addr + (s.addr - m.iova), s.length, write) &&
		    (flags & IBV_ADVISE_MR_FLAG_FLUSH))
			return EFAULT;
	}
	return 0;
}

} // namespace ovsoft
