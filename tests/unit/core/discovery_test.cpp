// Sysfs discovery on fake trees: counts, malformed attributes, hidden
// character devices, ABI checks, the soft devices.
#include "core/discovery.h"
#include "fixtures.h"

#include <gmock/gmock.h>

#include <sys/sysmacros.h>

using namespace ov::core;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

namespace {

std::vector<std::string> ibdev_names(const SysfsDevList &l)
{
	std::vector<std::string> out;
	for (auto &d : l)
		out.push_back(d->ibdev_name);
	return out;
}

struct Discovery : ::testing::Test {
	ovtest::TempDir tmp;
	ovtest::FakeSysfs sysfs{tmp};
};

} // namespace

TEST_F(Discovery, NoClassDirectoryMeansNoRdma)
{
	SysfsDevList l;
	EXPECT_EQ(discover_sysfs((tmp / "nothing").string(), l), -ENOSYS);
	EXPECT_TRUE(l.empty());
}

TEST_F(Discovery, OneDeviceAllFields)
{
	sysfs.add_device("uverbs0", "rxe0", 2).node_type("4: RNIC\n");
	SysfsDevList l;
	ASSERT_EQ(discover_sysfs(sysfs.sysfs(), l), 0);
	ASSERT_EQ(l.size(), 1u);
	const verbs_sysfs_dev &d = *l[0];
	EXPECT_STREQ(d.sysfs_name, "uverbs0");
	EXPECT_STREQ(d.ibdev_name, "rxe0");
	EXPECT_EQ(d.sysfs_cdev, makedev(231, 192));
	EXPECT_EQ(d.abi_ver, 2u);
	EXPECT_EQ(d.node_type, IBV_NODE_RNIC);
	EXPECT_EQ(d.ibdev_idx, -1);
	EXPECT_EQ(d.driver_id, 0u);
	EXPECT_EQ(std::string(d.ibdev_path), sysfs.sysfs() + "/class/infiniband/rxe0");
	EXPECT_NE(d.time_created.tv_sec, 0);
}

TEST_F(Discovery, ManyDevices)
{
	for (unsigned n : {1u, 16u, 128u, 512u}) {
		ovtest::TempDir t;
		ovtest::FakeSysfs s(t);
		for (unsigned i = 0; i < n; ++i)
			s.add_device("uverbs" + std::to_string(i), "dev" + std::to_string(i));
		SysfsDevList l;
		ASSERT_EQ(discover_sysfs(s.sysfs(), l), 0);
		EXPECT_EQ(l.size(), n);
		filter_accessible(s.cdev_dir(), l);
		EXPECT_EQ(l.size(), n);
	}
}

TEST_F(Discovery, MalformedEntriesAreSkipped)
{
	sysfs.add_device("uverbs0", "good0");
	sysfs.add_device("uverbs1", "noibdev").remove_attr("ibdev");
	sysfs.add_device("uverbs2", "baddev").attr("dev", "garbage\n");
	sysfs.add_device("uverbs3", "baddev2").attr("dev", "231:5:7\n");
	sysfs.add_device("uverbs4", "emptyname").attr("ibdev", "\n");
	sysfs.add_device("uverbs5", std::string(80, 'x')); // name too long
	sysfs.add_device("uverbs6", "noabi").remove_attr("abi_version");
	sysfs.add_device("uverbs7", "badtype").node_type("CA\n");
	tmp.write("sys/class/infiniband_verbs/stray_file", "x");
	SysfsDevList l;
	ASSERT_EQ(discover_sysfs(sysfs.sysfs(), l), 0);
	EXPECT_THAT(ibdev_names(l), UnorderedElementsAre("good0", "noabi", "badtype"));
	for (auto &d : l) {
		if (std::string(d->ibdev_name) == "noabi") {
			EXPECT_EQ(d->abi_ver, 0u);
		}
		if (std::string(d->ibdev_name) == "badtype") {
			EXPECT_EQ(d->node_type, IBV_NODE_UNKNOWN);
		}
	}
}

TEST_F(Discovery, AttributeWithoutNewlineFillingBufferIsRejected)
{
	sysfs.add_device("uverbs0", "x").attr("ibdev", std::string(256, 'a'));
	SysfsDevList l;
	ASSERT_EQ(discover_sysfs(sysfs.sysfs(), l), 0);
	EXPECT_TRUE(l.empty());
}

TEST_F(Discovery, HiddenCharacterDevicesHideTheDevice)
{
	sysfs.add_device("uverbs0", "seen0");
	sysfs.add_device("uverbs1", "hidden1").hide_cdev();
	SysfsDevList l;
	ASSERT_EQ(discover_sysfs(sysfs.sysfs(), l), 0);
	ASSERT_EQ(l.size(), 2u);
	filter_accessible(sysfs.cdev_dir(), l);
	EXPECT_THAT(ibdev_names(l), ElementsAre("seen0"));
}

TEST_F(Discovery, NoCdevDirectoryHidesEverythingButSoftDevices)
{
	sysfs.add_device("uverbs0", "a0");
	SysfsDevList l;
	ASSERT_EQ(discover_sysfs(sysfs.sysfs(), l), 0);
	add_soft_devices(2, sysfs.sysfs(), l);
	filter_accessible((tmp / "nodev").string(), l);
	EXPECT_THAT(ibdev_names(l), ElementsAre("soft0", "soft1"));
}

TEST_F(Discovery, RescanSeesChangesAndReusesUnchanged)
{
	sysfs.add_device("uverbs0", "a0");
	SysfsDevList l;
	ASSERT_EQ(discover_sysfs(sysfs.sysfs(), l), 0);
	sysfs.remove_device("uverbs0");
	sysfs.add_device("uverbs0", "b0"); // same name, new object
	sysfs.add_device("uverbs1", "c1");
	ASSERT_EQ(discover_sysfs(sysfs.sysfs(), l), 0);
	EXPECT_THAT(ibdev_names(l), UnorderedElementsAre("b0", "c1"));
}

TEST_F(Discovery, UverbsAbi)
{
	unsigned abi = 0;
	EXPECT_EQ(read_uverbs_abi(sysfs.sysfs(), &abi), 0);
	EXPECT_EQ(abi, 6u);
	tmp.write("sys/class/infiniband_verbs/abi_version", "junk\n");
	EXPECT_LT(read_uverbs_abi(sysfs.sysfs(), &abi), 0);
}

TEST_F(Discovery, SoftDevices)
{
	SysfsDevList l;
	add_soft_devices(3, "/sys", l);
	ASSERT_EQ(l.size(), 3u);
	EXPECT_STREQ(l[2]->ibdev_name, "soft2");
	EXPECT_STREQ(l[2]->sysfs_name, "soft2");
	EXPECT_EQ(l[2]->sysfs_cdev, 0u);
	EXPECT_EQ(l[2]->driver_id, static_cast<uint32_t>(OPENVERBS_DRIVER_SOFT));
	EXPECT_TRUE(l[2]->flags & VSYSFS_SOFT);
	EXPECT_EQ(l[2]->node_type, IBV_NODE_CA);
}

TEST_F(Discovery, SoftRoceDevices)
{
	SysfsDevList l;
	add_soft_devices(1, "/sys", l);
	add_soft_roce_devices({"veth0", "eth1"}, "/sys", l);
	ASSERT_EQ(l.size(), 3u);
	EXPECT_STREQ(l[1]->ibdev_name, "sroce0");
	EXPECT_STREQ(l[2]->ibdev_name, "sroce1");
	EXPECT_STREQ(l[2]->modalias, "openverbs-roce:eth1");
	EXPECT_TRUE(l[2]->flags & VSYSFS_SOFT);
	EXPECT_TRUE(l[2]->flags & VSYSFS_SOFT_ROCE);
	EXPECT_FALSE(l[0]->flags & VSYSFS_SOFT_ROCE);
	EXPECT_EQ(l[2]->driver_id, static_cast<uint32_t>(OPENVERBS_DRIVER_SOFT));
	EXPECT_NE(l[1]->node_guid, l[0]->node_guid);
}

TEST(NodeType, Decode)
{
	EXPECT_EQ(decode_node_type(1), IBV_NODE_CA);
	EXPECT_EQ(decode_node_type(4), IBV_NODE_RNIC);
	EXPECT_EQ(decode_node_type(7), IBV_NODE_UNSPECIFIED);
	EXPECT_EQ(decode_node_type(0), IBV_NODE_UNKNOWN);
	EXPECT_EQ(decode_node_type(99), IBV_NODE_UNKNOWN);
}
