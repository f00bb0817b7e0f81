// Contexts: init/uninit through a fake provider, library ops, close,
// import errors, the async event queue.
#include "core/context.h"
#include "core/context_private.h"
#include "core/ops.h"
#include "core/verbs/lib_ops.h"
#include "fixtures.h"

#include <gmock/gmock.h>
#include <rdma/ib_user_verbs.h>

#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

using namespace ovtest;

extern "C" void ovtest_fake_free_context(ibv_context *ctx);

namespace {

struct SoftContext : ::testing::Test {
	ScopedEnv soft{"RDMAV_SOFT_DEVICES", "1"};
	CoreEnv env;
	ibv_device **list = nullptr;
	ibv_device *dev = nullptr;

	void SetUp() override
	{
		env.add_provider(FakeProvider("soft").driver_id(OPENVERBS_DRIVER_SOFT));
		int n = 0;
		list = ibv_get_device_list(&n);
		ASSERT_EQ(n, 1);
		dev = list[0];
	}
	void TearDown() override { ibv_free_device_list(list); }

	ibv_context *open()
	{
		ibv_context *ctx = ibv_open_device(dev);
		if (ctx) {
			verbs_context_ops ops{};
			ops.free_context = ovtest_fake_free_context;
			verbs_set_ops(verbs_get_ctx(ctx), &ops);
		}
		return ctx;
	}
};

} // namespace

TEST_F(SoftContext, InitFillsTheLibraryFields)
{
	verbs_device *vdev = verbs_get_device(dev);
	int before = vdev->refcount.load();
	ibv_context *ctx = open();
	ASSERT_NE(ctx, nullptr);
	verbs_context *vctx = verbs_get_ctx(ctx);
	ASSERT_NE(vctx, nullptr);
	auto *fake = reinterpret_cast<FakeContext *>(reinterpret_cast<char *>(vctx) -
						     offsetof(FakeContext, vctx));
	EXPECT_EQ(fake->before[0], 0x1111u); // provider bytes around the context intact
	EXPECT_EQ(fake->after, 0x2222u);
	EXPECT_EQ(ctx->device, dev);
	EXPECT_EQ(ctx->cmd_fd, -1);          // soft device: no character device
	EXPECT_EQ(ctx->async_fd, -1);
	EXPECT_EQ(vctx->sz, sizeof(verbs_context));
	// rdma-core 64 put six pointers in front (alloc_dmah .. free_buf).
	EXPECT_EQ(vctx->sz, _OPENVERBS_ABI >= 64 ? 696u : 648u);
	EXPECT_EQ(ctx->abi_compat, __VERBS_ABI_IS_EXTENDED);
	EXPECT_EQ(vctx->priv->ioctl_write, kIoctlWriteUnknown); // probed on first need only
	EXPECT_EQ(vdev->refcount.load(), before + 1);
	// Library ops installed by set_lib_ops.
	EXPECT_EQ(vctx->create_cq_ex, ov::lib_create_cq_ex);
	EXPECT_EQ(vctx->query_port, ov::lib_query_port);
	EXPECT_NE(ctx->ops._compat_query_port, nullptr);
	EXPECT_NE(ctx->ops._compat_query_device, nullptr);
	EXPECT_EQ(reinterpret_cast<void *>(vctx->ABI_placeholder1),
		  reinterpret_cast<void *>(vctx->ibv_create_flow));
	EXPECT_EQ(reinterpret_cast<void *>(vctx->ABI_placeholder2),
		  reinterpret_cast<void *>(vctx->ibv_destroy_flow));
	// Dummies everywhere the provider set nothing.
	EXPECT_EQ(get_ops(ctx)->alloc_pd, ov::core::dummy_ops.alloc_pd);
	EXPECT_EQ(ibv_close_device(ctx), 0);
	EXPECT_EQ(vdev->refcount.load(), before);
}

TEST_F(SoftContext, OpenedDeviceOutlivesTheList)
{
	ibv_context *ctx = open();
	ASSERT_NE(ctx, nullptr);
	ibv_free_device_list(list);
	list = nullptr;
	EXPECT_STREQ(ctx->device->name, "soft0");
	EXPECT_EQ(ibv_close_device(ctx), 0);
}

TEST_F(SoftContext, AsyncEventsMapElementsBack)
{
	ibv_context *ctx = open();
	ASSERT_NE(ctx, nullptr);
	int p[2];
	ASSERT_EQ(pipe(p), 0);
	ctx->async_fd = p[0];

	ibv_qp qp{};
	pthread_mutex_init(&qp.mutex, nullptr);
	pthread_cond_init(&qp.cond, nullptr);
	ib_uverbs_async_event_desc d{};
	d.element = reinterpret_cast<uintptr_t>(&qp);
	d.event_type = IBV_EVENT_COMM_EST;
	ASSERT_EQ(write(p[1], &d, sizeof(d)), static_cast<ssize_t>(sizeof(d)));
	ibv_async_event ev{};
	ASSERT_EQ(ibv_get_async_event(ctx, &ev), 0);
	EXPECT_EQ(ev.event_type, IBV_EVENT_COMM_EST);
	EXPECT_EQ(ev.element.qp, &qp);
	ibv_ack_async_event(&ev);
	EXPECT_EQ(qp.events_completed, 1u);

	ibv_cq cq{};
	pthread_mutex_init(&cq.mutex, nullptr);
	pthread_cond_init(&cq.cond, nullptr);
	d.element = reinterpret_cast<uintptr_t>(&cq);
	d.event_type = IBV_EVENT_CQ_ERR;
	ASSERT_EQ(write(p[1], &d, sizeof(d)), static_cast<ssize_t>(sizeof(d)));
	ASSERT_EQ(ibv_get_async_event(ctx, &ev), 0);
	EXPECT_EQ(ev.element.cq, &cq);
	ibv_ack_async_event(&ev);
	EXPECT_EQ(cq.async_events_completed, 1u);

	d.element = 1;
	d.event_type = IBV_EVENT_PORT_ACTIVE;
	ASSERT_EQ(write(p[1], &d, sizeof(d)), static_cast<ssize_t>(sizeof(d)));
	ASSERT_EQ(ibv_get_async_event(ctx, &ev), 0);
	EXPECT_EQ(ev.element.port_num, 1);
	ibv_ack_async_event(&ev);

	// A short read is an error, not a half-filled event.
	ASSERT_EQ(write(p[1], &d, 4), 4);
	close(p[1]);
	errno = 0;
	EXPECT_EQ(ibv_get_async_event(ctx, &ev), -1);
	EXPECT_EQ(errno, EIO);
	EXPECT_EQ(ibv_close_device(ctx), 0); // closes async_fd (p[0])
	EXPECT_EQ(fcntl(p[0], F_GETFD), -1);
}

TEST(Context, InitAndAllocRejectsBadSizesAndClosesTheFd)
{
	CoreEnv env;
	int p[2];
	ASSERT_EQ(pipe(p), 0);
	close(p[1]);
	verbs_device vdev{};
	vdev.refcount = 1;
	errno = 0;
	EXPECT_EQ(_verbs_init_and_alloc_context(&vdev.device, p[0], 16, nullptr, 0), nullptr);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(fcntl(p[0], F_GETFD), -1); // consumed
	EXPECT_EQ(vdev.refcount.load(), 1);  // nothing held
}

TEST(Context, ImportDeviceErrors)
{
	CoreEnv env;
	errno = 0;
	EXPECT_EQ(ibv_import_device(-1), nullptr);
	EXPECT_EQ(errno, EINVAL);
	int fd = open("/dev/null", O_RDWR);
	ASSERT_GE(fd, 0);
	errno = 0;
	EXPECT_EQ(ibv_import_device(fd), nullptr); // char device, but not a uverbs one
	EXPECT_EQ(errno, ENODEV);
	close(fd);
	fd = open("/proc/self/exe", O_RDONLY);
	errno = 0;
	EXPECT_EQ(ibv_import_device(fd), nullptr);
	EXPECT_EQ(errno, EINVAL);
	close(fd);
}

TEST(Context, OpenCdevChecksTheDeviceNumber)
{
	CoreEnv env;
	// /dev/infiniband here is a temp folder; a regular file is refused.
	env.tmp.write("dev/infiniband/uverbs0", "");
	errno = 0;
	EXPECT_EQ(ov::core::open_cdev("uverbs0", 0), -1);
	EXPECT_EQ(errno, ENODEV);
	errno = 0;
	EXPECT_EQ(ov::core::open_cdev("uverbs9", makedev(231, 201)), -1);
	EXPECT_NE(errno, 0);
}

TEST(Context, OpenKernelDeviceWithoutCharDeviceFails)
{
	CoreEnv env;
	env.sysfs.add_device("uverbs0", "rxe0");
	env.add_provider(FakeProvider("rxe").name_match("rxe"));
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	ASSERT_EQ(n, 1);
	errno = 0;
	EXPECT_EQ(ibv_open_device(list[0]), nullptr); // fake cdev is a regular file
	EXPECT_EQ(errno, ENODEV);
	ibv_free_device_list(list);
}
