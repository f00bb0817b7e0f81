// Finding the RDMA devices of the machine (facts 1.3).
//
// RDMA netlink first (RDMA_NLDEV_CMD_GET dump, then RDMA_NLDEV_CMD_GET_CHARDEV
// per device for the uverbs character device); the sysfs scan of
// $SYSFS_PATH/class/infiniband_verbs only when netlink itself fails (a
// successful dump with zero devices is final, as in rdma-core). Each entry is
// a calloc'ed verbs_sysfs_dev: ownership moves into verbs_device::sysfs once
// a provider accepts it, and the core frees it with free().
#pragma once

#include <infiniband/driver.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

struct nlmsghdr;

namespace ov::core {

struct FreeSysfsDev {
	void operator()(verbs_sysfs_dev *p) const noexcept { free(p); }
};
using SysfsDevPtr = std::unique_ptr<verbs_sysfs_dev, FreeSysfsDev>;
using SysfsDevList = std::vector<SysfsDevPtr>;

// calloc'ed, zeroed entry (ibdev_idx -1, node_type IBV_NODE_UNKNOWN); nullptr
// on ENOMEM.
SysfsDevPtr new_sysfs_dev() noexcept;

enum class Source { none, netlink, sysfs };

// Netlink discovery. Returns 0 (list filled, possibly empty) or a negative
// errno when netlink is unusable here (no NETLINK_RDMA: -EPROTONOSUPPORT /
// -EOPNOTSUPP) or the dump failed; the list is then empty.
int discover_netlink(SysfsDevList &out);

// Sysfs discovery under `sysfs_root`. Returns 0 or a negative errno when the
// class directory cannot be read (-ENOSYS: no RDMA support at all). Entries
// whose attributes are missing or malformed are skipped with a diagnostic.
// Unchanged entries (same name, inode and ctime as in the previous scan) are
// copied from a per-process cache instead of being read again.
int discover_sysfs(const std::string &sysfs_root, SysfsDevList &out);

// Reads $SYSFS/class/infiniband_verbs/abi_version; 0 and *abi on success.
int read_uverbs_abi(const std::string &sysfs_root, unsigned *abi);

// Drops every entry whose /dev/infiniband/<sysfs_name> is absent (containers
// that hide the character device hide the device). Soft devices are kept.
void filter_accessible(const std::string &cdev_dir, SysfsDevList &devs);

// Appends the synthesised software devices soft0..soft(n-1); each one's sysfs_name
// (so ibv_device.dev_name) is its own name, its sysfs_cdev 0.
void add_soft_devices(unsigned n, const std::string &sysfs_root, SysfsDevList &out);
// RoCE v2 software devices sroce0, sroce1, ... for the interfaces `ifnames`
// (openverbs.h: VSYSFS_SOFT_ROCE, the interface in modalias).
void add_soft_roce_devices(const std::vector<std::string> &ifnames, const std::string &sysfs_root,
			   SysfsDevList &out);

// Whether the kernel enabled copy-on-fork for pinned pages
// (RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK). 0 and *on, or a negative errno.
int netlink_copy_on_fork(bool *on);

// The parsers behind discover_netlink, exposed for unit tests. They fill
// only the fields the message carries and return false (nothing changed in
// the caller's sense: the entry must be skipped) on a missing or malformed
// mandatory attribute.
bool parse_nldev_device(const nlmsghdr *hdr, verbs_sysfs_dev *dev);
bool parse_nldev_chardev(const nlmsghdr *hdr, verbs_sysfs_dev *dev);
bool parse_nldev_sys(const nlmsghdr *hdr, bool *copy_on_fork);

// Decodes the kernel's node type number (rdma_node_type) into ibv_node_type.
int decode_node_type(unsigned long kernel_type);

} // namespace ov::core
