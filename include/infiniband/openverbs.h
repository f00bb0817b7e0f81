/* openverbs extensions to the provider-facing ABI of libibverbs.
 *
 * Nothing here exists in rdma-core 44: these are the few constants that the
 * openverbs core and its own providers (providers/soft) agree on. Debian's
 * providers never see them.
 */
#ifndef INFINIBAND_OPENVERBS_H
#define INFINIBAND_OPENVERBS_H

/* Driver id of the openverbs software device ("soft0", "soft1", ...).
 * Stored in verbs_sysfs_dev.driver_id of the synthesised entries and usable
 * in a VERBS_DRIVER_ID() match entry. The kernel's enum rdma_driver_id ends
 * far below this value (RDMA_DRIVER_MANA = 20 in Linux 6.1), so it can never
 * collide with a device the kernel reports. */
#define OPENVERBS_DRIVER_SOFT 0x4f56

/* Name prefix of the software devices; the soft provider matches them with
 * VERBS_NAME_MATCH(OPENVERBS_SOFT_NAME, NULL). */
#define OPENVERBS_SOFT_NAME "soft"

/* Bit in verbs_sysfs_dev.flags marking a synthesised software device: it has
 * no character device (sysfs_cdev 0, empty sysfs_name), the core opens it with
 * cmd_fd = -1 and allocates no async event fd for it. rdma-core uses bits 0
 * and 1 (VSYSFS_READ_MODALIAS, VSYSFS_READ_NODE_GUID). */
#define VSYSFS_SOFT (1U << 31)

/* Environment variable asking for N software devices (0 to 256); a config
 * file line "soft_devices N" in libibverbs.d does the same, the environment
 * wins. */
#define OPENVERBS_SOFT_DEVICES_ENV "RDMAV_SOFT_DEVICES"
#define OPENVERBS_MAX_SOFT_DEVICES 256

#endif /* INFINIBAND_OPENVERBS_H */
