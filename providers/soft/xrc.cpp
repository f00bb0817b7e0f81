// openverbs software RDMA device: XRC domains.
#include "objects.h"

namespace ovsoft {

// ------------------------------------------------------------------ XRC domains

struct ibv_xrcd *soft_open_xrcd(struct ibv_context *context,
				struct ibv_xrcd_init_attr *attr)
{
	if (!attr) {
		errno = EINVAL;
		return nullptr;
	}
	if (attr->comp_mask & ~uint32_t(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if ((attr->comp_mask & (IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS)) !=
	    (IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS)) {
		errno = EINVAL;
		return nullptr;
	}
	uint64_t dev = 0, ino = 0;
	bool anon = attr->fd == -1;
	if (!anon) {
		struct stat st;
		if (fstat(attr->fd, &st) != 0) {
			errno = EBADF;
			return nullptr;
		}
		dev = st.st_dev;
		ino = st.st_ino;
	} else if (attr->oflags & ~O_CREAT) {
		errno = EINVAL;
		return nullptr;
	}
	// ibv_open_xrcd(3): only O_CREAT and O_EXCL have a meaning.
	if (attr->oflags & ~(O_CREAT | O_EXCL)) {
		errno = EINVAL;
		return nullptr;
	}
	auto *x = static_cast<SoftXrcd *>(calloc(1, sizeof(SoftXrcd)));
	if (!x) {
		errno = ENOMEM;
		return nullptr;
	}
	Segment *seg = to_sctx(context)->seg;
	SegmentHeader *h = seg->hdr;
	shm_lock(&h->lock);
	int slot = -1;
	int err = 0;
	if (!anon)
		for (uint32_t i = 0; i < kMaxXrcds; i++)
			if (h->xrcds[i].in_use && !h->xrcds[i].anonymous && h->xrcds[i].dev == dev &&
			    h->xrcds[i].ino == ino)
				slot = int(i);
	if (slot >= 0 && (attr->oflags & O_EXCL) && (attr->oflags & O_CREAT))
		err = EINVAL;
	else if (slot < 0 && !(attr->oflags & O_CREAT) && !anon)
		err = EAGAIN;
	if (!err && slot < 0) {
		for (uint32_t i = 0; i < kMaxXrcds; i++)
			if (!h->xrcds[i].in_use) {
				slot = int(i);
				XrcdEntry &e = h->xrcds[i];
				e.in_use = 1;
				e.refs = 0;
				e.dev = dev;
				e.ino = ino;
				e.anonymous = anon;
				e.id = h->next_xrcd_id.fetch_add(1);
				break;
			}
		if (slot < 0)
			err = ENOMEM;
	}
	if (!err) {
		int r = -1;
		for (uint32_t i = 0, n = extent_end(h->extents.xrcd_refs, kMaxXrcdRefs); i < n; i++)
			if (h->xrcd_refs[i].in_use && h->xrcd_refs[i].xrcd == uint32_t(slot) &&
			    h->xrcd_refs[i].proc == seg->my_proc)
				r = int(i);
		if (r < 0) {
			r = extent_take(h->extents.xrcd_refs, kMaxXrcdRefs,
					[&](uint32_t i) { return !h->xrcd_refs[i].in_use; });
			if (r >= 0)
				h->xrcd_refs[r] = XrcdRef{1, uint32_t(slot), seg->my_proc, 0};
		}
		if (r < 0) {
			err = ENOMEM;
			if (!h->xrcds[slot].refs)
				h->xrcds[slot].in_use = 0;
		} else {
			h->xrcd_refs[r].count++;
			h->xrcds[slot].refs++;
		}
	}
	shm_unlock(&h->lock);
	if (err) {
		free(x);
		errno = err;
		return nullptr;
	}
	x->slot = slot;
	x->vxrcd.xrcd.context = context;
	x->vxrcd.comp_mask = VERBS_XRCD_HANDLE;
	x->vxrcd.handle = slot;
	return &x->vxrcd.xrcd;
}

int soft_close_xrcd(struct ibv_xrcd *ibx)
{
	auto *x = reinterpret_cast<SoftXrcd *>(ibx);
	if (x->users.load())
		return EBUSY; // XRC SRQs or XRC_RECV QPs of this handle are alive
	Segment *seg = to_sctx(ibx->context)->seg;
	SegmentHeader *h = seg->hdr;
	shm_lock(&h->lock);
	for (auto &r : in_extent(h->xrcd_refs, h->extents.xrcd_refs))
		if (r.in_use && r.xrcd == x->slot && r.proc == seg->my_proc) {
			if (!--r.count) {
				r.in_use = 0;
				extent_release(h->extents.xrcd_refs, uint32_t(&r - h->xrcd_refs));
			}
			break;
		}
	XrcdEntry &e = h->xrcds[x->slot];
	if (e.refs && !--e.refs)
		e.in_use = 0;
	shm_unlock(&h->lock);
	free(x);
	return 0;
}

} // namespace ovsoft
