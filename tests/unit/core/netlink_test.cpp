// The RDMA netlink parsers, on messages built with libnl.
#include "core/discovery.h"

#include <gtest/gtest.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <rdma/rdma_netlink.h>

#include <sys/sysmacros.h>

using namespace ov::core;

namespace {

struct Msg {
	nl_msg *m = nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET), 0);
	~Msg() { nlmsg_free(m); }
	nlmsghdr *hdr() { return nlmsg_hdr(m); }
};

} // namespace

TEST(Netlink, DeviceMessage)
{
	Msg msg;
	nla_put_u32(msg.m, RDMA_NLDEV_ATTR_DEV_INDEX, 3);
	nla_put_string(msg.m, RDMA_NLDEV_ATTR_DEV_NAME, "rxe0");
	nla_put_u64(msg.m, RDMA_NLDEV_ATTR_NODE_GUID, 0x1122334455667788ULL);
	nla_put_u8(msg.m, RDMA_NLDEV_ATTR_DEV_NODE_TYPE, 1);
	nla_put_u32(msg.m, RDMA_NLDEV_ATTR_PORT_INDEX, 2);
	SysfsDevPtr d = new_sysfs_dev();
	ASSERT_TRUE(parse_nldev_device(msg.hdr(), d.get()));
	EXPECT_EQ(d->ibdev_idx, 3);
	EXPECT_STREQ(d->ibdev_name, "rxe0");
	EXPECT_EQ(d->node_guid, 0x1122334455667788ULL);
	EXPECT_TRUE(d->flags & VSYSFS_READ_NODE_GUID);
	EXPECT_EQ(d->node_type, IBV_NODE_CA);
	EXPECT_EQ(d->num_ports, 2u);
}

TEST(Netlink, DeviceMessageWithoutNameOrIndexIsMalformed)
{
	Msg a;
	nla_put_u32(a.m, RDMA_NLDEV_ATTR_DEV_INDEX, 3);
	SysfsDevPtr d = new_sysfs_dev();
	EXPECT_FALSE(parse_nldev_device(a.hdr(), d.get()));
	Msg b;
	nla_put_string(b.m, RDMA_NLDEV_ATTR_DEV_NAME, "x");
	EXPECT_FALSE(parse_nldev_device(b.hdr(), d.get()));
	Msg c; // name not terminated inside the attribute
	nla_put_u32(c.m, RDMA_NLDEV_ATTR_DEV_INDEX, 1);
	nla_put(c.m, RDMA_NLDEV_ATTR_DEV_NAME, 3, "abc");
	EXPECT_FALSE(parse_nldev_device(c.hdr(), d.get()));
	Msg e; // index of an odd size
	nla_put(e.m, RDMA_NLDEV_ATTR_DEV_INDEX, 3, "abc");
	nla_put_string(e.m, RDMA_NLDEV_ATTR_DEV_NAME, "x");
	EXPECT_FALSE(parse_nldev_device(e.hdr(), d.get()));
}

TEST(Netlink, ChardevMessage)
{
	Msg msg;
	nla_put_string(msg.m, RDMA_NLDEV_ATTR_CHARDEV_NAME, "uverbs0");
	nla_put_u64(msg.m, RDMA_NLDEV_ATTR_CHARDEV, makedev(231, 192));
	nla_put_u64(msg.m, RDMA_NLDEV_ATTR_CHARDEV_ABI, 1);
	nla_put_u32(msg.m, RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, 14);
	SysfsDevPtr d = new_sysfs_dev();
	ASSERT_TRUE(parse_nldev_chardev(msg.hdr(), d.get()));
	EXPECT_STREQ(d->sysfs_name, "uverbs0");
	EXPECT_EQ(d->sysfs_cdev, makedev(231, 192));
	EXPECT_EQ(d->abi_ver, 1u);
	EXPECT_EQ(d->driver_id, 14u);

	Msg bad;
	nla_put_string(bad.m, RDMA_NLDEV_ATTR_CHARDEV_NAME, "uverbs0");
	EXPECT_FALSE(parse_nldev_chardev(bad.hdr(), d.get()));
}

TEST(Netlink, SysMessage)
{
	Msg msg;
	nla_put_u8(msg.m, RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK, 1);
	bool on = false;
	ASSERT_TRUE(parse_nldev_sys(msg.hdr(), &on));
	EXPECT_TRUE(on);
	Msg empty;
	EXPECT_FALSE(parse_nldev_sys(empty.hdr(), &on));
}

TEST(Netlink, UnavailableHereFallsBack)
{
	// This host has no NETLINK_RDMA: discovery must report it, not crash.
	SysfsDevList l;
	int rc = discover_netlink(l);
	if (rc == 0)
		GTEST_SKIP() << "kernel has RDMA netlink";
	EXPECT_LT(rc, 0);
	EXPECT_TRUE(l.empty());
}
