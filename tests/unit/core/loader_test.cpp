// Provider loading through the real libibverbs.so.1: a probe program is run
// with a provider folder holding one fake provider variant, and its output,
// stderr and VERBS_LOG_FILE are checked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

struct ProbeRun {
	std::string out, err, log;
};

class Loader : public ::testing::Test {
protected:
	fs::path tmp;
	void SetUp() override
	{
		char t[] = "/tmp/ovloader.XXXXXX";
		ASSERT_NE(mkdtemp(t), nullptr);
		tmp = t;
		fs::create_directories(tmp / "etc");
		fs::create_directories(tmp / "empty");
	}
	void TearDown() override { fs::remove_all(tmp); }

	static std::string slurp(const fs::path &p)
	{
		std::ifstream f(p);
		std::stringstream s;
		s << f.rdbuf();
		return s.str();
	}

	// Runs the probe with `variant`'s provider folder as OPENVERBS_PROVIDER_DIR.
	// log_level: "" = VERBS_LOG_LEVEL=4 into VERBS_LOG_FILE (read back as
	// .log); otherwise that level with no VERBS_LOG_FILE ("0": unset).
	ProbeRun run(const std::string &variant, const std::string &soft_devices,
		     const std::string &log_level = "")
	{
		std::string dir = variant.empty() ? (tmp / "empty").string()
						  : std::string(CORE_PROVIDERS) + "/" + variant;
		std::string cmd = "env -u RDMAV_DRIVERS -u IBV_DRIVERS";
		if (!log_level.empty())
			cmd += " -u VERBS_LOG_FILE -u VERBS_LOG_LEVEL";
		cmd += soft_devices.empty() ? " -u RDMAV_SOFT_DEVICES" : " RDMAV_SOFT_DEVICES=" + soft_devices;
		cmd += " OPENVERBS_PROVIDER_DIR=" + dir;
		cmd += " OPENVERBS_CONFIG_DIR=" + (tmp / "etc").string();
		cmd += " SYSFS_PATH=" + (tmp / "nosys").string();
		if (log_level.empty())
			cmd += " VERBS_LOG_LEVEL=4 VERBS_LOG_FILE=" + (tmp / "log").string();
		else if (log_level != "0")
			cmd += " VERBS_LOG_LEVEL=" + log_level;
		cmd += std::string(" ") + CORE_PROBE + " >" + (tmp / "out").string() + " 2>" +
		       (tmp / "err").string();
		int rc = system(cmd.c_str());
		EXPECT_EQ(rc, 0) << cmd;
		return ProbeRun{slurp(tmp / "out"), slurp(tmp / "err"), slurp(tmp / "log")};
	}
};

} // namespace

TEST_F(Loader, GoodProviderServesSoftDevices)
{
	ProbeRun r = run("good", "2");
	EXPECT_THAT(r.out, HasSubstr("devices 2\ndev soft0\nopen soft0 cmd_fd=-1\ndev soft1\nopen soft1 cmd_fd=-1\n"));
	EXPECT_THAT(r.log, HasSubstr("loaded provider soft from " CORE_PROVIDERS "/good/libsoft" OV_PROVIDER_SUFFIX));
	EXPECT_THAT(r.log, HasSubstr("soft0 bound to provider fake_soft"));
	EXPECT_EQ(r.err, "");
}

TEST_F(Loader, NoDeviceNoProviderLoaded)
{
	ProbeRun r = run("good", "");
	EXPECT_THAT(r.out, HasSubstr("devices 0\n"));
	EXPECT_THAT(r.log, Not(HasSubstr("loaded provider")));
	EXPECT_THAT(r.log, Not(HasSubstr("provider soft")));
	EXPECT_EQ(r.err, "");
}

TEST_F(Loader, WrongPrivateAbiIsNamed)
{
	ProbeRun r = run("pabi33", "1");
	EXPECT_THAT(r.out, HasSubstr("devices 0\n"));
	EXPECT_THAT(r.log, HasSubstr("version `IBVERBS_PRIVATE_33' not found"));
	EXPECT_THAT(r.err, HasSubstr("libibverbs: Warning: couldn't load driver 'soft'"));
	EXPECT_THAT(r.log, HasSubstr("no provider for soft0"));
}

TEST_F(Loader, KernelAbiOutOfRange)
{
	ProbeRun r = run("abirange", "1");
	EXPECT_THAT(r.out, HasSubstr("devices 0\n"));
	EXPECT_THAT(r.err, HasSubstr("Driver fake_soft does not support the kernel ABI of 1 (supports 5 to 6)"));
}

TEST_F(Loader, ProviderThatDoesNotRegister)
{
	ProbeRun r = run("noreg", "1");
	EXPECT_THAT(r.out, HasSubstr("devices 0\n"));
	EXPECT_THAT(r.log, HasSubstr("registered no provider"));
}

// VERBS_LOG_LEVEL=3 alone (no VERBS_LOG_FILE) on a host without RDMA: stderr
// says why the list is empty and how to get the software device, once.
TEST_F(Loader, EmptyListIsExplainedAtInfoLevel)
{
	ProbeRun r = run("good", "", "3");
	EXPECT_THAT(r.out, HasSubstr("devices 0\n"));
	EXPECT_THAT(r.err, HasSubstr("libibverbs: no RDMA device: "));
	if (r.err.find("netlink lists no RDMA device") == std::string::npos)
		EXPECT_THAT(r.err, HasSubstr("no " + (tmp / "nosys").string() +
					     "/class/infiniband_verbs, no " + (tmp / "nosys").string() +
					     "/class/infiniband: this kernel has no RDMA support loaded"));
	EXPECT_THAT(r.err, HasSubstr("RDMAV_SOFT_DEVICES=1 in the environment"));
	EXPECT_THAT(r.err, HasSubstr("openverbs-soft(7)"));
}

// Level 0 (the default) prints nothing.
TEST_F(Loader, EmptyListIsSilentByDefault)
{
	ProbeRun r = run("good", "", "0");
	EXPECT_THAT(r.out, HasSubstr("devices 0\n"));
	EXPECT_EQ(r.err, "");
}
