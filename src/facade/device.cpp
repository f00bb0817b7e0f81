// Device discovery entry points: ibv_get_device_list(3), ibv_free_device_list,
// ibv_get_device_name(3), ibv_get_device_guid(3), ibv_get_device_index(3),
// and the sysfs helpers of the 1.0 and private ABIs.
#include "core/context.h"
#include "core/device_list.h"
#include "core/settings.h"
#include "core/sysfs.h"
#include "facade/export.h"

#include <infiniband/driver.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <endian.h>
#include <fcntl.h>
#include <mutex>

namespace {
std::mutex g_guid_lock; // serialises the lazy node_guid read
}

// Returns a NULL-terminated array of the devices present now (each held
// until ibv_free_device_list). Fields used: none. *num_devices (optional)
// gets the count, and 0 on failure (as rdma-core's libibverbs/device.c sets
// it before anything can fail). No RDMA support at all is not an error: an
// empty array comes back. Errors (NULL + errno): ENOMEM.
// Source: ibv_get_device_list(3).
OV_EXPORT_V11 struct ibv_device **ibv_get_device_list(int *num_devices)
{
	if (num_devices)
		*num_devices = 0;
	ov::core::library_init();
	std::vector<ibv_device *> devs;
	int rc;
	try {
		rc = ov::core::get_device_list(devs);
	} catch (...) {
		rc = ENOMEM;
	}
	if (rc) {
		errno = rc;
		return nullptr;
	}
	auto **list = static_cast<ibv_device **>(calloc(devs.size() + 1, sizeof(ibv_device *)));
	if (!list) {
		for (ibv_device *d : devs)
			ov::core::device_put(d);
		errno = ENOMEM;
		return nullptr;
	}
	for (size_t i = 0; i < devs.size(); ++i)
		list[i] = devs[i];
	if (num_devices)
		*num_devices = static_cast<int>(devs.size());
	return list;
}

// Releases an array from ibv_get_device_list and the references it held;
// devices still opened stay valid. NULL is ignored.
// Source: ibv_free_device_list(3).
OV_EXPORT_V11 void ibv_free_device_list(struct ibv_device **list)
{
	if (!list)
		return;
	for (ibv_device **d = list; *d; ++d)
		ov::core::device_put(*d);
	free(list);
}

// The kernel name of the device (ibv_device.name, e.g. "rxe0").
// NULL device: NULL, errno EINVAL. Source: ibv_get_device_name(3).
OV_EXPORT_V11 const char *ibv_get_device_name(struct ibv_device *device)
{
	if (!device) {
		errno = EINVAL;
		return nullptr;
	}
	return device->name;
}

// Node GUID in network byte order: from netlink when discovery used it,
// else read once from <ibdev_path>/node_guid ("xxxx:xxxx:xxxx:xxxx").
// 0 when unknown (NULL device: errno EINVAL). Source: ibv_get_device_guid(3).
OV_EXPORT_V11 __be64 ibv_get_device_guid(struct ibv_device *device)
{
	if (!device) {
		errno = EINVAL;
		return 0;
	}
	verbs_sysfs_dev *sysfs = verbs_get_device(device)->sysfs;
	if (!sysfs)
		return 0;
	std::lock_guard<std::mutex> g(g_guid_lock);
	if (!(sysfs->flags & VSYSFS_READ_NODE_GUID)) {
		char buf[64];
		unsigned short part[4];
		char extra;
		std::string path = std::string(sysfs->ibdev_path) + "/node_guid";
		if (ov::core::read_attr_at(AT_FDCWD, path.c_str(), buf, sizeof(buf)) <= 0 ||
		    sscanf(buf, "%hx:%hx:%hx:%hx%c", &part[0], &part[1], &part[2], &part[3], &extra) != 4)
			return 0;
		uint64_t guid = 0;
		for (unsigned short p : part)
			guid = (guid << 16) | p;
		sysfs->node_guid = guid;
		sysfs->flags |= VSYSFS_READ_NODE_GUID;
	}
	return htobe64(sysfs->node_guid);
}

// The kernel's stable device index (netlink discovery), or -1 when the
// kernel gave none (sysfs discovery, software and provider-made devices).
// Source: ibv_get_device_index(3).
OV_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	if (!device) {
		errno = EINVAL;
		return -1;
	}
	verbs_sysfs_dev *sysfs = verbs_get_device(device)->sysfs;
	return sysfs ? sysfs->ibdev_idx : -1;
}

// The sysfs mount point libibverbs uses: $SYSFS_PATH without trailing '/'
// (ignored in setuid programs), else "/sys". Never NULL.
OV_EXPORT const char *ibv_get_sysfs_path(void)
{
	return ov::core::settings().sysfs_root.c_str();
}

// Reads <dir>/<file> into buf: length of the text (trailing newline
// removed, NUL-terminated), or -1 with errno (open/read errors; EOVERFLOW
// when the content does not fit; EINVAL on NULL arguments).
OV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	if (!dir || !file || !buf || !size) {
		errno = EINVAL;
		return -1;
	}
	char path[4096];
	int n = snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (n < 0 || static_cast<size_t>(n) >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return static_cast<int>(ov::core::read_attr_at(AT_FDCWD, path, buf, size));
}

// Reads <sysfs_dev->ibdev_path>/<fnfmt...> like ibv_read_sysfs_file.
// -1 with errno EINVAL on NULL arguments, ENAMETOOLONG on an oversized path.
OV_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size, struct verbs_sysfs_dev *sysfs_dev,
					const char *fnfmt, ...)
{
	if (!buf || !size || !sysfs_dev || !fnfmt) {
		errno = EINVAL;
		return -1;
	}
	char rel[1024];
	va_list ap;
	va_start(ap, fnfmt);
	int n = vsnprintf(rel, sizeof(rel), fnfmt, ap);
	va_end(ap);
	if (n < 0 || static_cast<size_t>(n) >= sizeof(rel)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return ibv_read_sysfs_file(sysfs_dev->ibdev_path, rel, buf, size);
}

// Default versions of the verbs that also have an @IBVERBS_1.0 twin.
OV_DEFAULT_VERSION_1_1(ibv_free_device_list);
OV_DEFAULT_VERSION_1_1(ibv_get_device_guid);
OV_DEFAULT_VERSION_1_1(ibv_get_device_list);
OV_DEFAULT_VERSION_1_1(ibv_get_device_name);
