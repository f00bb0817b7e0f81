#include "fake_kernel.h"

#include <cerrno>
#include <cstring>

namespace kt {

FakeKernel *FakeKernel::current = nullptr;

namespace {

int fake_ioctl(int fd, unsigned long request, void *arg)
{
	FakeKernel *k = FakeKernel::current;
	auto *hdr = static_cast<struct ib_uverbs_ioctl_hdr *>(arg);
	IoctlCall call;
	call.fd = fd;
	call.request = request;
	std::memcpy(call.hdr_raw, hdr, sizeof(call.hdr_raw));
	for (unsigned i = 0; i < hdr->num_attrs; ++i) {
		call.attrs.push_back(hdr->attrs[i]);
		const struct ib_uverbs_attr &a = hdr->attrs[i];
		std::vector<unsigned char> bytes;
		if (a.len > sizeof(a.data)) {
			const auto *p = reinterpret_cast<const unsigned char *>((uintptr_t)a.data);
			bytes.assign(p, p + a.len);
		}
		call.payload.push_back(std::move(bytes));
	}
	k->ioctls.push_back(std::move(call));
	int err = k->on_ioctl ? k->on_ioctl(hdr) : 0;
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

ssize_t fake_write(int fd, const void *buf, size_t len)
{
	FakeKernel *k = FakeKernel::current;
	WriteCall call;
	call.fd = fd;
	const auto *p = static_cast<const unsigned char *>(buf);
	call.bytes.assign(p, p + len);
	k->writes.push_back(std::move(call));
	int err = k->on_write ? k->on_write(buf, len) : 0;
	if (err) {
		errno = err;
		return -1;
	}
	return (ssize_t)len;
}

} // namespace

const struct ib_uverbs_attr *IoctlCall::find(uint16_t id) const
{
	for (const auto &a : attrs)
		if (a.attr_id == id)
			return &a;
	return nullptr;
}

FakeKernel::FakeKernel() : seam_(ov::kernel::Syscalls{fake_ioctl, fake_write})
{
	current = this;
}

FakeKernel::~FakeKernel()
{
	current = nullptr;
}

FakeContext::FakeContext(bool use_ioctl_write, uint32_t driver_id)
{
	vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	vctx.context.cmd_fd = 42;
	vctx.context.async_fd = 43;
	vctx.sz = sizeof(vctx);
	vctx.priv = &priv;
	priv.driver_id = driver_id;
	priv.ioctl_write = use_ioctl_write ? kIoctlWriteYes : kIoctlWriteNo;
}

struct ib_uverbs_attr *live_attr(struct ib_uverbs_ioctl_hdr *hdr, uint16_t id)
{
	for (unsigned i = 0; i < hdr->num_attrs; ++i)
		if (hdr->attrs[i].attr_id == id)
			return &hdr->attrs[i];
	return nullptr;
}

} // namespace kt
