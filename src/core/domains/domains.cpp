#include "core/domains/domains.h"

#include "core/context_private.h"

#include <cerrno>
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace ov::domains {
namespace {

struct PdRecord {
	ibv_context *context = nullptr;
	unsigned refs = 0;          // live parent domains built on this PD
	bool is_parent = false;
	ibv_pd *parent_of = nullptr; // for a parent domain: its PD
	ibv_td *td = nullptr;        // for a parent domain: its TD (or NULL)
};

struct TdRecord {
	ibv_context *context = nullptr;
	unsigned refs = 0; // live parent domains using this TD
};

struct Registry {
	std::mutex mu;
	std::unordered_map<ibv_pd *, PdRecord> pds;
	std::unordered_map<ibv_td *, TdRecord> tds;
	// PDs freed through the library and not handed out again: a second
	// ibv_dealloc_pd of one of them is EINVAL, not a use after free.
	// Bounded: the oldest knowledge is dropped past kMaxFreed entries.
	std::unordered_set<ibv_pd *> freed;
	static constexpr size_t kMaxFreed = 1 << 16;

	static Registry &get()
	{
		static Registry *r = new Registry; // used until process exit
		return *r;
	}
};

// Set once the process created its first parent or thread domain. Until
// then no PD can be referenced, so the PD bookkeeping is skipped entirely
// and ibv_alloc_pd/ibv_dealloc_pd cost nothing extra.
std::atomic<bool> g_active{false};

const uint32_t kParentDomainMask =
	IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT
#if _OPENVERBS_ABI >= 64
	// rdma-core 64: a permission (buffers may be unprotected on a
	// confidential-computing guest); the provider decides what it means.
	| IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC
#endif
	;

} // namespace

void install_domain_ops(verbs_context *vctx, const verbs_context_ops &dummy) noexcept
{
	const verbs_context_ops &ops = vctx->priv->ops;
	if (ops.alloc_parent_domain && ops.alloc_parent_domain != dummy.alloc_parent_domain)
		vctx->alloc_parent_domain = lib_alloc_parent_domain;
	if (ops.alloc_td && ops.alloc_td != dummy.alloc_td)
		vctx->alloc_td = lib_alloc_td;
	if (ops.dealloc_td && ops.dealloc_td != dummy.dealloc_td)
		vctx->dealloc_td = lib_dealloc_td;
}

ibv_pd *lib_alloc_parent_domain(ibv_context *ctx, ibv_parent_domain_init_attr *attr)
{
	if (!ctx || !attr || !attr->pd || attr->pd->context != ctx ||
	    (attr->comp_mask & ~kParentDomainMask) ||
	    ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
	     (!attr->alloc || !attr->free)) ||
	    (attr->td && attr->td->context != ctx)) {
		errno = EINVAL;
		return nullptr;
	}
	Registry &r = Registry::get();
	{
		std::lock_guard<std::mutex> lock(r.mu);
		auto pit = r.pds.find(attr->pd);
		// A parent domain refines a protection domain, not another
		// parent domain; and the PD must not be one already freed.
		if (pit != r.pds.end() && pit->second.is_parent) {
			errno = EINVAL;
			return nullptr;
		}
		if (attr->td && !r.tds.count(attr->td)) {
			errno = EINVAL;
			return nullptr;
		}
	}
	g_active.store(true, std::memory_order_release);
	ibv_pd *pd = get_ops(ctx)->alloc_parent_domain(ctx, attr);
	if (!pd)
		return nullptr;
	try {
		std::lock_guard<std::mutex> lock(r.mu);
		PdRecord rec;
		rec.context = ctx;
		rec.is_parent = true;
		rec.parent_of = attr->pd;
		rec.td = attr->td;
		r.freed.erase(pd);
		r.pds[pd] = rec;
		r.pds[attr->pd].context = ctx; // track the PD if it was not yet
		r.pds[attr->pd].refs++;
		if (attr->td)
			r.tds[attr->td].refs++;
	} catch (...) {
		// Without a record the references cannot be enforced: undo.
		get_ops(ctx)->dealloc_pd(pd);
		errno = ENOMEM;
		return nullptr;
	}
	return pd;
}

ibv_td *lib_alloc_td(ibv_context *ctx, ibv_td_init_attr *attr)
{
	if (!ctx || !attr || attr->comp_mask) {
		errno = EINVAL;
		return nullptr;
	}
	g_active.store(true, std::memory_order_release);
	ibv_td *td = get_ops(ctx)->alloc_td(ctx, attr);
	if (!td)
		return nullptr;
	try {
		Registry &r = Registry::get();
		std::lock_guard<std::mutex> lock(r.mu);
		r.tds[td] = TdRecord{ctx, 0};
	} catch (...) {
		get_ops(ctx)->dealloc_td(td);
		errno = ENOMEM;
		return nullptr;
	}
	return td;
}

int lib_dealloc_td(ibv_td *td)
{
	if (!td)
		return EINVAL;
	Registry &r = Registry::get();
	ibv_context *ctx;
	{
		std::lock_guard<std::mutex> lock(r.mu);
		auto it = r.tds.find(td);
		if (it == r.tds.end())
			return EINVAL; // never allocated here, or freed already
		if (it->second.refs)
			return EBUSY;
		ctx = it->second.context;
	}
	int ret = get_ops(ctx)->dealloc_td(td);
	if (!ret) {
		std::lock_guard<std::mutex> lock(r.mu);
		r.tds.erase(td);
	}
	return ret;
}

void note_pd_alloc(ibv_pd *pd) noexcept
{
	if (!pd || !g_active.load(std::memory_order_acquire))
		return;
	try {
		Registry &r = Registry::get();
		std::lock_guard<std::mutex> lock(r.mu);
		r.freed.erase(pd);
		r.pds[pd].context = pd->context;
	} catch (...) {
	}
}

int check_dealloc_pd(ibv_pd *pd) noexcept
{
	if (!pd)
		return EINVAL;
	if (!g_active.load(std::memory_order_acquire))
		return 0;
	Registry &r = Registry::get();
	std::lock_guard<std::mutex> lock(r.mu);
	if (r.freed.count(pd))
		return EINVAL;
	auto it = r.pds.find(pd);
	if (it == r.pds.end())
		return 0;
	return it->second.refs ? EBUSY : 0;
}

void note_pd_freed(ibv_pd *pd) noexcept
{
	if (!g_active.load(std::memory_order_acquire))
		return;
	Registry &r = Registry::get();
	std::lock_guard<std::mutex> lock(r.mu);
	auto it = r.pds.find(pd);
	if (it == r.pds.end())
		return;
	if (it->second.is_parent) {
		auto parent = r.pds.find(it->second.parent_of);
		if (parent != r.pds.end() && parent->second.refs)
			parent->second.refs--;
		if (it->second.td) {
			auto td = r.tds.find(it->second.td);
			if (td != r.tds.end() && td->second.refs)
				td->second.refs--;
		}
	}
	r.pds.erase(it);
	try {
		if (r.freed.size() >= Registry::kMaxFreed)
			r.freed.clear();
		r.freed.insert(pd);
	} catch (...) {
	}
}

bool is_parent_domain(ibv_pd *pd) noexcept
{
	if (!g_active.load(std::memory_order_acquire))
		return false;
	Registry &r = Registry::get();
	std::lock_guard<std::mutex> lock(r.mu);
	auto it = r.pds.find(pd);
	return it != r.pds.end() && it->second.is_parent;
}

void reset_for_testing() noexcept
{
	Registry &r = Registry::get();
	std::lock_guard<std::mutex> lock(r.mu);
	r.pds.clear();
	r.tds.clear();
	r.freed.clear();
	g_active.store(false);
}

} // namespace ov::domains
