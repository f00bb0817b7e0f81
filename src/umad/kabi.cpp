// The ib_umad ioctls.  This is the only file of libibumad that includes the
// kernel's uapi header (its struct ib_user_mad would clash with umad.h's).
#include <rdma/ib_user_mad.h>
#include <rdma/rdma_user_ioctl.h>

#include <cstdint>
#include <cstring>
#include <sys/ioctl.h>

namespace ov::umad {

static_assert(sizeof(struct ib_user_mad_reg_req) == 28, "uapi layout");
static_assert(sizeof(struct ib_user_mad_reg_req2) == 40, "uapi layout");
static_assert(sizeof(struct ib_user_mad_hdr) == 64, "uapi layout");

int ioctl_enable_pkey(int fd) noexcept
{
	return ioctl(fd, IB_USER_MAD_ENABLE_PKEY, nullptr);
}

int ioctl_register(int fd, uint32_t *id, uint8_t qpn, uint8_t mgmt_class,
		   uint8_t mgmt_class_version, const uint8_t oui[3],
		   uint8_t rmpp_version, const void *method_mask16) noexcept
{
	struct ib_user_mad_reg_req req;
	memset(&req, 0, sizeof(req));
	if (method_mask16)
		memcpy(req.method_mask, method_mask16, sizeof(req.method_mask));
	req.qpn = qpn;
	req.mgmt_class = mgmt_class;
	req.mgmt_class_version = mgmt_class_version;
	memcpy(req.oui, oui, sizeof(req.oui));
	req.rmpp_version = rmpp_version;
	int r = ioctl(fd, IB_USER_MAD_REGISTER_AGENT, &req);
	if (r == 0)
		*id = req.id;
	return r;
}

int ioctl_register2(int fd, uint32_t *id, uint32_t *flags, uint32_t qpn,
		    uint8_t mgmt_class, uint8_t mgmt_class_version,
		    const uint64_t method_mask[2], uint32_t oui,
		    uint8_t rmpp_version) noexcept
{
	struct ib_user_mad_reg_req2 req;
	memset(&req, 0, sizeof(req));
	req.qpn = qpn;
	req.mgmt_class = mgmt_class;
	req.mgmt_class_version = mgmt_class_version;
	req.flags = *flags;
	memcpy(req.method_mask, method_mask, sizeof(req.method_mask));
	req.oui = oui;
	req.rmpp_version = rmpp_version;
	int r = ioctl(fd, IB_USER_MAD_REGISTER_AGENT2, &req);
	if (r == 0)
		*id = req.id;
	*flags = req.flags; // on EINVAL the kernel reports the flags it supports
	return r;
}

int ioctl_unregister(int fd, uint32_t *id) noexcept
{
	return ioctl(fd, IB_USER_MAD_UNREGISTER_AGENT, id);
}

} // namespace ov::umad
