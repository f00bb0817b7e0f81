/* A fake provider for the software devices, built in several variants to
 * exercise the loader of the real libibverbs.so.1:
 *   FAKE_VARIANT_GOOD         registers, matches "soft*", kernel ABI 1..1
 *   FAKE_VARIANT_ABI_RANGE    registers, but wants kernel ABI 5..6
 *   FAKE_VARIANT_NO_REGISTER  a valid .so that never registers
 *   FAKE_VARIANT_PABI33       built for private ABI 33 (must fail dlopen)
 */
#include <infiniband/driver.h>
#include <stdlib.h>

struct fake_context {
	int before;
	struct verbs_context ibv_ctx;
};

static struct verbs_device *fake_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	return calloc(1, sizeof(struct verbs_device));
}

static void fake_uninit_device(struct verbs_device *vdev)
{
	free(vdev);
}

static void fake_free_context(struct ibv_context *ibctx)
{
	struct verbs_context *vctx = verbs_get_ctx(ibctx);
	struct fake_context *ctx = (struct fake_context *)((char *)vctx - offsetof(struct fake_context, ibv_ctx));

	verbs_uninit_context(vctx);
	free(ctx);
}

static const struct verbs_context_ops fake_ops = {
	.free_context = fake_free_context,
};

static struct verbs_context *fake_alloc_context(struct ibv_device *dev, int cmd_fd, void *priv)
{
	struct fake_context *ctx =
		verbs_init_and_alloc_context(dev, cmd_fd, ctx, ibv_ctx, 0);

	if (!ctx)
		return NULL;
	verbs_set_ops(&ctx->ibv_ctx, &fake_ops);
	return &ctx->ibv_ctx;
}

static const struct verbs_match_ent fake_table[] = {
	VERBS_NAME_MATCH("soft", NULL),
	VERBS_MATCH_SENTINEL(),
};

static const struct verbs_device_ops fake_dev_ops = {
	.name = "fake_soft",
#ifdef FAKE_VARIANT_ABI_RANGE
	.match_min_abi_version = 5,
	.match_max_abi_version = 6,
#else
	.match_min_abi_version = 1,
	.match_max_abi_version = 1,
#endif
	.match_table = fake_table,
	.alloc_device = fake_alloc_device,
	.uninit_device = fake_uninit_device,
	.alloc_context = fake_alloc_context,
};

#if defined(FAKE_VARIANT_PABI33)
void verbs_register_driver_33(const struct verbs_device_ops *ops);
static __attribute__((constructor)) void fake_register(void)
{
	verbs_register_driver_33(&fake_dev_ops);
}
#elif !defined(FAKE_VARIANT_NO_REGISTER)
PROVIDER_DRIVER(fake_soft, fake_dev_ops);
#else
const struct verbs_device_ops *fake_unused(void) { return &fake_dev_ops; }
#endif
