// libFuzzer target: the RDMA netlink attribute sets of discovery
// (ov::core::parse_nldev_device, parse_nldev_chardev, parse_nldev_sys; the
// kernel's replies to RDMA_NLDEV_CMD_GET, _GET_CHARDEV and _SYS_GET).
// The input is the payload of one message (the attributes after struct
// nlmsghdr; RDMA netlink has no family header), wrapped in a header whose
// length covers it exactly, as libnl hands a received message to the
// callbacks. Checked beyond "no crash": whatever is accepted leaves
// NUL-terminated names inside their fields.
#include "core/discovery.h"

#include <linux/netlink.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {
void check_name(const char *s, size_t n)
{
	if (!memchr(s, '\0', n))
		abort();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 65536)
		return 0;
	std::vector<uint8_t> msg(NLMSG_HDRLEN + size);
	auto *hdr = reinterpret_cast<nlmsghdr *>(msg.data());
	hdr->nlmsg_len = static_cast<uint32_t>(msg.size());
	memcpy(msg.data() + NLMSG_HDRLEN, data, size);

	auto dev = ov::core::new_sysfs_dev();
	if (ov::core::parse_nldev_device(hdr, dev.get())) {
		check_name(dev->ibdev_name, sizeof(dev->ibdev_name));
		if (dev->ibdev_idx < 0 || dev->ibdev_name[0] == '\0')
			abort();
	}
	auto cdev = ov::core::new_sysfs_dev();
	if (ov::core::parse_nldev_chardev(hdr, cdev.get())) {
		check_name(cdev->sysfs_name, sizeof(cdev->sysfs_name));
		if (cdev->sysfs_name[0] == '\0')
			abort();
	}
	bool cof = false;
	ov::core::parse_nldev_sys(hdr, &cof);
	return 0;
}
