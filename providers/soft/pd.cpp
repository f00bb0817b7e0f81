// openverbs software RDMA device: protection domains, thread domains and
// parent domains.
#include "objects.h"

namespace ovsoft {

// ------------------------------------------------------------------ PD / TD / parent domain

struct ibv_pd *soft_alloc_pd(struct ibv_context *context)
{
	auto *pd = static_cast<SoftPd *>(calloc(1, sizeof(SoftPd)));
	if (!pd) {
		errno = ENOMEM;
		return nullptr;
	}
	SoftContext *ctx = to_sctx(context);
	pd->id = ctx->seg->hdr->next_pd_id.fetch_add(1);
	if (!pd->id)
		pd->id = ctx->seg->hdr->next_pd_id.fetch_add(1);
	pd->pd.context = context;
	pd->pd.handle = pd->id;
	return &pd->pd;
}

// ibv_import_pd(3): a PD of the device by handle (ibv_pd.handle, the
// device-wide PD number, in any context of the device, any process of the
// user). The new handle names the same PD: QPs, SRQs and MRs made on it
// meet those of the original (same number). EINVAL: 0 or a number the
// device never gave. ibv_unimport_pd frees the handle only;
// ibv_dealloc_pd of an imported PD does the same (a PD has no state of its
// own beyond its number).
struct ibv_pd *soft_import_pd(struct ibv_context *context, uint32_t handle)
{
	SoftContext *ctx = to_sctx(context);
	uint32_t next = ctx->seg->hdr->next_pd_id.load();
	if (!handle || handle >= next) {
		errno = EINVAL;
		return nullptr;
	}
	auto *pd = static_cast<SoftPd *>(calloc(1, sizeof(SoftPd)));
	if (!pd) {
		errno = ENOMEM;
		return nullptr;
	}
	pd->id = handle;
	pd->pd.context = context;
	pd->pd.handle = handle;
	return &pd->pd;
}

void soft_unimport_pd(struct ibv_pd *ibpd)
{
	free(to_spd(ibpd));
}

int soft_dealloc_pd(struct ibv_pd *ibpd)
{
	SoftPd *pd = to_spd(ibpd);
	if (pd->dead)
		return EINVAL;
	if (pd->users.load())
		return EBUSY; // QPs, SRQs, CQs or MRs still use it
	if (!pd->parent) {
		free(pd);
		return 0;
	}
	if (pd->td)
		reinterpret_cast<SoftTd *>(pd->td)->refs.fetch_sub(1);
	SoftContext *ctx = to_sctx(ibpd->context);
	pthread_mutex_lock(&ctx->lock);
	pd->dead = true;
	pd->next_dead = ctx->dead_pds;
	ctx->dead_pds = pd;
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

struct ibv_td *soft_alloc_td(struct ibv_context *context, struct ibv_td_init_attr *attr)
{
	if (!attr || attr->comp_mask) {
		errno = EINVAL;
		return nullptr;
	}
	auto *td = new (std::nothrow) SoftTd();
	if (!td) {
		errno = ENOMEM;
		return nullptr;
	}
	td->td.context = context;
	td->refs.store(0);
	return &td->td;
}

int soft_dealloc_td(struct ibv_td *ibtd)
{
	auto *td = reinterpret_cast<SoftTd *>(ibtd);
	if (td->dead)
		return EINVAL;
	if (td->refs.load())
		return EBUSY;
	SoftContext *ctx = to_sctx(ibtd->context);
	pthread_mutex_lock(&ctx->lock);
	td->dead = true;
	td->next_dead = ctx->dead_tds;
	ctx->dead_tds = td;
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

struct ibv_pd *soft_alloc_parent_domain(struct ibv_context *context,
					struct ibv_parent_domain_init_attr *attr)
{
	uint32_t known = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
#if _OPENVERBS_ABI >= 64
	// Host memory is never protected from the device here (no confidential
	// computing), so allowing unprotected buffers changes nothing.
	known |= IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC;
#endif
	if (!attr || !attr->pd || (attr->comp_mask & ~known)) {
		errno = EINVAL;
		return nullptr;
	}
	auto *pd = static_cast<SoftPd *>(calloc(1, sizeof(SoftPd)));
	if (!pd) {
		errno = ENOMEM;
		return nullptr;
	}
	SoftPd *real = to_spd(attr->pd);
	pd->id = real->id;
	pd->parent = true;
	pd->real = attr->pd;
	pd->td = attr->td;
	if (attr->td)
		reinterpret_cast<SoftTd *>(attr->td)->refs.fetch_add(1);
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = attr->pd_context;
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pd->alloc = attr->alloc;
		pd->free = attr->free;
	}
	pd->pd.context = context;
	pd->pd.handle = real->pd.handle;
	return &pd->pd;
}

} // namespace ovsoft
