// Kernel transport: RDMA_VERBS_IOCTL, write(), extended write, the
// INVOKE_WRITE tunnel and the per-context ioctl→write fallback.
// Wire formats: <rdma/rdma_user_ioctl_cmds.h> (ioctl), <rdma/ib_user_verbs.h>
// (write); command buffer layout: cmd_ioctl.h (IBVERBS_PRIVATE_34).
#include "kernel/transport.h"

#include "core/context_private.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace ov::kernel {

namespace {

int real_ioctl(int fd, unsigned long request, void *arg)
{
	return ::ioctl(fd, request, arg);
}

ssize_t real_write(int fd, const void *buf, size_t count)
{
	return ::write(fd, buf, count);
}


constexpr uint8_t kNoIndex = 0xFF; // _UHW_NO_INDEX

struct verbs_ex_private *priv_of(struct ibv_context *ctx) noexcept
{
	struct verbs_context *vctx = verbs_get_ctx(ctx);
	return vctx ? vctx->priv : nullptr;
}

// The ib_uverbs_cmd_hdr that precedes a legacy core payload.
struct ib_uverbs_cmd_hdr *hdr_before(void *core) noexcept
{
	return reinterpret_cast<struct ib_uverbs_cmd_hdr *>(static_cast<char *>(core) - kHdrSize);
}

struct ExHdrs {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
};
static_assert(sizeof(ExHdrs) == kExHdrSize, "extended write header is 24 bytes");

ExHdrs *ex_hdr_before(void *core) noexcept
{
	return reinterpret_cast<ExHdrs *>(static_cast<char *>(core) - kExHdrSize);
}

int do_write(int fd, const void *buf, size_t len) noexcept
{
	ssize_t n = g_syscalls.write(fd, buf, len);
	if (n < 0)
		return errno ? errno : EIO;
	if ((size_t)n != len)
		return fail(EIO);
	return 0;
}

// The context can tunnel write commands through INVOKE_WRITE. Asked only
// off the fast path (a write() refused with EACCES, a size that is not whole
// words), so the kernel is probed on the first question, not at every open.
bool has_tunnel(struct ibv_context *ctx) noexcept
{
	struct verbs_ex_private *priv = priv_of(ctx);
	if (!priv)
		return false;
	uint8_t known = __atomic_load_n(&priv->ioctl_write, __ATOMIC_RELAXED);
	if (known == kIoctlWriteUnknown) {
		known = kernel_cmd_fd(ctx) && probe_ioctl_write(ctx->cmd_fd, priv->driver_id) ? kIoctlWriteYes
											   : kIoctlWriteNo;
		__atomic_store_n(&priv->ioctl_write, known, __ATOMIC_RELAXED);
	}
	return known == kIoctlWriteYes;
}

// INVOKE_WRITE: a write command carried by ioctl attributes.
int ioctl_write(struct ibv_context *ctx, uint32_t write_method, const void *req, size_t core_req_size,
		size_t req_size, void *resp, size_t core_resp_size, size_t resp_size) noexcept
{
	CommandBuffer cmdb(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE, 5);
	if (!cmdb.ok())
		return fail(ENOMEM);

	const char *in = static_cast<const char *>(req);
	char *out = static_cast<char *>(resp);

	cmdb.const_in(UVERBS_ATTR_WRITE_CMD, write_method);
	if (core_req_size)
		cmdb.in(UVERBS_ATTR_CORE_IN, in, core_req_size);
	if (core_resp_size)
		cmdb.out(UVERBS_ATTR_CORE_OUT, out, core_resp_size);
	if (req_size > core_req_size)
		cmdb.in(UVERBS_ATTR_UHW_IN, in + core_req_size, req_size - core_req_size);
	if (resp_size > core_resp_size)
		cmdb.out(UVERBS_ATTR_UHW_OUT, out + core_resp_size, resp_size - core_resp_size);

	return run_ioctl(ctx, cmdb.get());
}

} // namespace

Syscalls g_syscalls = {real_ioctl, real_write};

Syscalls &syscalls() noexcept
{
	return g_syscalls;
}

ScopedSyscalls::ScopedSyscalls(const Syscalls &replacement) noexcept : saved_(g_syscalls)
{
	g_syscalls = replacement;
}

ScopedSyscalls::~ScopedSyscalls()
{
	g_syscalls = saved_;
}

bool destroy_failed(int *ret) noexcept
{
	if (*ret == EIO && verbs_allow_disassociate_destroy) {
		*ret = 0;
		return true;
	}
	return *ret != 0;
}

// ---------------------------------------------------------------------------
// Command buffers.

unsigned int final_num_attrs(unsigned int num_attrs, const struct ibv_command_buffer *link) noexcept
{
	for (; link; link = link->next)
		num_attrs += (unsigned int)(link->next_attr - link->hdr.attrs);
	return num_attrs;
}

void CommandBuffer::set_uhw(const void *req, size_t core_req_size, size_t req_size, void *resp,
			    size_t core_resp_size, size_t resp_size) noexcept
{
	if (req && core_req_size < req_size) {
		struct ib_uverbs_attr *attr = in_uhw(UVERBS_ATTR_UHW_IN,
						     static_cast<const char *>(req) + core_req_size,
						     req_size - core_req_size);
		if (attr) {
			cmd_->uhw_in_idx = (uint8_t)(attr - cmd_->hdr.attrs);
			cmd_->uhw_in_headroom_dwords = (uint8_t)(core_req_size / 4);
		}
	}
	if (resp && core_resp_size < resp_size) {
		struct ib_uverbs_attr *attr = out(UVERBS_ATTR_UHW_OUT,
						  static_cast<char *>(resp) + core_resp_size,
						  resp_size - core_resp_size);
		if (attr) {
			cmd_->uhw_out_idx = (uint8_t)(attr - cmd_->hdr.attrs);
			cmd_->uhw_out_headroom_dwords = (uint8_t)(core_resp_size / 4);
		}
	}
}

// ---------------------------------------------------------------------------
// RDMA_VERBS_IOCTL.

namespace {

// The body of run_ioctl_fd, inlined into ioctl_or_legacy as well (the path
// of every ioctl method of the verbs).
[[gnu::always_inline]] inline int send_ioctl(int fd, uint32_t driver_id, struct ibv_command_buffer *cmd) noexcept
{
	if (!cmd)
		return fail(EINVAL);
	// A fill helper was given something that cannot be marshalled.
	if (cmd->buffer_error)
		return fail(EINVAL);

	// Linearise the chained buffers after our own attributes.
	struct ib_uverbs_attr *end = cmd->next_attr;
	unsigned int uhw_in = cmd->uhw_in_idx;
	struct ibv_command_buffer *const chain = cmd->next;
	for (struct ibv_command_buffer *link = chain; link; link = link->next) {
		ptrdiff_t count = link->next_attr - link->hdr.attrs;
		if (count < 0 || end + count > cmd->last_attr)
			return fail(ENOSPC);
		if (link->uhw_in_idx != kNoIndex)
			uhw_in = link->uhw_in_idx + (unsigned int)(end - cmd->hdr.attrs);
		for (struct ib_uverbs_attr *cur = link->hdr.attrs; cur != link->next_attr; ++cur)
			*end++ = *cur;
	}

	size_t num = (size_t)(end - cmd->hdr.attrs);
	size_t length = sizeof(cmd->hdr) + num * sizeof(struct ib_uverbs_attr);
	if (length > UINT16_MAX)
		return fail(EINVAL);
	cmd->hdr.num_attrs = (uint16_t)num;

	// The UHW_IN is kept as a pointer (the legacy fallback needs it) and is
	// only now inlined when it is short enough, as the kernel expects.
	if (uhw_in != kNoIndex && uhw_in < num) {
		struct ib_uverbs_attr *uhw = &cmd->hdr.attrs[uhw_in];
		if (uhw->attr_id == UVERBS_ATTR_UHW_IN && uhw->len <= sizeof(uhw->data)) {
			uint64_t inl = 0;
			std::memcpy(&inl, (const void *)(uintptr_t)uhw->data, uhw->len);
			uhw->data = inl;
		}
	}

	cmd->hdr.length = (uint16_t)length;
	cmd->hdr.reserved1 = 0;
	cmd->hdr.reserved2 = 0;
	cmd->hdr.driver_id = driver_id;

	if (g_syscalls.ioctl(fd, RDMA_VERBS_IOCTL, &cmd->hdr)) {
		int err = errno ? errno : EIO;
		return fail(err);
	}

	// Hand the kernel's outputs (IDR/FD values, VALID_OUTPUT flags) back to
	// the buffers they came from so read_attr_* on them sees the results.
	if (!chain)
		return 0;
	end = cmd->next_attr;
	for (struct ibv_command_buffer *link = chain; link; link = link->next)
		for (struct ib_uverbs_attr *cur = link->hdr.attrs; cur != link->next_attr; ++cur)
			*cur = *end++;
	return 0;
}

} // namespace

int run_ioctl_fd(int fd, uint32_t driver_id, struct ibv_command_buffer *cmd) noexcept
{
	return send_ioctl(fd, driver_id, cmd);
}

int run_ioctl(struct ibv_context *context, struct ibv_command_buffer *cmd) noexcept
{
	if (!context)
		return fail(EINVAL);
	struct verbs_ex_private *priv = priv_of(context);
	return run_ioctl_fd(context->cmd_fd, priv ? priv->driver_id : 0, cmd);
}

namespace {

// A method with a single attribute, laid out by hand (header + one
// ib_uverbs_attr): the probe and the async-fd allocation run in every
// ibv_open_device.
struct OneAttrIoctl {
	alignas(struct ib_uverbs_ioctl_hdr) unsigned char raw[sizeof(struct ib_uverbs_ioctl_hdr) +
								sizeof(struct ib_uverbs_attr)];
	struct ib_uverbs_ioctl_hdr *hdr() noexcept { return reinterpret_cast<struct ib_uverbs_ioctl_hdr *>(raw); }
	struct ib_uverbs_attr *attr() noexcept { return hdr()->attrs; }

	OneAttrIoctl(uint16_t object_id, uint16_t method_id, uint32_t driver_id, uint16_t attr_id, uint16_t len,
		     uint64_t data) noexcept
	{
		struct ib_uverbs_ioctl_hdr *h = hdr();
		*h = {};
		h->length = sizeof(raw);
		h->object_id = object_id;
		h->method_id = method_id;
		h->num_attrs = 1;
		h->driver_id = driver_id;
		struct ib_uverbs_attr *a = attr();
		*a = {};
		a->attr_id = attr_id;
		a->len = len;
		a->flags = UVERBS_ATTR_F_MANDATORY;
		a->data = data;
	}
	// 0 or the kernel's errno (errno is left alone).
	int run(int fd) noexcept
	{
		if (!g_syscalls.ioctl(fd, RDMA_VERBS_IOCTL, hdr()))
			return 0;
		return errno ? errno : EIO;
	}
};

} // namespace

bool probe_ioctl_write(int cmd_fd, uint32_t driver_id) noexcept
{
	if (cmd_fd < 0)
		return false;
	int saved = errno;
	// No CORE_IN: a kernel with the tunnel answers ENOSPC (request too short).
	OneAttrIoctl probe(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE, driver_id, UVERBS_ATTR_WRITE_CMD,
			   sizeof(uint64_t), IB_USER_VERBS_CMD_QUERY_DEVICE);
	int rc = probe.run(cmd_fd);
	errno = saved;
	return rc != EPROTONOSUPPORT && rc != ENOTTY;
}

bool probe_ioctl_write(int cmd_fd) noexcept
{
	return probe_ioctl_write(cmd_fd, 0);
}

int alloc_async_fd(struct ibv_context *context) noexcept
{
	if (!context)
		return fail(EINVAL);
	struct verbs_ex_private *priv = priv_of(context);
	// The FD_OUT attribute: data 0, the kernel writes the new fd there.
	OneAttrIoctl cmd(UVERBS_OBJECT_ASYNC_EVENT, UVERBS_METHOD_ASYNC_EVENT_ALLOC, priv ? priv->driver_id : 0,
			 UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, 0, 0);
	if (int ret = cmd.run(context->cmd_fd))
		return fail(ret);
	context->async_fd = read_fd(cmd.attr());
	return 0;
}

// ---------------------------------------------------------------------------
// Fallback.

Fallback legacy_mode(const struct ibv_command_buffer *cmdb, int *ret) noexcept
{
	bool require_ex = cmdb->fallback_require_ex;
	bool ioctl_only = cmdb->fallback_ioctl_only;

	for (const struct ibv_command_buffer *link = cmdb->next; link; link = link->next) {
		for (const struct ib_uverbs_attr *cur = link->hdr.attrs; cur != link->next_attr; ++cur) {
			if (cur->attr_id != UVERBS_ATTR_UHW_IN && cur->attr_id != UVERBS_ATTR_UHW_OUT &&
			    (cur->flags & UVERBS_ATTR_F_MANDATORY)) {
				*ret = fail(EOPNOTSUPP);
				return Fallback::Error;
			}
		}
		require_ex |= link->fallback_require_ex;
		ioctl_only |= link->fallback_ioctl_only;
	}
	if (ioctl_only) {
		*ret = fail(EOPNOTSUPP);
		return Fallback::Error;
	}
	return require_ex ? Fallback::TryWriteEx : Fallback::TryWrite;
}

Fallback ioctl_or_legacy(struct ibv_context *ctx, unsigned int cmd_bit,
				struct ibv_command_buffer *cmdb, int *ret) noexcept
{
	struct verbs_ex_private *priv = priv_of(ctx);
	if (!priv) {
		*ret = fail(EINVAL);
		return Fallback::Error;
	}
	uint64_t *bits = priv->unsupported_ioctls;
	constexpr size_t kWords = sizeof(priv->unsupported_ioctls) / sizeof(uint64_t);

	if (bits[cmd_bit / 64] & (1ULL << (cmd_bit % 64)))
		return legacy_mode(cmdb, ret);

	*ret = send_ioctl(ctx->cmd_fd, priv->driver_id, cmdb);
	if (*ret == 0)
		return Fallback::Success;

	if (*ret == ENOTTY) {
		// No ioctl framework at all: every op goes legacy from now on.
		for (size_t i = 0; i < kWords; ++i)
			bits[i] = 0;
		for (size_t i = 0; i < kVerbsOpsCount; ++i)
			bits[i / 64] |= 1ULL << (i % 64);
		return legacy_mode(cmdb, ret);
	}
	if (*ret == EPROTONOSUPPORT) {
		// The framework exists but not this method (or a mandatory attribute).
		bits[cmd_bit / 64] |= 1ULL << (cmd_bit % 64);
		return legacy_mode(cmdb, ret);
	}
	return Fallback::Error;
}

// ---------------------------------------------------------------------------
// write().

void *legacy_req(struct ibv_command_buffer *link, void *onstack, size_t core_size) noexcept
{
	size_t size = core_size + kHdrSize;
	struct ib_uverbs_cmd_hdr *hdr;

	if (link && link->uhw_in_idx != kNoIndex) {
		struct ib_uverbs_attr *uhw = &link->hdr.attrs[link->uhw_in_idx];
		if (uhw->attr_id != UVERBS_ATTR_UHW_IN || (size_t)link->uhw_in_headroom_dwords * 4 < size)
			return nullptr;
		hdr = reinterpret_cast<struct ib_uverbs_cmd_hdr *>((uintptr_t)uhw->data - size);
		hdr->in_words = (uint16_t)((size + uhw->len) / 4);
	} else {
		hdr = static_cast<struct ib_uverbs_cmd_hdr *>(onstack);
		hdr->in_words = (uint16_t)(size / 4);
	}
	return hdr + 1;
}

void *legacy_req_ex(struct ibv_command_buffer *link, void *onstack, size_t core_size) noexcept
{
	size_t full = core_size + kExHdrSize;
	ExHdrs *hdr;

	if (link && link->uhw_in_idx != kNoIndex) {
		struct ib_uverbs_attr *uhw = &link->hdr.attrs[link->uhw_in_idx];
		if (uhw->attr_id != UVERBS_ATTR_UHW_IN || (size_t)link->uhw_in_headroom_dwords * 4 < full)
			return nullptr;
		hdr = reinterpret_cast<ExHdrs *>((uintptr_t)uhw->data - full);
		hdr->hdr.in_words = (uint16_t)(core_size / 8);
		hdr->ex_hdr.provider_in_words = (uint16_t)(uhw->len / 8);
	} else {
		hdr = static_cast<ExHdrs *>(onstack);
		hdr->hdr.in_words = (uint16_t)(core_size / 8);
		hdr->ex_hdr.provider_in_words = 0;
	}
	return hdr + 1;
}

void *legacy_resp(struct ibv_command_buffer *link, void *req, void *onstack, size_t core_size) noexcept
{
	struct ib_uverbs_cmd_hdr *hdr = hdr_before(req);

	if (link && link->uhw_out_idx != kNoIndex) {
		struct ib_uverbs_attr *uhw = &link->hdr.attrs[link->uhw_out_idx];
		if (uhw->attr_id != UVERBS_ATTR_UHW_OUT || (size_t)link->uhw_out_headroom_dwords * 4 < core_size)
			return nullptr;
		hdr->out_words = (uint16_t)((core_size + uhw->len) / 4);
		return reinterpret_cast<void *>((uintptr_t)uhw->data - core_size);
	}
	hdr->out_words = (uint16_t)(core_size / 4);
	return onstack;
}

void *legacy_resp_ex(struct ibv_command_buffer *link, void *req, void *onstack, size_t core_size) noexcept
{
	ExHdrs *hdr = ex_hdr_before(req);

	hdr->hdr.out_words = (uint16_t)(core_size / 8);
	if (link && link->uhw_out_idx != kNoIndex) {
		struct ib_uverbs_attr *uhw = &link->hdr.attrs[link->uhw_out_idx];
		if (uhw->attr_id != UVERBS_ATTR_UHW_OUT || (size_t)link->uhw_out_headroom_dwords * 4 < core_size)
			return nullptr;
		hdr->ex_hdr.provider_out_words = (uint16_t)(uhw->len / 8);
		return reinterpret_cast<void *>((uintptr_t)uhw->data - core_size);
	}
	hdr->ex_hdr.provider_out_words = 0;
	return onstack;
}

int write_raw(uint32_t cmdnum, struct ibv_context *ctx, void *req, void *resp) noexcept
{
	struct ib_uverbs_cmd_hdr *hdr = hdr_before(req);
	hdr->command = cmdnum;
	// Callers read the response as if it had been zeroed first.
	if (resp)
		std::memset(resp, 0, (size_t)hdr->out_words * 4);
	return do_write(ctx->cmd_fd, hdr, (size_t)hdr->in_words * 4);
}

int write_bufs(uint32_t cmdnum, struct ibv_context *ctx, void *req, void *resp) noexcept
{
	uint64_t response = ptr_to_u64(resp);
	std::memcpy(req, &response, sizeof(response)); // every such request starts with `response`
	return write_raw(cmdnum, ctx, req, resp);
}

int write_raw_ex(uint32_t cmdnum, struct ibv_context *ctx, void *req, void *resp) noexcept
{
	ExHdrs *hdr = ex_hdr_before(req);
	size_t write_bytes = kExHdrSize + ((size_t)hdr->hdr.in_words + hdr->ex_hdr.provider_in_words) * 8;
	size_t resp_bytes = ((size_t)hdr->hdr.out_words + hdr->ex_hdr.provider_out_words) * 8;

	hdr->hdr.command = IB_USER_VERBS_CMD_FLAG_EXTENDED | cmdnum;
	hdr->ex_hdr.cmd_hdr_reserved = 0;
	hdr->ex_hdr.response = ptr_to_u64(resp);
	if (resp)
		std::memset(resp, 0, resp_bytes);
	return do_write(ctx->cmd_fd, hdr, write_bytes);
}

// Write commands go to the kernel through write() even when the context
// has the INVOKE_WRITE tunnel: the kernel runs the same handler with the
// same request, response and driver data either way (core sizes are the
// uapi structs on both paths), and write() costs a fraction of the
// userspace work of building an attribute chain. The one case where the
// two differ is a process whose credentials changed after the device was
// opened: the kernel then refuses write() with EACCES before looking at the
// command, and the tunnel is used instead. Sizes that are not whole words
// of the protocol (4 bytes, 8 for extended commands) cannot be expressed in
// a write() header; they also take the tunnel when there is one.
int send_write_slow(struct ibv_context *ctx, uint32_t method, void *req, size_t core_req_size,
		    size_t req_size, void *resp, size_t core_resp_size, size_t resp_size, ssize_t written) noexcept
{
	int ret;
	if (written == kWriteNotTried)
		ret = has_tunnel(ctx) ? EACCES : do_write(ctx->cmd_fd, req, req_size);
	else if (written < 0)
		ret = errno ? errno : EIO;
	else
		ret = EIO; // a short write
	if (ret == EACCES && has_tunnel(ctx))
		return ioctl_write(ctx, method, static_cast<char *>(req) + kHdrSize, core_req_size - kHdrSize,
				   req_size - kHdrSize, resp, core_resp_size, resp_size);
	return fail(ret);
}

int send_write_ex(struct ibv_context *ctx, uint32_t method, void *req, size_t core_req_size,
			 size_t req_size, void *resp, size_t core_resp_size, size_t resp_size) noexcept
{
	if (!ctx || !req || core_req_size < kExHdrSize || req_size < core_req_size ||
	    resp_size < core_resp_size || req_size / 8 > UINT16_MAX || resp_size / 8 > UINT16_MAX)
		return fail(EINVAL);

	bool whole = (((core_req_size - kExHdrSize) | (req_size - core_req_size) | core_resp_size |
		       (resp_size - core_resp_size)) & 7) == 0;
	if (!whole && has_tunnel(ctx))
		return ioctl_write(ctx, IB_USER_VERBS_CMD_FLAG_EXTENDED | method,
				   static_cast<char *>(req) + kExHdrSize, core_req_size - kExHdrSize,
				   req_size - kExHdrSize, resp, core_resp_size, resp_size);
	ExHdrs *hdr = static_cast<ExHdrs *>(req);
	hdr->hdr.command = IB_USER_VERBS_CMD_FLAG_EXTENDED | method;
	hdr->hdr.in_words = (uint16_t)((core_req_size - kExHdrSize) / 8);
	hdr->hdr.out_words = (uint16_t)(core_resp_size / 8);
	hdr->ex_hdr.provider_in_words = (uint16_t)((req_size - core_req_size) / 8);
	hdr->ex_hdr.provider_out_words = (uint16_t)((resp_size - core_resp_size) / 8);
	hdr->ex_hdr.response = ptr_to_u64(resp);
	hdr->ex_hdr.cmd_hdr_reserved = 0;
	// Old kernels do not clear the response; callers expect zeroes.
	if (resp)
		std::memset(resp, 0, resp_size);
	int ret = do_write(ctx->cmd_fd, req, req_size);
	if (ret == EACCES && has_tunnel(ctx))
		return ioctl_write(ctx, IB_USER_VERBS_CMD_FLAG_EXTENDED | method,
				   static_cast<char *>(req) + kExHdrSize, core_req_size - kExHdrSize,
				   req_size - kExHdrSize, resp, core_resp_size, resp_size);
	return ret ? fail(ret) : 0;
}

} // namespace ov::kernel
