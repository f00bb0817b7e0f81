// The errno contract of the facade functions owned by the core.
#include "fixtures.h"

#include <gmock/gmock.h>

#include <endian.h>

using namespace ovtest;


TEST(Facade, NullArguments)
{
	errno = 0;
	EXPECT_EQ(ibv_get_device_name(nullptr), nullptr);
	EXPECT_EQ(errno, EINVAL);
	errno = 0;
	EXPECT_EQ(ibv_get_device_index(nullptr), -1);
	EXPECT_EQ(errno, EINVAL);
	errno = 0;
	EXPECT_EQ(ibv_get_device_guid(nullptr), 0u);
	EXPECT_EQ(errno, EINVAL);
	errno = 0;
	EXPECT_EQ(ibv_open_device(nullptr), nullptr);
	EXPECT_EQ(errno, EINVAL);
	errno = 0;
	EXPECT_EQ(ibv_close_device(nullptr), -1);
	EXPECT_EQ(errno, EINVAL);
	errno = 0;
	EXPECT_EQ(ibv_get_async_event(nullptr, nullptr), -1);
	EXPECT_EQ(errno, EINVAL);
	ibv_ack_async_event(nullptr);
	ibv_free_device_list(nullptr);
	verbs_uninit_context(nullptr);
	verbs_set_ops(nullptr, nullptr);
	errno = 0;
	EXPECT_EQ(ibv_read_sysfs_file(nullptr, "x", nullptr, 0), -1);
	EXPECT_EQ(errno, EINVAL);
	char buf[8];
	errno = 0;
	EXPECT_EQ(ibv_read_ibdev_sysfs_file(buf, sizeof(buf), nullptr, "x"), -1);
	EXPECT_EQ(errno, EINVAL);
}

TEST(Facade, SysfsPathHonoursTheEnvironment)
{
	{
		ScopedEnv e("SYSFS_PATH", "/some/where///");
		ov::core::reload_settings_for_tests();
		EXPECT_STREQ(ibv_get_sysfs_path(), "/some/where");
	}
	ov::core::reload_settings_for_tests();
	EXPECT_STREQ(ibv_get_sysfs_path(), "/sys");
}

TEST(Facade, ReadSysfsFile)
{
	TempDir t;
	t.write("a", "hello\n");
	t.write("exact", "12345678");
	t.write("short", "1234");
	char buf[8];
	EXPECT_EQ(ibv_read_sysfs_file(t.str().c_str(), "a", buf, sizeof(buf)), 5);
	EXPECT_STREQ(buf, "hello");
	errno = 0;
	EXPECT_EQ(ibv_read_sysfs_file(t.str().c_str(), "exact", buf, sizeof(buf)), -1);
	EXPECT_EQ(errno, EOVERFLOW);
	EXPECT_EQ(ibv_read_sysfs_file(t.str().c_str(), "short", buf, sizeof(buf)), 4);
	EXPECT_STREQ(buf, "1234");
	errno = 0;
	EXPECT_EQ(ibv_read_sysfs_file(t.str().c_str(), "missing", buf, sizeof(buf)), -1);
	EXPECT_EQ(errno, ENOENT);
}

TEST(Facade, GuidIndexAndIbdevFiles)
{
	CoreEnv env;
	env.sysfs.add_device("uverbs0", "rxe0").node_guid("0002:c903:0001:0a0b\n");
	env.sysfs.add_device("uverbs1", "rxe1").node_guid("nonsense\n");
	env.add_provider(FakeProvider("rxe").name_match("rxe"));
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	ASSERT_EQ(n, 2);
	EXPECT_EQ(ibv_get_device_guid(list[0]), htobe64(0x0002c90300010a0bULL));
	EXPECT_EQ(ibv_get_device_guid(list[0]), htobe64(0x0002c90300010a0bULL)); // cached
	EXPECT_EQ(ibv_get_device_guid(list[1]), 0u);
	EXPECT_EQ(ibv_get_device_index(list[0]), -1); // sysfs discovery has no index
	EXPECT_STREQ(ibv_get_device_name(list[1]), "rxe1");
	char buf[32];
	verbs_sysfs_dev *s = verbs_get_device(list[0])->sysfs;
	EXPECT_EQ(ibv_read_ibdev_sysfs_file(buf, sizeof(buf), s, "%s", "node_type"), 5);
	EXPECT_STREQ(buf, "1: CA");
	ibv_free_device_list(list);
}
