#include "core/context.h"

#include "common/log.h"
#include "core/context_private.h"
#include "core/device_list.h"
#include "core/ops.h"
#include "core/settings.h"
#include "core/domains/domains.h"
#include "core/verbs/lib_ops.h"
#include "core/verbs/verbs.h"
#include "kernel/transport.h"

#include <infiniband/openverbs.h>
#include <rdma/ib_user_verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

// The exported ibv_query_port@@IBVERBS_1.1 (verbs.h hides it behind a macro):
// what old binaries found in ibv_context_ops._compat_query_port.
#undef ibv_query_port
extern "C" int ibv_query_port(struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *);

namespace ov::core {
namespace {

bool is_soft(const verbs_device *vdev)
{
	return vdev->sysfs && (vdev->sysfs->flags & VSYSFS_SOFT);
}

int open_checked(const char *path, dev_t cdev)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) || !S_ISCHR(st.st_mode) || (cdev && st.st_rdev != cdev)) {
		close(fd);
		errno = ENODEV;
		return -1;
	}
	return fd;
}

} // namespace

int open_cdev(const char *name, dev_t cdev) noexcept
{
	// "<cdev_dir>/<name>", assembled by hand: this runs in every
	// ibv_open_device and a formatted print costs more than the rest of it.
	char path[256];
	const std::string &dir = settings().cdev_dir;
	size_t dlen = dir.size(), nlen = strlen(name);
	if (dlen + 1 + nlen >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(path, dir.data(), dlen);
	path[dlen] = '/';
	memcpy(path + dlen + 1, name, nlen + 1);
	int fd = open_checked(path, cdev);
	if (fd >= 0 || !cdev)
		return fd;
	int saved = errno;
	snprintf(path, sizeof(path), "/dev/char/%u:%u", major(cdev), minor(cdev));
	fd = open_checked(path, cdev);
	if (fd < 0)
		errno = saved;
	return fd;
}

int init_context(verbs_context *vctx, ibv_device *dev, int cmd_fd, uint32_t driver_id,
		 verbs_ex_private *embedded) noexcept
{
	auto *priv = embedded ? embedded : static_cast<verbs_ex_private *>(calloc(1, sizeof(verbs_ex_private)));
	if (!priv) {
		if (cmd_fd >= 0)
			close(cmd_fd);
		errno = ENOMEM;
		return ENOMEM;
	}
	device_hold(dev);
	ibv_context *ctx = &vctx->context;
	ctx->device = dev;
	ctx->cmd_fd = cmd_fd;
	ctx->async_fd = -1;
	init_object_sync(&ctx->mutex, nullptr);
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	vctx->sz = sizeof(*vctx);
	vctx->priv = priv;
	priv->embedded = embedded != nullptr;
	priv->driver_id = driver_id;
	set_dummy_ops(vctx);
	// Whether write() commands can take the INVOKE_WRITE tunnel is probed
	// by the transport when it first needs to know (rarely: see send_write).
	priv->ioctl_write = kIoctlWriteUnknown;
	return 0;
}

void *init_and_alloc_context(ibv_device *dev, int cmd_fd, size_t alloc_size, size_t offset,
			     uint32_t driver_id) noexcept
{
	if (!dev || alloc_size < sizeof(verbs_context) || offset > alloc_size - sizeof(verbs_context)) {
		if (cmd_fd >= 0)
			close(cmd_fd);
		errno = EINVAL;
		return nullptr;
	}
	// The private state rides in the same allocation, after the provider's
	// bytes: one calloc and one free per context instead of two each.
	constexpr size_t kAlign = alignof(verbs_ex_private);
	size_t priv_at = (alloc_size + kAlign - 1) & ~(kAlign - 1);
	void *drv = priv_at < alloc_size || priv_at > SIZE_MAX - sizeof(verbs_ex_private)
			    ? nullptr
			    : calloc(1, priv_at + sizeof(verbs_ex_private));
	if (!drv) {
		if (cmd_fd >= 0)
			close(cmd_fd);
		errno = ENOMEM;
		return nullptr;
	}
	auto *vctx = reinterpret_cast<verbs_context *>(static_cast<char *>(drv) + offset);
	auto *priv = reinterpret_cast<verbs_ex_private *>(static_cast<char *>(drv) + priv_at);
	if (int rc = init_context(vctx, dev, cmd_fd, driver_id, priv)) {
		free(drv);
		errno = rc;
		return nullptr;
	}
	return drv;
}

void uninit_context(verbs_context *vctx) noexcept
{
	ibv_context *ctx = &vctx->context;
	if (vctx->priv && !vctx->priv->embedded)
		free(vctx->priv);
	vctx->priv = nullptr;
	if (ctx->cmd_fd >= 0)
		close(ctx->cmd_fd);
	if (ctx->async_fd >= 0)
		close(ctx->async_fd);
	ctx->cmd_fd = -1;
	ctx->async_fd = -1;
	pthread_mutex_destroy(&ctx->mutex);
	if (ctx->device)
		device_put(ctx->device);
}

void set_lib_ops(verbs_context *vctx) noexcept
{
	vctx->create_cq_ex = ov::lib_create_cq_ex;
	vctx->query_port = ov::lib_query_port;
	// Parent and thread domains: the same checks for every provider.
	ov::domains::install_domain_ops(vctx, ov::core::dummy_ops);
	vctx->context.ops._compat_query_port = ibv_query_port;
	vctx->context.ops._compat_query_device = ibv_query_device;
	// Applications built against libibverbs 1.1.8 find the flow verbs in
	// the two placeholders.
	vctx->ABI_placeholder1 = reinterpret_cast<void (*)(void)>(vctx->ibv_create_flow);
	vctx->ABI_placeholder2 = reinterpret_cast<void (*)(void)>(vctx->ibv_destroy_flow);
}

ibv_context *open_device(ibv_device *dev, void *private_data) noexcept
{
	verbs_device *vdev = verbs_get_device(dev);
	if (!vdev->ops || !vdev->ops->alloc_context) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	bool kernel_dev = vdev->sysfs && !is_soft(vdev);
	int cmd_fd = -1;
	if (kernel_dev) {
		cmd_fd = open_cdev(vdev->sysfs->sysfs_name, vdev->sysfs->sysfs_cdev);
		if (cmd_fd < 0)
			return nullptr;
	}
	verbs_context *vctx = vdev->ops->alloc_context(dev, cmd_fd, private_data);
	if (!vctx) {
		if (!errno)
			errno = ENOMEM;
		return nullptr;
	}
	set_lib_ops(vctx);
	if (kernel_dev && vctx->context.async_fd == -1) {
		if (int rc = ov::kernel::alloc_async_fd(&vctx->context)) {
			close_device(&vctx->context);
			errno = rc;
			return nullptr;
		}
	}
	return &vctx->context;
}

// A software device's context for cmd_fd, a software device's command fd
// (the soft provider's import_context recognises its own and answers
// ENODEV for any other file). NULL with errno: EINVAL when no software
// device claims the file.
static ibv_context *import_soft(int cmd_fd, const std::vector<ibv_device *> &devs) noexcept
{
	int err = EINVAL;
	for (ibv_device *d : devs) {
		verbs_device *vdev = verbs_get_device(d);
		if (!is_soft(vdev) || !vdev->ops || !vdev->ops->import_context)
			continue;
		errno = 0;
		verbs_context *vctx = vdev->ops->import_context(d, cmd_fd);
		if (vctx) {
			set_lib_ops(vctx);
			vctx->priv->imported = true;
			return &vctx->context;
		}
		if (errno != ENODEV) {
			err = errno ? errno : ENOMEM;
			break;
		}
	}
	errno = err;
	return nullptr;
}

// A kernel device's context for cmd_fd, the character device st_rdev.
// NULL with errno: ENODEV no listed device has that number, EOPNOTSUPP its
// provider cannot import, else the provider's or the async fd's errno.
static ibv_context *import_kernel(int cmd_fd, dev_t rdev, const std::vector<ibv_device *> &devs) noexcept
{
	for (ibv_device *d : devs) {
		verbs_device *vdev = verbs_get_device(d);
		if (!vdev->sysfs || is_soft(vdev) || vdev->sysfs->sysfs_cdev != rdev)
			continue;
		if (!vdev->ops->import_context) {
			errno = EOPNOTSUPP;
			return nullptr;
		}
		verbs_context *vctx = vdev->ops->import_context(d, cmd_fd);
		if (!vctx) {
			errno = errno ? errno : ENOMEM;
			return nullptr;
		}
		set_lib_ops(vctx);
		vctx->priv->imported = true;
		ibv_context *ctx = &vctx->context;
		if (ctx->async_fd == -1) {
			if (int rc = ov::kernel::alloc_async_fd(ctx)) {
				close_device(ctx);
				errno = rc;
				return nullptr;
			}
		}
		return ctx;
	}
	errno = ENODEV;
	return nullptr;
}

ibv_context *import_device(int cmd_fd) noexcept
{
	struct stat st;
	if (cmd_fd < 0 || fstat(cmd_fd, &st)) {
		errno = EINVAL;
		return nullptr;
	}
	std::vector<ibv_device *> devs;
	try {
		if (int rc = get_device_list(devs)) {
			errno = rc;
			return nullptr;
		}
	} catch (...) {
		errno = ENOMEM;
		return nullptr;
	}
	// Not a character device: perhaps a software device's command fd.
	ibv_context *ctx = S_ISCHR(st.st_mode) ? import_kernel(cmd_fd, st.st_rdev, devs)
					       : import_soft(cmd_fd, devs);
	int saved = errno;
	for (ibv_device *d : devs)
		device_put(d);
	errno = saved;
	return ctx;
}

int close_device(ibv_context *ctx) noexcept
{
	get_ops(ctx)->free_context(ctx);
	return 0;
}

int get_async_event(ibv_context *ctx, ibv_async_event *event) noexcept
{
	ib_uverbs_async_event_desc desc;
	ssize_t n;
	do {
		n = read(ctx->async_fd, &desc, sizeof(desc));
	} while (n < 0 && errno == EINTR);
	if (n != static_cast<ssize_t>(sizeof(desc))) {
		if (n >= 0)
			errno = EIO;
		return -1;
	}
	event->event_type = static_cast<ibv_event_type>(desc.event_type);
	// The kernel echoes the user_handle given at creation, which the
	// library and providers set to the object's address.
	void *obj = reinterpret_cast<void *>(static_cast<uintptr_t>(desc.element));
	switch (ov::verbs::event_element(event->event_type)) {
	case ov::verbs::EventElement::Cq:
		event->element.cq = static_cast<ibv_cq *>(obj);
		break;
	case ov::verbs::EventElement::Qp:
		event->element.qp = static_cast<ibv_qp *>(obj);
		break;
	case ov::verbs::EventElement::Srq:
		event->element.srq = static_cast<ibv_srq *>(obj);
		break;
	case ov::verbs::EventElement::Wq:
		event->element.wq = static_cast<ibv_wq *>(obj);
		break;
	case ov::verbs::EventElement::Port:
		event->element.port_num = static_cast<int>(desc.element);
		break;
	}
	get_ops(ctx)->async_event(ctx, event);
	return 0;
}

void ack_async_event(ibv_async_event *event) noexcept
{
	// Destroy verbs wait until every affiliated event was acknowledged.
	auto bump = [](pthread_mutex_t *m, pthread_cond_t *c, uint32_t *counter) {
		pthread_mutex_lock(m);
		++*counter;
		pthread_cond_signal(c);
		pthread_mutex_unlock(m);
	};
	switch (ov::verbs::event_element(event->event_type)) {
	case ov::verbs::EventElement::Cq:
		if (ibv_cq *cq = event->element.cq)
			bump(&cq->mutex, &cq->cond, &cq->async_events_completed);
		break;
	case ov::verbs::EventElement::Qp:
		if (ibv_qp *qp = event->element.qp)
			bump(&qp->mutex, &qp->cond, &qp->events_completed);
		break;
	case ov::verbs::EventElement::Srq:
		if (ibv_srq *srq = event->element.srq)
			bump(&srq->mutex, &srq->cond, &srq->events_completed);
		break;
	case ov::verbs::EventElement::Wq:
		if (ibv_wq *wq = event->element.wq)
			bump(&wq->mutex, &wq->cond, &wq->events_completed);
		break;
	case ov::verbs::EventElement::Port:
		break;
	}
}

} // namespace ov::core

extern "C" bool verbs_allow_disassociate_destroy;

namespace ov::core {

void library_init() noexcept
{
	static std::once_flag once;
	std::call_once(once, [] {
		const Settings &s = settings();
		if (s.fork_safe && ov::verbs::fork_init() != 0)
			warn_stderr("Warning: fork()-safety requested but init failed\n");
		verbs_allow_disassociate_destroy = s.allow_disassoc_destroy;
		if (geteuid() == 0)
			return;
		struct rlimit rl;
		if (getrlimit(RLIMIT_MEMLOCK, &rl)) {
			warn_stderr("Warning: getrlimit(RLIMIT_MEMLOCK) failed.");
			return;
		}
		if (rl.rlim_cur <= 32768)
			warn_stderr("Warning: RLIMIT_MEMLOCK is %llu bytes.\n"
				    "    This will severely limit memory registrations.\n",
				    static_cast<unsigned long long>(rl.rlim_cur));
	});
}

} // namespace ov::core
