#include "fake_provider.h"

#include "core/context_private.h"
#include "core/verbs/lib_ops.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace verbs_test {

namespace {

FakeState g_state;

// Returns true (and sets errno) when the test asked this call to fail.
bool should_fail()
{
	g_state.calls++;
	if (!g_state.fail_errno)
		return false;
	errno = g_state.fail_errno;
	g_state.fail_errno = 0;
	return true;
}

int fail_code()
{
	g_state.calls++;
	int e = g_state.fail_errno;
	g_state.fail_errno = 0;
	return e;
}

template <typename T> T *new_obj()
{
	g_state.live_objects++;
	return static_cast<T *>(calloc(1, sizeof(T)));
}

void free_obj(void *p)
{
	g_state.live_objects--;
	free(p);
}

struct FakeContext {
	int provider_private;
	struct verbs_context ibv_ctx;
};

void fake_free_context(struct ibv_context *ctx)
{
	auto *vctx = verbs_get_ctx(ctx);
	auto *fc = reinterpret_cast<FakeContext *>(reinterpret_cast<char *>(vctx) -
						   offsetof(FakeContext, ibv_ctx));
	verbs_uninit_context(vctx);
	free(fc);
}

int fake_query_device_ex(struct ibv_context *, const struct ibv_query_device_ex_input *,
			 struct ibv_device_attr_ex *attr, size_t attr_size)
{
	if (int e = fail_code())
		return e;
	g_state.device_attr_size = attr_size;
	memset(attr, 0, attr_size);
	strcpy(attr->orig_attr.fw_ver, "1.2.3");
	attr->orig_attr.phys_port_cnt = 1;
	attr->orig_attr.max_qp = 77;
	return 0;
}

int fake_query_port(struct ibv_context *, uint8_t port, struct ibv_port_attr *attr)
{
	if (int e = fail_code())
		return e;
	if (port != 1)
		return EINVAL;
	attr->state = IBV_PORT_ACTIVE;
	attr->gid_tbl_len = g_state.gid_tbl_len;
	attr->pkey_tbl_len = 2;
	attr->lid = 7;
	attr->link_layer = static_cast<uint8_t>(g_state.link_layer);
	attr->flags = 0x5a;
	attr->port_cap_flags2 = 0xabcd;
	return 0;
}

struct ibv_pd *fake_alloc_pd(struct ibv_context *)
{
	if (should_fail())
		return nullptr;
	auto *pd = new_obj<struct ibv_pd>();
	pd->handle = 11;
	return pd;
}

int fake_dealloc_pd(struct ibv_pd *pd)
{
	if (int e = fail_code())
		return e;
	free_obj(pd);
	return 0;
}

struct ibv_mr *fake_reg_mr(struct ibv_pd *, void *, size_t, uint64_t iova, int access)
{
	g_state.last_access = access;
	g_state.last_iova = iova;
	if (should_fail())
		return nullptr;
	auto *vmr = new_obj<struct verbs_mr>();
	vmr->mr_type = IBV_MR_TYPE_MR;
	vmr->access = access;
	vmr->ibv_mr.lkey = 0x100;
	vmr->ibv_mr.rkey = 0x200;
	vmr->ibv_mr.handle = 12;
	return &vmr->ibv_mr;
}

struct ibv_mr *fake_reg_dmabuf_mr(struct ibv_pd *, uint64_t, size_t, uint64_t iova, int, int access)
{
	g_state.last_access = access;
	g_state.last_iova = iova;
	if (should_fail())
		return nullptr;
	auto *vmr = new_obj<struct verbs_mr>();
	vmr->mr_type = IBV_MR_TYPE_DMABUF_MR;
	vmr->access = access;
	return &vmr->ibv_mr;
}

int fake_rereg_mr(struct verbs_mr *, int flags, struct ibv_pd *, void *, size_t, int access)
{
	g_state.rereg_flags = flags;
	g_state.last_access = access;
	return fail_code();
}

int fake_dereg_mr(struct verbs_mr *vmr)
{
	if (int e = fail_code())
		return e;
	free_obj(vmr);
	return 0;
}

struct ibv_cq *fake_create_cq(struct ibv_context *, int cqe, struct ibv_comp_channel *, int)
{
	if (should_fail())
		return nullptr;
	auto *cq = new_obj<struct verbs_cq>();
	cq->cq.cqe = cqe;
	cq->cq.handle = 13;
	return &cq->cq;
}

struct ibv_cq_ex *fake_create_cq_ex(struct ibv_context *, struct ibv_cq_init_attr_ex *attr)
{
	g_state.last_cq_attr_cqe = static_cast<int>(attr->cqe);
	if (should_fail())
		return nullptr;
	auto *cq = new_obj<struct verbs_cq>();
	cq->cq_ex.cqe = static_cast<int>(attr->cqe);
	return &cq->cq_ex;
}

int fake_resize_cq(struct ibv_cq *cq, int cqe)
{
	if (int e = fail_code())
		return e;
	cq->cqe = cqe;
	return 0;
}

int fake_destroy_cq(struct ibv_cq *cq)
{
	if (int e = fail_code())
		return e;
	free_obj(cq);
	return 0;
}

void fake_cq_event(struct ibv_cq *)
{
	g_state.cq_events++;
}

struct ibv_srq *fake_create_srq(struct ibv_pd *, struct ibv_srq_init_attr *attr)
{
	if (should_fail())
		return nullptr;
	auto *srq = new_obj<struct verbs_srq>();
	attr->attr.max_wr = 64; // granted size
	return &srq->srq;
}

int fake_modify_srq(struct ibv_srq *, struct ibv_srq_attr *, int)
{
	return fail_code();
}

int fake_query_srq(struct ibv_srq *, struct ibv_srq_attr *attr)
{
	if (int e = fail_code())
		return e;
	attr->max_wr = 64;
	return 0;
}

int fake_destroy_srq(struct ibv_srq *srq)
{
	if (int e = fail_code())
		return e;
	free_obj(srq);
	return 0;
}

// Like ibv_cmd_create_qp: the command layer fills the library fields.
struct ibv_qp *fake_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	if (should_fail())
		return nullptr;
	auto *vqp = new_obj<struct verbs_qp>();
	struct ibv_qp *qp = &vqp->qp;
	qp->context = pd->context;
	qp->qp_context = attr->qp_context;
	qp->pd = pd;
	qp->send_cq = attr->send_cq;
	qp->recv_cq = attr->recv_cq;
	qp->srq = attr->srq;
	qp->qp_type = attr->qp_type;
	qp->state = IBV_QPS_RESET;
	qp->qp_num = 0x123;
	qp->handle = 14;
	attr->cap.max_inline_data = 32;
	return qp;
}

struct {
	enum ibv_qp_state state = IBV_QPS_RESET;
} g_qp_hw;

int fake_query_qp(struct ibv_qp *, struct ibv_qp_attr *attr, int, struct ibv_qp_init_attr *init)
{
	if (int e = fail_code())
		return e;
	attr->qp_state = g_qp_hw.state;
	init->cap.max_send_wr = 8;
	init->sq_sig_all = 1;
	return 0;
}

int fake_modify_qp(struct ibv_qp *, struct ibv_qp_attr *attr, int mask)
{
	if (int e = fail_code())
		return e;
	if (mask & IBV_QP_STATE)
		g_qp_hw.state = attr->qp_state;
	return 0;
}

int fake_destroy_qp(struct ibv_qp *qp)
{
	if (int e = fail_code())
		return e;
	free_obj(reinterpret_cast<struct verbs_qp *>(qp));
	return 0;
}

int fake_query_ece(struct ibv_qp *, struct ibv_ece *ece)
{
	if (int e = fail_code())
		return e;
	ece->vendor_id = 0x15b3;
	return 0;
}

int fake_set_ece(struct ibv_qp *, struct ibv_ece *)
{
	return fail_code();
}

int fake_query_qp_data_in_order(struct ibv_qp *, enum ibv_wr_opcode, uint32_t flags)
{
	g_state.calls++;
	g_state.last_data_in_order_flags = flags;
	return 1;
}

struct ibv_ah *fake_create_ah(struct ibv_pd *, struct ibv_ah_attr *)
{
	if (should_fail())
		return nullptr;
	auto *ah = new_obj<struct ibv_ah>();
	ah->handle = 15;
	return ah;
}

int fake_destroy_ah(struct ibv_ah *ah)
{
	if (int e = fail_code())
		return e;
	free_obj(ah);
	return 0;
}

int fake_attach_mcast(struct ibv_qp *, const union ibv_gid *, uint16_t)
{
	if (int e = fail_code())
		return e;
	g_state.mcast_attached++;
	return 0;
}

int fake_detach_mcast(struct ibv_qp *, const union ibv_gid *, uint16_t)
{
	if (int e = fail_code())
		return e;
	g_state.mcast_attached--;
	return 0;
}

struct ibv_pd *fake_import_pd(struct ibv_context *ctx, uint32_t handle)
{
	if (should_fail())
		return nullptr;
	auto *pd = new_obj<struct ibv_pd>();
	pd->context = ctx; // providers fill the imported object
	pd->handle = handle;
	return pd;
}

void fake_unimport_pd(struct ibv_pd *pd)
{
	free_obj(pd);
}

struct ibv_mr *fake_import_mr(struct ibv_pd *pd, uint32_t handle)
{
	if (should_fail())
		return nullptr;
	auto *vmr = new_obj<struct verbs_mr>();
	vmr->mr_type = IBV_MR_TYPE_IMPORTED_MR;
	vmr->ibv_mr.handle = handle;
	vmr->ibv_mr.context = pd->context;
	vmr->ibv_mr.pd = pd;
	return &vmr->ibv_mr;
}

void fake_unimport_mr(struct ibv_mr *mr)
{
	free_obj(verbs_get_mr(mr));
}

const struct verbs_context_ops kFakeOps = [] {
	struct verbs_context_ops ops = {};
	ops.alloc_pd = fake_alloc_pd;
	ops.attach_mcast = fake_attach_mcast;
	ops.cq_event = fake_cq_event;
	ops.create_ah = fake_create_ah;
	ops.create_cq = fake_create_cq;
	ops.create_cq_ex = fake_create_cq_ex;
	ops.create_qp = fake_create_qp;
	ops.create_srq = fake_create_srq;
	ops.dealloc_pd = fake_dealloc_pd;
	ops.dereg_mr = fake_dereg_mr;
	ops.destroy_ah = fake_destroy_ah;
	ops.destroy_cq = fake_destroy_cq;
	ops.destroy_qp = fake_destroy_qp;
	ops.destroy_srq = fake_destroy_srq;
	ops.detach_mcast = fake_detach_mcast;
	ops.free_context = fake_free_context;
	ops.import_mr = fake_import_mr;
	ops.import_pd = fake_import_pd;
	ops.modify_qp = fake_modify_qp;
	ops.modify_srq = fake_modify_srq;
	ops.query_device_ex = fake_query_device_ex;
	ops.query_ece = fake_query_ece;
	ops.query_port = fake_query_port;
	ops.query_qp = fake_query_qp;
	ops.query_qp_data_in_order = fake_query_qp_data_in_order;
	ops.query_srq = fake_query_srq;
	ops.reg_dmabuf_mr = fake_reg_dmabuf_mr;
	ops.reg_mr = fake_reg_mr;
	ops.rereg_mr = fake_rereg_mr;
	ops.resize_cq = fake_resize_cq;
	ops.set_ece = fake_set_ece;
	ops.unimport_mr = fake_unimport_mr;
	ops.unimport_pd = fake_unimport_pd;
	return ops;
}();

struct verbs_context *fake_alloc_context(struct ibv_device *dev, int cmd_fd, void *)
{
	auto *fc = static_cast<FakeContext *>(_verbs_init_and_alloc_context(
		dev, cmd_fd, sizeof(FakeContext),
		reinterpret_cast<struct verbs_context *>(offsetof(FakeContext, ibv_ctx)), 0));
	if (!fc)
		return nullptr;
	verbs_set_ops(&fc->ibv_ctx, &kFakeOps);
	return &fc->ibv_ctx;
}

const struct verbs_device_ops kFakeDeviceOps = [] {
	struct verbs_device_ops ops = {};
	ops.name = "fake";
	ops.match_min_abi_version = 0;
	ops.match_max_abi_version = 100;
	ops.alloc_context = fake_alloc_context;
	return ops;
}();

} // namespace

FakeState &fake()
{
	return g_state;
}

void VerbsTest::SetUp()
{
	g_state = FakeState();
	g_qp_hw.state = IBV_QPS_RESET;
	char tmpl[] = "/tmp/ov-verbs-test-XXXXXX";
	ASSERT_NE(mkdtemp(tmpl), nullptr);
	sysfs_dir = tmpl;

	vdev = static_cast<struct verbs_device *>(calloc(1, sizeof(*vdev)));
	vdev->ops = &kFakeDeviceOps;
	vdev->refcount = 1; // the test's own reference: never dropped to zero
	vdev->device.node_type = IBV_NODE_CA;
	vdev->device.transport_type = IBV_TRANSPORT_IB;
	snprintf(vdev->device.name, sizeof(vdev->device.name), "fake0");
	snprintf(vdev->device.ibdev_path, sizeof(vdev->device.ibdev_path), "%s", sysfs_dir.c_str());

	vctx = fake_alloc_context(&vdev->device, -1, nullptr);
	ASSERT_NE(vctx, nullptr);
	// What the core's set_lib_ops does after alloc_context.
	vctx->create_cq_ex = ov::lib_create_cq_ex;
	vctx->query_port = ov::lib_query_port;
	ctx = &vctx->context;
	g_state.calls = 0;
}

void VerbsTest::TearDown()
{
	if (ctx)
		get_ops(ctx)->free_context(ctx);
	EXPECT_EQ(g_state.live_objects, 0) << "objects leaked by the test or the library";
	std::filesystem::remove_all(sysfs_dir);
	free(vdev);
}

void VerbsTest::write_sysfs(const std::string &rel, const std::string &content)
{
	std::filesystem::path p = std::filesystem::path(sysfs_dir) / rel;
	std::filesystem::create_directories(p.parent_path());
	std::ofstream(p) << content;
}

void VerbsTest::add_gid(int port, int index, const std::string &gid, const char *type,
			const char *ndev)
{
	const std::string base = "ports/" + std::to_string(port) + "/";
	write_sysfs(base + "gids/" + std::to_string(index), gid + "\n");
	if (type)
		write_sysfs(base + "gid_attrs/types/" + std::to_string(index), std::string(type) + "\n");
	if (ndev)
		write_sysfs(base + "gid_attrs/ndevs/" + std::to_string(index), std::string(ndev) + "\n");
}

std::string ipv4_gid_text(uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", a, b, c, d);
	return buf;
}

} // namespace verbs_test
