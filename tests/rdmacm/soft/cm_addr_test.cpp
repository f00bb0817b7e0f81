// Address model of the software devices' connection manager (addr.h).
#include "rdmacm/usercm/addr.h"

#include <arpa/inet.h>
#include <cstring>
#include <gtest/gtest.h>

using namespace ov::usercm;

namespace {

sockaddr_storage ip(const char *text)
{
	sockaddr_storage ss{};
	auto *a4 = reinterpret_cast<sockaddr_in *>(&ss);
	auto *a6 = reinterpret_cast<sockaddr_in6 *>(&ss);
	if (inet_pton(AF_INET, text, &a4->sin_addr) == 1)
		a4->sin_family = AF_INET;
	else if (inet_pton(AF_INET6, text, &a6->sin6_addr) == 1)
		a6->sin6_family = AF_INET6;
	return ss;
}

const sockaddr *sa(const sockaddr_storage &ss) { return reinterpret_cast<const sockaddr *>(&ss); }

} // namespace

TEST(CmAddr, BindingSyntax)
{
	std::vector<AddrBinding> b;
	ASSERT_TRUE(parse_bindings("soft1=10.1.0.0/16,fd00::5;soft0=*", b));
	ASSERT_EQ(b.size(), 3u);
	EXPECT_EQ(b[0].device, 1);
	EXPECT_EQ(b[0].family, AF_INET);
	EXPECT_EQ(b[0].prefix, 16);
	EXPECT_EQ(b[1].family, AF_INET6);
	EXPECT_EQ(b[1].prefix, 128);
	EXPECT_EQ(b[2].device, 0);
	EXPECT_EQ(b[2].family, AF_UNSPEC);
	std::vector<AddrBinding> none;
	EXPECT_FALSE(parse_bindings("soft=1.2.3.4", none));
	EXPECT_FALSE(parse_bindings("soft1=1.2.3.4/33", none));
	EXPECT_FALSE(parse_bindings("soft1=banana", none));
	EXPECT_FALSE(parse_bindings("mlx5_0=1.2.3.4", none));
	EXPECT_FALSE(parse_bindings("soft256=1.2.3.4", none));
	EXPECT_TRUE(none.empty());
}

TEST(CmAddr, LocalAddresses)
{
	EXPECT_TRUE(is_local_address(sa(ip("127.0.0.1"))));
	EXPECT_TRUE(is_local_address(sa(ip("127.9.8.7"))));
	EXPECT_TRUE(is_local_address(sa(ip("::1"))));
	EXPECT_TRUE(is_local_address(sa(ip("::ffff:127.0.0.1"))));
	EXPECT_TRUE(is_local_address(sa(ip("0.0.0.0"))));
	EXPECT_TRUE(is_local_address(sa(ip("::"))));
	EXPECT_FALSE(is_local_address(sa(ip("192.0.2.1")))); // TEST-NET-1
	EXPECT_FALSE(is_local_address(sa(ip("2001:db8::1"))));
	EXPECT_FALSE(is_local_address(nullptr));
	EXPECT_EQ(soft_device_for(sa(ip("127.0.0.1"))), 0);
	EXPECT_EQ(soft_device_for(sa(ip("192.0.2.1"))), -1);
}

TEST(CmAddr, Keys)
{
	EXPECT_EQ(addr_key(sa(ip("127.0.0.1"))), "7f000001");
	EXPECT_EQ(addr_key(sa(ip("::ffff:127.0.0.1"))), "7f000001");
	EXPECT_EQ(addr_key(sa(ip("0.0.0.0"))), "any4");
	EXPECT_EQ(addr_key(sa(ip("::"))), "any6");
	EXPECT_EQ(addr_key(sa(ip("::1"))), "00000000000000000000000000000001");
}

// RoCE v2 GIDs of addresses (openverbs-roce(7)): IPv4-mapped for IPv4.
TEST(CmAddr, RoceGids)
{
	uint8_t g[16];
	roce_gid_of(sa(ip("10.231.0.1")), g);
	const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 231, 0, 1};
	EXPECT_EQ(memcmp(g, v4, 16), 0);
	roce_gid_of(sa(ip("::ffff:10.231.0.1")), g);
	EXPECT_EQ(memcmp(g, v4, 16), 0);
	roce_gid_of(sa(ip("fd00:231::1")), g);
	const uint8_t v6[16] = {0xfd, 0, 0x02, 0x31, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	EXPECT_EQ(memcmp(g, v6, 16), 0);
}

// Which interface serves an address: the owner, else the subnet (the
// loopback interface holds 127.0.0.1/8).
TEST(CmAddr, RoceInterfaceOfAnAddress)
{
	std::vector<std::string> ifs = {"ovnone0", "lo"};
	EXPECT_EQ(roce_interface_for(sa(ip("127.0.0.1")), ifs), 1);
	EXPECT_EQ(roce_interface_for(sa(ip("127.1.2.3")), ifs), 1);
	EXPECT_EQ(roce_interface_for(sa(ip("192.0.2.1")), ifs), -1);
	EXPECT_EQ(roce_interface_for(sa(ip("0.0.0.0")), ifs), -1);
	EXPECT_EQ(roce_interface_for(sa(ip("127.0.0.1")), {"ovnone0"}), -1);
	sockaddr_storage src;
	ASSERT_TRUE(roce_source_for("lo", sa(ip("127.1.2.3")), src));
	EXPECT_EQ(addr_key(sa(src)), "7f000001");
	EXPECT_FALSE(roce_source_for("ovnone0", sa(ip("127.1.2.3")), src));
	EXPECT_GE(roce_ib_mtu("lo"), 1);
	EXPECT_EQ(roce_ib_mtu("ovnone0"), 0);
}
