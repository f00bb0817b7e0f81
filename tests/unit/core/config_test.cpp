// Config parsing: the *.driver files of libibverbs.d.
#include "core/config.h"
#include "fixtures.h"

#include <gmock/gmock.h>

using ov::core::Config;
using ov::core::parse_config_text;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Config, DriverLinesCommentsAndBlanks)
{
	Config c;
	parse_config_text("# rxe\n\ndriver rxe\n   driver\tsiw  \n#driver mlx5\n", "x.driver", c);
	EXPECT_THAT(c.drivers, ElementsAre("rxe", "siw"));
	EXPECT_TRUE(c.problems.empty());
	EXPECT_EQ(c.soft_devices, -1);
}

TEST(Config, DuplicatesKeptOnceInFirstOrder)
{
	Config c;
	parse_config_text("driver b\ndriver a\ndriver b\n", "x", c);
	EXPECT_THAT(c.drivers, ElementsAre("b", "a"));
}

TEST(Config, CrLfAndNoFinalNewline)
{
	Config c;
	parse_config_text("driver rxe\r\ndriver siw", "x", c);
	EXPECT_THAT(c.drivers, ElementsAre("rxe", "siw"));
}

TEST(Config, MalformedLinesAreReportedAndSkipped)
{
	Config c;
	parse_config_text("driver\ndriver a b\nprovider rxe\nsoft_devices many\nsoft_devices 999\n"
			  "soft_devices\ndriver ok\n",
			  "/etc/x.driver", c);
	EXPECT_THAT(c.drivers, ElementsAre("ok"));
	ASSERT_EQ(c.problems.size(), 6u);
	EXPECT_THAT(c.problems[0], HasSubstr("/etc/x.driver:1"));
	EXPECT_THAT(c.problems[2], HasSubstr("unknown directive 'provider'"));
	EXPECT_EQ(c.soft_devices, -1);
}

TEST(Config, SoftDevicesLastLineWins)
{
	Config c;
	parse_config_text("soft_devices 2\nsoft_devices 3\n", "x", c);
	EXPECT_EQ(c.soft_devices, 3);
}

TEST(Config, SoftRoceInterfaces)
{
	Config c;
	parse_config_text("soft_roce eth0,veth1,eth0\n", "x", c);
	EXPECT_TRUE(c.soft_roce_set);
	EXPECT_THAT(c.soft_roce, ElementsAre("eth0", "veth1"));
	EXPECT_TRUE(c.problems.empty());
	parse_config_text("soft_roce lo\n", "x", c); // the last line wins
	EXPECT_THAT(c.soft_roce, ElementsAre("lo"));
}

TEST(Config, SoftRoceMalformedLinesAreReported)
{
	Config c;
	parse_config_text("soft_roce\nsoft_roce a b\nsoft_roce eth0,\nsoft_roce ,eth0\n"
			  "soft_roce a/b\nsoft_roce ..\nsoft_roce 0123456789abcdef\n",
			  "/etc/x.driver", c);
	EXPECT_EQ(c.problems.size(), 7u);
	EXPECT_FALSE(c.soft_roce_set);
	EXPECT_TRUE(c.soft_roce.empty());
	std::vector<std::string> v;
	EXPECT_TRUE(ov::core::parse_roce_interfaces("", v));
	EXPECT_TRUE(v.empty());
	EXPECT_TRUE(ov::core::parse_roce_interfaces("0123456789abcde", v)); // 15: the limit
	std::string many;
	for (int i = 0; i <= OPENVERBS_MAX_SOFT_ROCE; i++)
		many += (i ? ",if" : "if") + std::to_string(i);
	EXPECT_FALSE(ov::core::parse_roce_interfaces(many, v));
	EXPECT_TRUE(v.empty());
}

TEST(Config, BinaryGarbageDoesNotCrash)
{
	std::string junk;
	for (int i = 0; i < 4096; ++i)
		junk.push_back(static_cast<char>((i * 131) & 0xff));
	Config c;
	parse_config_text(junk, "junk", c);
	SUCCEED();
}

TEST(Config, OnlyDotDriverFilesFirstDirectoryMasksLater)
{
	ovtest::TempDir a, b;
	a.write("rxe.driver", "driver rxe_override\n");
	b.write("rxe.driver", "driver rxe\n");
	b.write("siw.driver", "driver siw\n");
	b.write("mlx5.driver.rpmsave", "driver mlx5\n");
	b.write("README", "driver readme\n");
	Config c;
	ov::core::read_config_dirs({a.str(), "/nonexistent/dir", b.str()}, c);
	EXPECT_THAT(c.drivers, ElementsAre("rxe_override", "siw"));
}
