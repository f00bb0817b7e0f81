#include "dl_env.h"

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace verbs_dl {

namespace {

Lib g_lib;
const struct verbs_context_ops *g_ops;

struct FakeCtx {
	long provider_private;
	struct verbs_context vctx;
};

void fake_free_context(struct ibv_context *ctx)
{
	auto *vctx = verbs_get_ctx(ctx);
	auto *fc = reinterpret_cast<FakeCtx *>(reinterpret_cast<char *>(vctx) - offsetof(FakeCtx, vctx));
	g_lib.uninit(vctx);
	free(fc);
}

struct verbs_context *fake_alloc_context(struct ibv_device *dev, int cmd_fd, void *)
{
	auto *fc = static_cast<FakeCtx *>(g_lib.init_and_alloc(
		dev, cmd_fd, sizeof(FakeCtx),
		reinterpret_cast<struct verbs_context *>(offsetof(FakeCtx, vctx)), 0));
	if (!fc)
		return nullptr;
	struct verbs_context_ops ops = {};
	if (g_ops)
		ops = *g_ops;
	ops.free_context = fake_free_context;
	g_lib.set_ops(&fc->vctx, &ops);
	return &fc->vctx;
}

struct verbs_device_ops g_dev_ops;

} // namespace

bool Lib::load(const char *path)
{
	handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!handle) {
		fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
		return false;
	}
	init_and_alloc = sym<decltype(init_and_alloc)>("_verbs_init_and_alloc_context");
	set_ops = sym<decltype(set_ops)>("verbs_set_ops");
	uninit = sym<decltype(uninit)>("verbs_uninit_context");
	open_device = sym<decltype(open_device)>("ibv_open_device");
	close_device = sym<decltype(close_device)>("ibv_close_device");
	g_lib = *this;
	return init_and_alloc && set_ops && uninit && open_device && close_device;
}

Lib &current_lib()
{
	return g_lib;
}

struct verbs_device *fake_device(const struct verbs_context_ops *ops)
{
	g_ops = ops;
	g_dev_ops.name = "fake";
	g_dev_ops.match_max_abi_version = 100;
	g_dev_ops.alloc_context = fake_alloc_context;
	auto *vdev = static_cast<struct verbs_device *>(calloc(1, sizeof(struct verbs_device)));
	vdev->ops = &g_dev_ops;
	vdev->refcount = 1;
	vdev->device.node_type = IBV_NODE_CA;
	vdev->device.transport_type = IBV_TRANSPORT_IB;
	snprintf(vdev->device.name, sizeof(vdev->device.name), "fake0");
	snprintf(vdev->device.ibdev_path, sizeof(vdev->device.ibdev_path), "/nonexistent/fake0");
	return vdev;
}

} // namespace verbs_dl
