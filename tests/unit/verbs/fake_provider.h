// A fake provider for the verbs unit tests: a verbs_device on a temporary
// sysfs folder, a context made by _verbs_init_and_alloc_context (cmd_fd -1)
// with an ops table of test doubles installed by verbs_set_ops, exactly as a
// provider's alloc_context does. The doubles record their arguments and fail
// on request (FakeState::fail_errno), so each verb's library part can be
// checked on its own.
#pragma once

#include <infiniband/driver.h>

#include <gtest/gtest.h>

#include <string>

namespace verbs_test {

struct FakeState {
	int fail_errno = 0;        // next op fails with this errno (then reset)
	int calls = 0;             // ops called so far
	size_t device_attr_size = 0;
	int link_layer = IBV_LINK_LAYER_INFINIBAND;
	int gid_tbl_len = 4;
	int last_access = 0;
	uint64_t last_iova = 0;
	int rereg_flags = -1;
	int cq_events = 0;
	int mcast_attached = 0;
	int last_cq_attr_cqe = 0;
	unsigned int last_data_in_order_flags = 0;
	int live_objects = 0;      // allocated by the fake and not freed yet
};

// The state of the fake currently installed (one fixture at a time).
FakeState &fake();

class VerbsTest : public ::testing::Test {
protected:
	void SetUp() override;
	void TearDown() override;

	// Writes <ibdev_path>/<rel> (folders created as needed).
	void write_sysfs(const std::string &rel, const std::string &content);
	// A GID entry in the fake sysfs: text like "fe80:0000:...", type string.
	void add_gid(int port, int index, const std::string &gid, const char *type,
		     const char *ndev = nullptr);

	struct ibv_context *ctx = nullptr;
	struct verbs_context *vctx = nullptr;
	std::string sysfs_dir;
	struct verbs_device *vdev = nullptr;
};

// GID text of an IPv4-mapped address (::ffff:a.b.c.d) as sysfs writes it.
std::string ipv4_gid_text(uint8_t a, uint8_t b, uint8_t c, uint8_t d);

} // namespace verbs_test
