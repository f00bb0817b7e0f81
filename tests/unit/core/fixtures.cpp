#include "fixtures.h"

#include "core/context.h"

#include <map>

namespace ovtest {
namespace {

std::map<const verbs_device_ops *, FakeProvider *> &owners()
{
	static std::map<const verbs_device_ops *, FakeProvider *> m;
	return m;
}

verbs_device *fake_alloc_device(verbs_sysfs_dev *)
{
	auto *d = static_cast<FakeDevice *>(calloc(1, sizeof(FakeDevice)));
	return d ? &d->vdev : nullptr;
}

void fake_uninit_device(verbs_device *vdev)
{
	if (FakeProvider *p = provider_of(vdev->ops))
		++p->uninit;
	free(vdev);
}

verbs_context *fake_alloc_context(ibv_device *dev, int cmd_fd, void *)
{
	auto *ctx = static_cast<FakeContext *>(_verbs_init_and_alloc_context(
		dev, cmd_fd, sizeof(FakeContext),
		reinterpret_cast<verbs_context *>(offsetof(FakeContext, vctx)), 0));
	if (!ctx)
		return nullptr;
	ctx->before[0] = 0x1111;
	ctx->after = 0x2222;
	return &ctx->vctx;
}

void fake_free_context(ibv_context *ibctx)
{
	verbs_context *vctx = verbs_get_ctx(ibctx);
	auto *ctx = reinterpret_cast<FakeContext *>(reinterpret_cast<char *>(vctx) -
						    offsetof(FakeContext, vctx));
	verbs_uninit_context(vctx);
	free(ctx);
}

} // namespace

FakeProvider *provider_of(const verbs_device_ops *ops)
{
	auto it = owners().find(ops);
	return it == owners().end() ? nullptr : it->second;
}

const verbs_device_ops *FakeProvider::finish()
{
	// Re-point the modalias entries at this object's strings (the builder
	// may have been copied).
	size_t k = 0;
	for (auto &e : table)
		if (e.kind == VERBS_MATCH_MODALIAS)
			e.u.modalias = patterns[k++].c_str();
	verbs_match_ent end{};
	end.kind = VERBS_MATCH_SENTINEL;
	table.push_back(end);
	ops.name = name.c_str();
	ops.match_min_abi_version = min_abi;
	ops.match_max_abi_version = max_abi;
	ops.match_table = table.data();
	ops.match_device = match_cb;
	ops.alloc_device = fake_alloc_device;
	ops.uninit_device = fake_uninit_device;
	ops.alloc_context = fake_alloc_context;
	owners()[&ops] = this;
	return &ops;
}

// The free_context op every fake context installs (tests call verbs_set_ops).
extern "C" void ovtest_fake_free_context(ibv_context *ctx) { fake_free_context(ctx); }

CoreEnv::CoreEnv()
{
	reload();
}

CoreEnv::~CoreEnv()
{
	ov::core::reset_device_list_for_tests();
	ov::core::clear_providers_for_tests();
	for (auto &p : providers)
		owners().erase(&p.ops);
	ov::core::reload_settings_for_tests();
}

void CoreEnv::reload()
{
	ov::core::reset_device_list_for_tests();
	ov::core::clear_providers_for_tests();
	setenv("SYSFS_PATH", sysfs.sysfs().c_str(), 1);
	static std::string cdev, etc, prov;
	cdev = sysfs.cdev_dir();
	etc = (tmp / "etc").string();
	prov = (tmp / "providers").string();
	ov::core::reload_settings_for_tests([](ov::core::Settings &s) {
		s.use_netlink = false;
		s.cdev_dir = cdev;
		s.config_dirs = {etc};
		s.own_config_dirs = {etc};
		s.provider_dirs = {prov};
		s.own_provider_dirs = {prov};
	});
	unsetenv("SYSFS_PATH");
	for (auto &p : providers)
		ov::core::register_provider(&p.ops);
}

FakeProvider &CoreEnv::add_provider(FakeProvider p)
{
	providers.push_back(std::move(p));
	FakeProvider &ref = providers.back();
	ov::core::register_provider(ref.finish());
	return ref;
}

std::vector<std::string> CoreEnv::device_names()
{
	std::vector<std::string> names;
	int n = -1;
	ibv_device **list = ibv_get_device_list(&n);
	if (!list)
		return {"<NULL>"};
	for (int i = 0; i < n; ++i)
		names.push_back(list[i]->name);
	EXPECT_EQ(list[n], nullptr);
	ibv_free_device_list(list);
	return names;
}

} // namespace ovtest
