// The device list: matching rules, lifetime across rescans, soft devices,
// lazy provider loading decisions.
#include "core/providers.h"
#include "fixtures.h"

#include <gmock/gmock.h>
#include <rdma/ib_user_ioctl_verbs.h>

using namespace ovtest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

namespace {

const verbs_device_ops *ops_of(ibv_device *d) { return verbs_get_device(d)->ops; }

} // namespace

TEST(DeviceList, EmptyWhenNoRdmaAtAll)
{
	CoreEnv env;
	std::filesystem::remove_all(env.tmp / "sys");
	env.reload();
	int n = -1;
	ibv_device **list = ibv_get_device_list(&n);
	ASSERT_NE(list, nullptr);
	EXPECT_EQ(n, 0);
	EXPECT_EQ(list[0], nullptr);
	ibv_free_device_list(list);
}

TEST(DeviceList, NumDevicesIsOptional)
{
	CoreEnv env;
	ibv_device **list = ibv_get_device_list(nullptr);
	ASSERT_NE(list, nullptr);
	ibv_free_device_list(list);
}

TEST(DeviceList, DeviceWithoutProviderIsDropped)
{
	CoreEnv env;
	env.sysfs.add_device("uverbs0", "mystery0");
	EXPECT_THAT(env.device_names(), IsEmpty());
	EXPECT_THAT(ov::core::last_scan_notes().back(), HasSubstr("no provider for mystery0"));
}

TEST(DeviceList, MatchByNameFillsTheDevice)
{
	CoreEnv env;
	env.sysfs.add_device("uverbs3", "rxe0").node_type("1: CA\n");
	env.add_provider(FakeProvider("rxe").name_match("rxe"));
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	ASSERT_EQ(n, 1);
	ibv_device *d = list[0];
	EXPECT_STREQ(d->name, "rxe0");
	EXPECT_STREQ(d->dev_name, "uverbs3");
	EXPECT_EQ(std::string(d->dev_path), env.sysfs.sysfs() + "/class/infiniband_verbs/uverbs3");
	EXPECT_EQ(std::string(d->ibdev_path), env.sysfs.sysfs() + "/class/infiniband/rxe0");
	EXPECT_EQ(d->node_type, IBV_NODE_CA);
	EXPECT_EQ(d->transport_type, IBV_TRANSPORT_IB);
	EXPECT_EQ(d->_ops._dummy1, nullptr);
	verbs_device *v = verbs_get_device(d);
	EXPECT_EQ(v->ops, &env.providers[0].ops);
	EXPECT_EQ(v->refcount.load(), 2); // list + this array
	EXPECT_STREQ(v->sysfs->match->u.modalias, "rdma_device:*Nrxe*");
	ibv_free_device_list(list);
	EXPECT_EQ(v->refcount.load(), 1);
}

TEST(DeviceList, IwarpTransport)
{
	CoreEnv env;
	env.sysfs.add_device("uverbs0", "siw0").node_type("4: RNIC\n");
	env.add_provider(FakeProvider("siw").name_match("siw"));
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	ASSERT_EQ(n, 1);
	EXPECT_EQ(list[0]->transport_type, IBV_TRANSPORT_IWARP);
	ibv_free_device_list(list);
}

TEST(DeviceList, ModaliasAndPciMatching)
{
	CoreEnv env;
	env.sysfs.add_device("uverbs0", "mlx5_0").modalias("pci:v000015B3d0000101Bsv000015B3sd00000008bc02sc00i00\n");
	env.sysfs.add_device("uverbs1", "plat0").modalias("platform:hns-roce\n");
	env.add_provider(FakeProvider("mlx5").pci(0x15b3, 0x101b));
	env.add_provider(FakeProvider("hns").modalias("platform:hns*"));
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	ASSERT_EQ(n, 2);
	EXPECT_EQ(ops_of(list[0]), &env.providers[0].ops);
	EXPECT_EQ(ops_of(list[1]), &env.providers[1].ops);
	ibv_free_device_list(list);
}

TEST(DeviceList, DriverIdPassComesFirst)
{
	// Soft devices carry a driver id; a provider listing it wins even when
	// registered after one that matches the name.
	ScopedEnv soft("RDMAV_SOFT_DEVICES", "1");
	CoreEnv env;
	env.add_provider(FakeProvider("byname").name_match("soft"));
	env.add_provider(FakeProvider("byid").driver_id(OPENVERBS_DRIVER_SOFT));
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	ASSERT_EQ(n, 1);
	EXPECT_EQ(ops_of(list[0]), &env.providers[1].ops);
	ibv_free_device_list(list);
}

TEST(DeviceList, MatchDeviceCallbackCanRefuseAndAccept)
{
	CoreEnv env;
	env.sysfs.add_device("uverbs0", "x0");
	FakeProvider refuse("refuse");
	refuse.name_match("x");
	refuse.match_cb = [](verbs_sysfs_dev *) { return false; };
	FakeProvider accept("accept"); // no table entry: the callback decides
	accept.match_cb = [](verbs_sysfs_dev *d) { return std::string(d->ibdev_name) == "x0"; };
	env.add_provider(refuse);
	env.add_provider(accept);
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	ASSERT_EQ(n, 1);
	EXPECT_EQ(ops_of(list[0]), &env.providers[1].ops);
	ibv_free_device_list(list);
}

TEST(DeviceList, KernelAbiOutsideProviderRangeIsRefused)
{
	CoreEnv env;
	env.sysfs.add_device("uverbs0", "rxe0", 7);
	env.add_provider(FakeProvider("rxe").name_match("rxe").abi(1, 2));
	testing::internal::CaptureStderr();
	EXPECT_THAT(env.device_names(), IsEmpty());
	EXPECT_THAT(testing::internal::GetCapturedStderr(),
		    HasSubstr("Driver rxe does not support the kernel ABI of 7 (supports 1 to 2)"));
}

TEST(DeviceList, GlobalUverbsAbiOutOfRangeIgnoresDevices)
{
	CoreEnv env;
	env.tmp.write("sys/class/infiniband_verbs/abi_version", "2\n");
	env.sysfs.add_device("uverbs0", "rxe0");
	env.add_provider(FakeProvider("rxe").name_match("rxe"));
	EXPECT_THAT(env.device_names(), IsEmpty());
}

TEST(DeviceList, ManyDevices)
{
	CoreEnv env;
	env.add_provider(FakeProvider("fake").name_match("dev"));
	for (int i = 0; i < 512; ++i)
		env.sysfs.add_device("uverbs" + std::to_string(i), "dev" + std::to_string(i));
	EXPECT_EQ(env.device_names().size(), 512u);
	EXPECT_EQ(env.device_names().size(), 512u); // warm
	EXPECT_EQ(env.providers[0].uninit, 0);
}

TEST(DeviceList, VanishedDevicesDropOutHeldOnesStayValid)
{
	CoreEnv env;
	FakeProvider &p = env.add_provider(FakeProvider("fake").name_match("dev"));
	env.sysfs.add_device("uverbs0", "dev0");
	env.sysfs.add_device("uverbs1", "dev1");
	int n = 0;
	ibv_device **held = ibv_get_device_list(&n);
	ASSERT_EQ(n, 2);
	ibv_device *dev0 = held[0];

	env.sysfs.remove_device("uverbs0");
	env.sysfs.add_device("uverbs2", "dev2");
	EXPECT_THAT(env.device_names(), ElementsAre("dev1", "dev2"));
	EXPECT_EQ(p.uninit, 0);              // still referenced by `held`
	EXPECT_STREQ(dev0->name, "dev0");    // and still readable
	ibv_free_device_list(held);
	EXPECT_EQ(p.uninit, 1);              // now gone
}

TEST(DeviceList, UnchangedDevicesKeepTheirPointer)
{
	CoreEnv env;
	env.add_provider(FakeProvider("fake").name_match("dev"));
	env.sysfs.add_device("uverbs0", "dev0");
	ibv_device **a = ibv_get_device_list(nullptr);
	ibv_device **b = ibv_get_device_list(nullptr);
	ASSERT_TRUE(a[0] && b[0]);
	EXPECT_EQ(a[0], b[0]);
	ibv_free_device_list(a);
	ibv_free_device_list(b);
}

TEST(DeviceList, SoftDevicesFromEnvironment)
{
	ScopedEnv soft("RDMAV_SOFT_DEVICES", "3");
	CoreEnv env;
	env.add_provider(FakeProvider("soft").name_match(OPENVERBS_SOFT_NAME));
	EXPECT_THAT(env.device_names(), ElementsAre("soft0", "soft1", "soft2"));
}

TEST(DeviceList, SoftDevicesFromConfigEnvironmentWins)
{
	ScopedEnv unset("RDMAV_SOFT_DEVICES", std::nullopt);
	CoreEnv env;
	env.tmp.write("etc/soft.driver", "driver soft\nsoft_devices 2\n");
	env.add_provider(FakeProvider("soft").name_match(OPENVERBS_SOFT_NAME));
	EXPECT_THAT(env.device_names(), ElementsAre("soft0", "soft1"));
	{
		ScopedEnv one("RDMAV_SOFT_DEVICES", "1");
		env.reload();
		EXPECT_THAT(env.device_names(), ElementsAre("soft0"));
	}
}

TEST(DeviceList, NoSoftDevicesUnlessAsked)
{
	ScopedEnv unset("RDMAV_SOFT_DEVICES", std::nullopt);
	CoreEnv env;
	env.add_provider(FakeProvider("soft").name_match(OPENVERBS_SOFT_NAME));
	EXPECT_THAT(env.device_names(), IsEmpty());
	ScopedEnv bad("RDMAV_SOFT_DEVICES", "lots");
	env.reload();
	EXPECT_THAT(env.device_names(), IsEmpty());
}

TEST(Providers, CandidatesFromDriverIdAndName)
{
	verbs_sysfs_dev d{};
	d.driver_id = RDMA_DRIVER_RXE;
	strcpy(d.ibdev_name, "rxe0");
	EXPECT_THAT(ov::core::candidate_providers(&d), ElementsAre("rxe"));
	d.driver_id = 0;
	strcpy(d.ibdev_name, "mlx5_12");
	EXPECT_THAT(ov::core::candidate_providers(&d), ElementsAre("mlx5"));
	d.driver_id = RDMA_DRIVER_QIB;
	strcpy(d.ibdev_name, "qib0");
	EXPECT_THAT(ov::core::candidate_providers(&d), ElementsAre("ipathverbs", "qib"));
	d.driver_id = 0;
	strcpy(d.ibdev_name, "123");
	EXPECT_THAT(ov::core::candidate_providers(&d), IsEmpty());
}

TEST(Providers, MissingFileIsAPreciseReason)
{
	CoreEnv env;
	ov::core::ProviderLoader loader;
	ov::core::LoadOutcome out = loader.load("nosuch");
	EXPECT_FALSE(out.loaded);
	EXPECT_THAT(out.reason, HasSubstr("no file libnosuch" OV_PROVIDER_SUFFIX " in " + (env.tmp / "providers").string()));
	EXPECT_FALSE(loader.known("nosuch"));
}

TEST(Providers, NotAProviderIsReported)
{
	CoreEnv env;
	// A shared object that registers nothing: any system library will do.
	std::filesystem::create_directories(env.tmp / "providers");
	std::filesystem::copy_file("/lib/x86_64-linux-gnu/libz.so.1",
				   env.tmp / "providers/libzz" OV_PROVIDER_SUFFIX);
	ov::core::ProviderLoader loader;
	EXPECT_TRUE(loader.known("zz"));
	ov::core::LoadOutcome out = loader.load("zz");
	EXPECT_THAT(out.reason, HasSubstr("registered no provider"));
}

TEST(Providers, DlopenErrorIsTheReason)
{
	CoreEnv env;
	env.tmp.write("providers/libbroken" OV_PROVIDER_SUFFIX, "not an ELF file");
	ov::core::ProviderLoader loader;
	ov::core::LoadOutcome out = loader.load("broken");
	EXPECT_FALSE(out.loaded);
	EXPECT_THAT(out.reason, HasSubstr("libbroken" OV_PROVIDER_SUFFIX));
}

TEST(Providers, IncompleteOpsAreIgnored)
{
	CoreEnv env;
	verbs_device_ops bad{};
	bad.name = "bad";
	ov::core::register_provider(&bad); // no alloc_device
	EXPECT_TRUE(ov::core::registered_providers().empty());
	ov::core::register_provider(nullptr);
	EXPECT_TRUE(ov::core::registered_providers().empty());
}
