// openverbs software RDMA device: device memory (ibv_alloc_dm(3),
// ibv_memcpy_to_dm(3), ibv_memcpy_from_dm(3), ibv_reg_dm_mr(3),
// ibv_import_dm(3)).
//
// An HCA's device memory is a window of on-chip memory the host reaches
// with programmed I/O and the HCA serves without crossing PCIe. Here it is
// a memfd of the allocation's size, mapped shared into the allocating
// process: the copy verbs are memcpy, and a region registered on it
// (always zero-based, as the kernel requires) is backed by that file, so
// peer processes reach it through a mapping of their own, like any
// converted region (mr.cpp). The copy verbs move 32-bit words, as
// device memory does: offset and length must be multiples of 4.
//
// Limits: at most kMaxDmSize bytes (ibv_query_device_ex's max_dm_size) of
// device memory per process at a time, 64 KiB alignment at most
// (log_align_req <= 16). A handle (ibv_dm.handle) names the allocation in
// the process that made it: ibv_import_dm(3) works for any context of that
// process (one opened by ibv_import_device(3) from a duplicated cmd_fd, as
// rdma-core's tests do); another process reaches the memory through the
// keys of regions registered on it. Documented in openverbs-soft(7).
#include "soft.h"
#include "sysmm.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ovsoft {

inline constexpr uint32_t kMaxDms = 256;
inline constexpr uint32_t kMaxDmLogAlign = 16;

struct SoftDm {
	struct verbs_dm vdm;
	int fd;            // the memfd (an import has its own duplicate)
	uint8_t *map;      // its shared mapping in this process
	uint64_t length;   // bytes asked for
	size_t map_len;    // mapped bytes (whole pages)
	uint32_t ino;
	uint32_t handle;   // index in g_dms (allocations), or the imported one
	bool imported;
	std::atomic<int> users; // regions registered on it
};

// This process's allocations by handle, and the bytes they hold.
static pthread_mutex_t g_dm_lock = PTHREAD_MUTEX_INITIALIZER;
static SoftDm *g_dms[kMaxDms];
static uint64_t g_dm_used;

static inline SoftDm *to_sdm(struct ibv_dm *dm) { return reinterpret_cast<SoftDm *>(dm); }

static bool dm_range_ok(const SoftDm *d, uint64_t off, size_t len)
{
	return !(off % 4) && !(len % 4) && off <= d->length && len <= d->length - off;
}

// ibv_memcpy_to_dm(3): 0, or EINVAL for an offset or length that is not a
// multiple of 4 or a range outside the allocation.
static int dm_copy_to(struct ibv_dm *dm, uint64_t off, const void *host, size_t len)
{
	SoftDm *d = to_sdm(dm);
	if (!dm_range_ok(d, off, len))
		return EINVAL;
	if (len)
		memcpy(d->map + off, host, len);
	return 0;
}

// ibv_memcpy_from_dm(3): as dm_copy_to.
static int dm_copy_from(void *host, struct ibv_dm *dm, uint64_t off, size_t len)
{
	SoftDm *d = to_sdm(dm);
	if (!dm_range_ok(d, off, len))
		return EINVAL;
	if (len)
		memcpy(host, d->map + off, len);
	return 0;
}

static size_t page_round(uint64_t n) { return size_t((n + 4095) & ~uint64_t(4095)); }

// A SoftDm over fd (taken over), mapped whole; nullptr with errno.
static SoftDm *dm_map(struct ibv_context *context, int fd, uint64_t length)
{
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return nullptr;
	}
	size_t len = page_round(length);
	void *m = sys_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	auto *d = m == MAP_FAILED ? nullptr : static_cast<SoftDm *>(calloc(1, sizeof(SoftDm)));
	if (!d) {
		if (m != MAP_FAILED)
			sys_munmap(m, len);
		close(fd);
		errno = ENOMEM;
		return nullptr;
	}
	d->fd = fd;
	d->map = static_cast<uint8_t *>(m);
	d->length = length;
	d->map_len = len;
	d->ino = uint32_t(st.st_ino);
	struct ibv_dm &p = d->vdm.dm;
	p.context = context;
	p.memcpy_to_dm = dm_copy_to;
	p.memcpy_from_dm = dm_copy_from;
	p.comp_mask = IBV_DM_MASK_HANDLE;
	return d;
}

static void dm_unmap(SoftDm *d)
{
	sys_munmap(d->map, d->map_len);
	close(d->fd);
	free(d);
}

// ibv_alloc_dm(3): length 1..max_dm_size, log_align_req <= 16, comp_mask
// 0 (else EINVAL); ENOMEM when this process's device memory would exceed
// max_dm_size, or without memory. The contents start zeroed.
struct ibv_dm *soft_alloc_dm(struct ibv_context *context, struct ibv_alloc_dm_attr *attr)
{
	if (!attr || attr->comp_mask || !attr->length || attr->length > kMaxDmSize ||
	    attr->log_align_req > kMaxDmLogAlign) {
		errno = EINVAL;
		return nullptr;
	}
	pthread_mutex_lock(&g_dm_lock);
	uint32_t slot = kMaxDms;
	for (uint32_t i = 0; i < kMaxDms && slot == kMaxDms; i++)
		if (!g_dms[i])
			slot = i;
	if (slot == kMaxDms || attr->length > kMaxDmSize - g_dm_used) {
		pthread_mutex_unlock(&g_dm_lock);
		errno = ENOMEM;
		return nullptr;
	}
	int fd = sys_memfd_create("openverbs-soft-dm", MFD_CLOEXEC);
	SoftDm *d = nullptr;
	if (fd >= 0 && ftruncate(fd, off_t(page_round(attr->length))) != 0) {
		close(fd);
		fd = -1;
	}
	if (fd >= 0)
		d = dm_map(context, fd, attr->length);
	if (!d) {
		pthread_mutex_unlock(&g_dm_lock);
		errno = ENOMEM;
		return nullptr;
	}
	d->handle = slot;
	d->vdm.dm.handle = slot;
	d->vdm.handle = slot;
	g_dms[slot] = d;
	g_dm_used += attr->length;
	pthread_mutex_unlock(&g_dm_lock);
	return &d->vdm.dm;
}

// ibv_free_dm(3): 0, or EBUSY while a region is registered on it (the
// kernel's use count). An imported handle is released with
// ibv_unimport_dm(3) instead (EINVAL here).
int soft_free_dm(struct ibv_dm *dm)
{
	SoftDm *d = to_sdm(dm);
	if (d->imported)
		return EINVAL;
	if (d->users.load())
		return EBUSY;
	pthread_mutex_lock(&g_dm_lock);
	if (d->handle < kMaxDms && g_dms[d->handle] == d) {
		g_dms[d->handle] = nullptr;
		g_dm_used -= d->length;
	}
	pthread_mutex_unlock(&g_dm_lock);
	dm_unmap(d);
	return 0;
}

// ibv_import_dm(3): the allocation `handle` of this process, for context
// (a context of the same device); NULL with EINVAL when there is none.
struct ibv_dm *soft_import_dm(struct ibv_context *context, uint32_t handle)
{
	pthread_mutex_lock(&g_dm_lock);
	SoftDm *src = handle < kMaxDms ? g_dms[handle] : nullptr;
	bool same = src && to_sctx(src->vdm.dm.context)->index == to_sctx(context)->index;
	int fd = same ? fcntl(src->fd, F_DUPFD_CLOEXEC, 0) : -1;
	uint64_t length = same ? src->length : 0;
	pthread_mutex_unlock(&g_dm_lock);
	if (!same) {
		errno = EINVAL;
		return nullptr;
	}
	if (fd < 0) {
		errno = EMFILE;
		return nullptr;
	}
	SoftDm *d = dm_map(context, fd, length);
	if (!d)
		return nullptr;
	d->imported = true;
	d->handle = handle;
	d->vdm.dm.handle = handle;
	d->vdm.handle = handle;
	return &d->vdm.dm;
}

void soft_unimport_dm(struct ibv_dm *dm)
{
	SoftDm *d = to_sdm(dm);
	if (d->imported)
		dm_unmap(d);
}

// ibv_reg_dm_mr(3): [offset, offset+length) of dm as a zero-based region
// of pd: access must have IBV_ACCESS_ZERO_BASED and otherwise only local
// write and remote read, write and atomic (remote write or atomic with
// local write); dm and pd of one context; the range inside the allocation
// (a length of 0 too, as the kernel allows). EINVAL otherwise, ENOMEM when
// the key table is full.
struct ibv_mr *soft_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t offset,
			      size_t length, unsigned int access)
{
	constexpr unsigned allowed = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE |
				     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				     IBV_ACCESS_REMOTE_ATOMIC;
	SoftDm *d = dm ? to_sdm(dm) : nullptr;
	if (!d || dm->context != pd->context || !(access & IBV_ACCESS_ZERO_BASED) ||
	    (access & ~allowed) ||
	    ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(access & IBV_ACCESS_LOCAL_WRITE)) ||
	    offset > d->length || length > d->length - offset) {
		errno = EINVAL;
		return nullptr;
	}
	auto *mr = static_cast<SoftMr *>(calloc(1, sizeof(SoftMr)));
	if (!mr) {
		errno = ENOMEM;
		return nullptr;
	}
	mr->share = -1;
	mr->dm = d;
	d->users.fetch_add(1);
	if (!mr_publish(pd, mr, d->map + offset, 0, length, int(access),
			MrBacking{d->fd, d->ino, offset})) {
		d->users.fetch_sub(1);
		free(mr);
		errno = ENOMEM;
		return nullptr;
	}
	// Zero-based: the region's addresses start at 0 (a kernel device's
	// ibv_reg_dm_mr leaves addr NULL).
	mr->vmr.ibv_mr.addr = nullptr;
	return &mr->vmr.ibv_mr;
}

void dm_mr_gone(SoftDm *dm) { dm->users.fetch_sub(1); }

} // namespace ovsoft
