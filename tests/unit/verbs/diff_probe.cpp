// verbs_diff_probe: one scenario of verb calls on a fake provider, printing
// what the application and the provider saw (arguments the library passes
// down, fields it fills in, return values, errno). It is linked against
// libibverbs.so.1 by name: the test DifferentialFake runs it once with
// Debian's library and once with ours (LD_LIBRARY_PATH) and compares.
#include "dl_env.h"

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <cstdarg>
#include <unistd.h>

using namespace verbs_dl;

namespace {

std::string g_log; // what the fake provider saw, appended by the ops

void logf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void logf(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	g_log += buf;
	g_log += ';';
}

int d_query_device_ex(struct ibv_context *, const struct ibv_query_device_ex_input *input,
		      struct ibv_device_attr_ex *attr, size_t size)
{
	logf("query_device_ex input=%d size=%zu", input != nullptr, size);
	memset(attr, 0, size);
	attr->orig_attr.max_qp = 9;
	return 0;
}
int d_query_port(struct ibv_context *, uint8_t port, struct ibv_port_attr *attr)
{
	unsigned char first = *reinterpret_cast<unsigned char *>(attr);
	logf("query_port %u zeroed=%d", port, first == 0);
	attr->state = IBV_PORT_ACTIVE;
	attr->flags = 3;
	attr->port_cap_flags2 = 0x77;
	return 0;
}
struct ibv_pd *d_alloc_pd(struct ibv_context *)
{
	return static_cast<struct ibv_pd *>(calloc(1, sizeof(struct ibv_pd)));
}
int d_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}
struct ibv_mr *d_reg_mr(struct ibv_pd *, void *addr, size_t len, uint64_t iova, int access)
{
	// The address varies from run to run: say only whether iova is it.
	if (iova == reinterpret_cast<uintptr_t>(addr))
		logf("reg_mr len=%zu iova=addr access=%x", len, access);
	else
		logf("reg_mr len=%zu iova=%llx access=%x", len, (unsigned long long)iova, access);
	auto *vmr = static_cast<struct verbs_mr *>(calloc(1, sizeof(struct verbs_mr)));
	vmr->access = access;
	return &vmr->ibv_mr;
}
int d_rereg_mr(struct verbs_mr *, int flags, struct ibv_pd *, void *, size_t, int access)
{
	logf("rereg flags=%x access=%x", flags, access);
	return EINVAL;
}
int d_dereg_mr(struct verbs_mr *vmr)
{
	free(vmr);
	return 0;
}
struct ibv_cq *d_create_cq(struct ibv_context *, int cqe, struct ibv_comp_channel *ch, int vec)
{
	logf("create_cq cqe=%d channel=%d vec=%d", cqe, ch != nullptr, vec);
	return static_cast<struct ibv_cq *>(calloc(1, sizeof(struct verbs_cq)));
}
struct ibv_cq_ex *d_create_cq_ex(struct ibv_context *, struct ibv_cq_init_attr_ex *attr)
{
	logf("create_cq_ex flags=%llx", (unsigned long long)attr->wc_flags);
	return reinterpret_cast<struct ibv_cq_ex *>(calloc(1, sizeof(struct verbs_cq)));
}
int d_destroy_cq(struct ibv_cq *cq)
{
	free(cq);
	return 0;
}
struct ibv_qp *d_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	auto *vqp = static_cast<struct verbs_qp *>(calloc(1, sizeof(struct verbs_qp)));
	vqp->qp.context = pd->context;
	vqp->qp.qp_type = attr->qp_type;
	return &vqp->qp;
}
int d_modify_qp(struct ibv_qp *, struct ibv_qp_attr *, int mask)
{
	logf("modify_qp mask=%x", mask);
	return mask & IBV_QP_PATH_MTU ? EINVAL : 0;
}
int d_query_qp(struct ibv_qp *, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *)
{
	attr->qp_state = IBV_QPS_RTS;
	logf("query_qp mask=%x", mask);
	return 0;
}
int d_destroy_qp(struct ibv_qp *qp)
{
	free(qp);
	return 0;
}
struct ibv_ah *d_create_ah(struct ibv_pd *, struct ibv_ah_attr *attr)
{
	logf("create_ah dlid=%u sl=%u global=%u port=%u", attr->dlid, attr->sl, attr->is_global, attr->port_num);
	return static_cast<struct ibv_ah *>(calloc(1, sizeof(struct ibv_ah)));
}
int d_destroy_ah(struct ibv_ah *ah)
{
	free(ah);
	return 0;
}

struct verbs_context_ops make_ops()
{
	struct verbs_context_ops o = {};
	o.query_device_ex = d_query_device_ex;
	o.query_port = d_query_port;
	o.alloc_pd = d_alloc_pd;
	o.dealloc_pd = d_dealloc_pd;
	o.reg_mr = d_reg_mr;
	o.rereg_mr = d_rereg_mr;
	o.dereg_mr = d_dereg_mr;
	o.create_cq = d_create_cq;
	o.create_cq_ex = d_create_cq_ex;
	o.destroy_cq = d_destroy_cq;
	o.create_qp = d_create_qp;
	o.modify_qp = d_modify_qp;
	o.query_qp = d_query_qp;
	o.destroy_qp = d_destroy_qp;
	o.create_ah = d_create_ah;
	o.destroy_ah = d_destroy_ah;
	return o;
}
const struct verbs_context_ops kOps = make_ops();

// The scenario: applications' calls, with everything observable logged.
void scenario(struct ibv_context *ctx)
{
	struct ibv_device_attr dattr;
	errno = 0;
	int r = ibv_query_device(ctx, &dattr);
	logf("query_device=%d max_qp=%d", r, dattr.max_qp);

	// The macro (size-aware slot) and the exported function.
	unsigned char big[sizeof(struct ibv_port_attr) + 4];
	memset(big, 0xcc, sizeof(big));
	r = ibv_query_port(ctx, 1, reinterpret_cast<struct ibv_port_attr *>(big));
	logf("query_port macro=%d flags=%u cap2=%x tail=%x", r, big[47], big[48], big[sizeof(big) - 1]);
	memset(big, 0xcc, sizeof(big));
#undef ibv_query_port
	r = ibv_query_port(ctx, 1, reinterpret_cast<struct _compat_ibv_port_attr *>(big));
	logf("query_port exported=%d flags=%u byte48=%x", r, big[47], big[48]);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	logf("pd ctx_ok=%d", pd && pd->context == ctx);
	static char buf[8192];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING);
	logf("mr fields=%d", mr && mr->pd == pd && mr->context == ctx && mr->addr == buf && mr->length == 4096);
	struct ibv_mr *mr2 = ibv_reg_mr_iova(pd, buf, 64, 0x1000, IBV_ACCESS_LOCAL_WRITE);
	errno = 0;
	r = ibv_rereg_mr(mr2, 0x40, nullptr, nullptr, 0, 0);
	logf("rereg bad flags=%d errno=%d", r, errno);
	errno = 0;
	r = ibv_rereg_mr(mr2, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 0, 0);
	logf("rereg no addr=%d errno=%d", r, errno);
	errno = 0;
	r = ibv_rereg_mr(mr2, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, buf, 0, 0);
	logf("rereg no len=%d errno=%d", r, errno);
	errno = 0;
	r = ibv_rereg_mr(mr2, 0, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE);
	logf("rereg access without flag=%d errno=%d", r, errno);
	r = ibv_rereg_mr(mr2, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE);
	logf("rereg provider refuses=%d", r);
	logf("dereg=%d,%d", ibv_dereg_mr(mr2), ibv_dereg_mr(mr));

	int cookie;
	struct ibv_cq *cq = ibv_create_cq(ctx, 7, &cookie, nullptr, 2);
	logf("cq fields=%d", cq && cq->context == ctx && cq->cq_context == &cookie && !cq->channel &&
				     cq->comp_events_completed == 0 && cq->async_events_completed == 0);
	struct ibv_cq_init_attr_ex cqa = {};
	cqa.cqe = 4;
	cqa.wc_flags = 1ULL << 20;
	errno = 0;
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &cqa);
	logf("cq_ex bad flags=%d errno=%d", cqx != nullptr, errno);
	cqa.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
	cqa.cq_context = &cookie;
	cqx = ibv_create_cq_ex(ctx, &cqa);
	logf("cq_ex ok=%d ctx=%d", cqx != nullptr,
	     cqx && ibv_cq_ex_to_cq(cqx)->cq_context == &cookie && ibv_cq_ex_to_cq(cqx)->context == ctx);
	if (cqx)
		logf("destroy cq_ex=%d", ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)));

	struct ibv_qp_init_attr qia = {};
	qia.send_cq = cq;
	qia.recv_cq = cq;
	qia.qp_type = IBV_QPT_RC;
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);
	struct ibv_qp_attr a = {};
	a.qp_state = IBV_QPS_INIT;
	r = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	logf("modify init=%d state=%d", r, qp->state);
	a.qp_state = IBV_QPS_RTR;
	r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PATH_MTU);
	logf("modify refused=%d state=%d", r, qp->state);
	struct ibv_qp_init_attr qi;
	r = ibv_query_qp(qp, &a, IBV_QP_CAP, &qi);
	logf("query without state=%d state=%d", r, qp->state);
	r = ibv_query_qp(qp, &a, IBV_QP_STATE, &qi);
	logf("query with state=%d state=%d", r, qp->state);
	logf("qp_ex=%d", ibv_qp_to_qp_ex(qp) != nullptr);
	struct ibv_ece ece = {};
	errno = 0;
	r = ibv_set_ece(qp, &ece);
	logf("set_ece no vendor=%d errno=%d", r, errno);

	struct ibv_wc wc = {};
	wc.slid = 0x21;
	wc.sl = 3;
	wc.dlid_path_bits = 1;
	struct ibv_grh grh = {};
	struct ibv_ah *ah = ibv_create_ah_from_wc(pd, &wc, &grh, 1);
	logf("ah from wc=%d fields=%d", ah != nullptr, ah && ah->pd == pd && ah->context == ctx);
	if (ah)
		ibv_destroy_ah(ah);
	logf("destroy qp=%d cq=%d pd=%d", ibv_destroy_qp(qp), ibv_destroy_cq(cq), ibv_dealloc_pd(pd));
	logf("fork status=%d", ibv_is_fork_initialized());
}

} // namespace

int main()
{
	Lib &lib = current_lib();
	lib.init_and_alloc = _verbs_init_and_alloc_context;
	lib.set_ops = verbs_set_ops;
	lib.uninit = verbs_uninit_context;
	struct verbs_device *vdev = fake_device(&kOps);
	struct ibv_context *ctx = ibv_open_device(&vdev->device);
	if (!ctx) {
		printf("open failed errno=%d\n", errno);
		return 1;
	}
	scenario(ctx);
	logf("close=%d", ibv_close_device(ctx));
	for (char &c : g_log)
		if (c == ';')
			c = '\n';
	fputs(g_log.c_str(), stdout);
	return 0;
}
