/*
 * Differential probe of the static inline functions and macros of
 * <infiniband/verbs.h>.
 *
 * The same source is compiled twice: against openverbs' headers and
 * against Debian's rdma-core 44 headers.  Each build fills a fake
 * verbs_context (and ibv_qp_ex / ibv_cq_ex) with recording stubs, calls
 * every inline entry point in several situations (all slots present, one
 * slot NULL, a context whose sz is too small for the extensions, a context
 * that is not extended) and prints which slot was called, with which
 * arguments, and what came back (value, errno).  The exported functions an
 * inline may fall back to are defined here as recorders too, so no library
 * is linked.  The two outputs must be identical: that proves the inline
 * dispatch (slot offsets, argument order, fallbacks, errno contract) of
 * our header is the one compiled into applications by rdma-core 44's.
 */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

/* ---- objects the calls are made on, named in the output ---- */
static struct verbs_context *vctx;
static struct ibv_context *ctx;
static union {
	struct ibv_qp_ex qpx;
	char pad[512];
} qp_u;
static union {
	struct ibv_cq_ex cqx;
	char pad[512];
} cq_u;
static struct ibv_srq srq;
static struct ibv_wq wq, wq_made;
static struct ibv_pd pd, pd_other;
static struct ibv_mw mw;
static struct ibv_mr mr;
static struct ibv_dm dm;
static struct ibv_flow flow;
static struct ibv_flow_action action;
static struct ibv_counters counters;
static struct ibv_td td;
static struct ibv_xrcd xrcd;
static struct ibv_rwq_ind_table rwq_ind_table;
static char scratch[256];

#define K(o, n) { &(o), sizeof(o), n }
static const struct {
	const void *p;
	size_t size;
	const char *name;
} known[] = {
	K(qp_u, "qp"), K(cq_u, "cq"), K(srq, "srq"), K(wq, "wq"),
	K(wq_made, "wq_made"), K(pd, "pd"), K(pd_other, "pd_other"),
	K(mw, "mw"), K(mr, "mr"), K(dm, "dm"), K(flow, "flow"),
	K(action, "action"), K(counters, "counters"), K(td, "td"),
	K(xrcd, "xrcd"), K(rwq_ind_table, "rwq_ind_table"),
	K(scratch, "scratch"),
};

static void put_arg(long v)
{
	size_t i;

	if (ctx && v == (long)(uintptr_t)ctx) {
		printf(" ctx");
		return;
	}
	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		const char *b = known[i].p;

		if ((uintptr_t)v >= (uintptr_t)b &&
		    (uintptr_t)v < (uintptr_t)b + known[i].size) {
			printf(" %s+%ld", known[i].name, (long)((uintptr_t)v - (uintptr_t)b));
			return;
		}
	}
	if (v > -4096 && v < (1L << 32))
		printf(" %ld", v);
	else
		printf(" <ptr>");
}

/* ---- recording stubs ---- */
static long next_ret;
/*
 * How many arguments the slot being exercised takes: registers beyond the
 * callee's arity hold leftovers and must not be compared.
 */
static int nargs_to_show = 5;

static long record(const char *what, int slot, long a, long b, long c, long d,
		   long e)
{
	long args[5] = { a, b, c, d, e };
	int i;

	printf("    -> %s word %d (offset %d) args", what, slot, slot * 8);
	for (i = 0; i < nargs_to_show; i++)
		put_arg(args[i]);
	printf("\n");
	return next_ret;
}

#define STUB(n)                                                              \
	static long stub_##n(long a, long b, long c, long d, long e)          \
	{                                                                      \
		return record("slot", n, a, b, c, d, e);                       \
	}
#define STUB10(t)                                                            \
	STUB(t##0) STUB(t##1) STUB(t##2) STUB(t##3) STUB(t##4) STUB(t##5)     \
	STUB(t##6) STUB(t##7) STUB(t##8) STUB(t##9)
STUB(0) STUB(1) STUB(2) STUB(3) STUB(4) STUB(5) STUB(6) STUB(7) STUB(8) STUB(9)
STUB10(1) STUB10(2) STUB10(3) STUB10(4) STUB10(5) STUB10(6) STUB10(7)
STUB(80) STUB(81)

typedef long (*stub_fn)(long, long, long, long, long);
#define S10(t) stub_##t##0, stub_##t##1, stub_##t##2, stub_##t##3, stub_##t##4, \
	stub_##t##5, stub_##t##6, stub_##t##7, stub_##t##8, stub_##t##9
static const stub_fn stubs[82] = {
	stub_0, stub_1, stub_2, stub_3, stub_4, stub_5, stub_6, stub_7, stub_8, stub_9,
	S10(1), S10(2), S10(3), S10(4), S10(5), S10(6), S10(7), stub_80, stub_81,
};

/* ---- exported functions an inline may fall back to ---- */
static long rec_export(const char *name, long a, long b, long c, long d, long e)
{
	int saved = nargs_to_show;
	long r;

	nargs_to_show = 5;
	r = record(name, 0, a, b, c, d, e);
	nargs_to_show = saved;
	return r;
}

#define REC(name, a, b, c, d, e) rec_export(name, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e))

struct ibv_srq *ibv_create_srq(struct ibv_pd *p, struct ibv_srq_init_attr *a)
{
	return (struct ibv_srq *)REC("ibv_create_srq", p, a, 0, 0, 0);
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *p, struct ibv_qp_init_attr *a)
{
	return (struct ibv_qp *)REC("ibv_create_qp", p, a, 0, 0, 0);
}

int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	return (int)REC("ibv_query_device", c, a, 0, 0, 0);
}

int (ibv_query_port)(struct ibv_context *c, uint8_t port,
		     struct _compat_ibv_port_attr *a)
{
	return (int)REC("ibv_query_port(exported)", c, port, a, 0, 0);
}

struct ibv_mr *(ibv_reg_mr)(struct ibv_pd *p, void *addr, size_t len, int access)
{
	return (struct ibv_mr *)REC("ibv_reg_mr(exported)", p, addr, len, access, 0);
}

struct ibv_mr *(ibv_reg_mr_iova)(struct ibv_pd *p, void *addr, size_t len,
				 uint64_t iova, int access)
{
	return (struct ibv_mr *)REC("ibv_reg_mr_iova(exported)", p, addr, len, iova, access);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *p, void *addr, size_t len,
				uint64_t iova, unsigned int access)
{
	return (struct ibv_mr *)REC("ibv_reg_mr_iova2", p, addr, len, iova, access);
}

int _ibv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t idx,
		      struct ibv_gid_entry *e, uint32_t flags, size_t sz)
{
	printf("    (entry_size %zu)\n", sz);
	return (int)REC("_ibv_query_gid_ex", c, port, idx, e, flags);
}

ssize_t _ibv_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *e,
			     size_t max, uint32_t flags, size_t sz)
{
	return (ssize_t)REC("_ibv_query_gid_table", c, e, max, flags, sz);
}

/* ---- context set-up per scenario ---- */
enum scenario { FULL, NULL_SLOT, SMALL_SZ, NOT_EXTENDED };
static const char *const scen_name[] = { "full", "null-slot", "small-sz", "not-extended" };

static void *ctx_mem;

static void setup(enum scenario s, size_t null_off)
{
	size_t off;

	memset(ctx_mem, 0, 4096);
	vctx = (struct verbs_context *)ctx_mem;
	ctx = &vctx->context;
	/* extension slots below priv..sz, plus the live ibv_context_ops */
	for (off = 0; off < offsetof(struct verbs_context, _ABI_placeholder3); off += 8)
		if (off != offsetof(struct verbs_context, priv))
			memcpy((char *)vctx + off, &stubs[off / 8], sizeof(stub_fn));
	for (off = 0; off < sizeof(struct ibv_context_ops); off += 8)
		memcpy((char *)&ctx->ops + off, &stubs[(offsetof(struct verbs_context, context) + 8 + off) / 8],
		       sizeof(stub_fn));
	vctx->sz = sizeof(struct verbs_context);
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->cmd_fd = 3;
	ctx->async_fd = 4;
	if (s == NULL_SLOT)
		memset((char *)vctx + null_off, 0, 8);
	if (s == SMALL_SZ)
		vctx->sz = sizeof(struct ibv_context) + 16;
	if (s == NOT_EXTENDED)
		ctx->abi_compat = NULL;

	qp_u.qpx.qp_base.context = ctx;
	qp_u.qpx.qp_base.pd = &pd;
	cq_u.cqx.context = ctx;
	srq.context = ctx;
	wq.context = ctx;
	pd.context = ctx;
	mw.context = ctx;
	mw.pd = &pd;
	mw.type = IBV_MW_TYPE_1;
	mr.context = ctx;
	mr.pd = &pd;
	dm.context = ctx;
	flow.context = ctx;
	action.context = ctx;
	counters.context = ctx;
	td.context = ctx;
	xrcd.context = ctx;
	rwq_ind_table.context = ctx;
	/* provider entry points of the extended QP/CQ, and of the WQ/DM */
	for (off = offsetof(struct ibv_qp_ex, wr_atomic_cmp_swp); off < sizeof(struct ibv_qp_ex); off += 8)
		memcpy((char *)&qp_u + off, &stubs[off / 8], sizeof(stub_fn));
	for (off = offsetof(struct ibv_cq_ex, start_poll); off < sizeof(struct ibv_cq_ex); off += 8)
		memcpy((char *)&cq_u + off, &stubs[off / 8], sizeof(stub_fn));
	memcpy(&wq.post_recv, &stubs[offsetof(struct ibv_wq, post_recv) / 8], sizeof(stub_fn));
	memcpy(&dm.memcpy_to_dm, &stubs[offsetof(struct ibv_dm, memcpy_to_dm) / 8], sizeof(stub_fn));
	memcpy(&dm.memcpy_from_dm, &stubs[offsetof(struct ibv_dm, memcpy_from_dm) / 8], sizeof(stub_fn));
}

static void show_int(const char *fn, int r)
{
	printf("  %s = %d errno=%d\n", fn, r, errno);
}

static void show_ptr(const char *fn, const void *p)
{
	printf("  %s =", fn);
	put_arg((long)(uintptr_t)p);
	printf(" errno=%d\n", errno);
}

#define VOFF(m) offsetof(struct verbs_context, m)
#define OOFF(m) (offsetof(struct verbs_context, context) + offsetof(struct ibv_context, ops) + offsetof(struct ibv_context_ops, m))

/* Runs fn once in every scenario; in NULL_SLOT the named slot is cleared. */
#define CASE(name, off, nargs, body)                                          \
	do {                                                                  \
		int s_;                                                       \
		for (s_ = FULL; s_ <= NOT_EXTENDED; s_++) {                   \
			setup((enum scenario)s_, (off));                       \
			printf("%s [%s]\n", name, scen_name[s_]);              \
			errno = 12345;                                         \
			next_ret = 77;                                         \
			nargs_to_show = (nargs);                               \
			body;                                                  \
		}                                                             \
	} while (0)

int main(void)
{
	struct ibv_port_attr port_attr;
	struct ibv_gid_entry gid_entries[2];
	struct ibv_device_attr_ex dev_attr;
	struct ibv_query_device_ex_input qin = { 0 };
	struct ibv_srq_init_attr_ex srq_attr;
	struct ibv_qp_init_attr_ex qp_attr;
	struct ibv_send_wr swr, *bad_swr = NULL;
	struct ibv_recv_wr rwr, *bad_rwr = NULL;
	struct ibv_ops_wr op, *bad_op = NULL;
	struct ibv_mw_bind bind;
	struct ibv_wc wc;
	struct ibv_wc_tm_info tm;
	struct ibv_data_buf dbuf;
	struct ibv_sge sge;
	volatile unsigned int dyn_access = IBV_ACCESS_LOCAL_WRITE;
	uint32_t srq_num;
	int i;

	ctx_mem = aligned_alloc(64, 4096);
	printf("sizeof verbs_context %zu, context at %zu\n", sizeof(struct verbs_context), VOFF(context));

	CASE("verbs_get_ctx", 0, 0, put_arg((long)(uintptr_t)verbs_get_ctx(ctx)); printf("\n"));

	CASE("ibv_query_port", VOFF(query_port), 4, {
		memset(&port_attr, 0xab, sizeof(port_attr));
		next_ret = 0;
		show_int("ret", ibv_query_port(ctx, 1, &port_attr));
		printf("  attr.state byte after: %d\n", ((unsigned char *)&port_attr)[0]);
	});
	CASE("ibv_reg_mr const access", 0, 5, show_ptr("ret", ibv_reg_mr(&pd, scratch, 64, IBV_ACCESS_LOCAL_WRITE)));
	CASE("ibv_reg_mr optional access", 0, 5,
	     show_ptr("ret", ibv_reg_mr(&pd, scratch, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING)));
	CASE("ibv_reg_mr runtime access", 0, 5, show_ptr("ret", ibv_reg_mr(&pd, scratch, 64, dyn_access)));
	CASE("ibv_reg_mr_iova const access", 0, 5, show_ptr("ret", ibv_reg_mr_iova(&pd, scratch, 64, 4096, IBV_ACCESS_LOCAL_WRITE)));
	CASE("ibv_reg_mr_iova optional", 0, 5,
	     show_ptr("ret", ibv_reg_mr_iova(&pd, scratch, 64, 4096, IBV_ACCESS_RELAXED_ORDERING)));
	CASE("ibv_query_gid_ex", 0, 5, show_int("ret", ibv_query_gid_ex(ctx, 1, 2, gid_entries, 0)));
	CASE("ibv_query_gid_table", 0, 5, show_int("ret", (int)ibv_query_gid_table(ctx, gid_entries, 2, 0)));
	CASE("ibv_create_flow", VOFF(ibv_create_flow), 2, show_ptr("ret", ibv_create_flow(&qp_u.qpx.qp_base, (struct ibv_flow_attr *)scratch)));
	CASE("ibv_destroy_flow", VOFF(ibv_destroy_flow), 1, show_int("ret", ibv_destroy_flow(&flow)));
	CASE("ibv_create_flow_action_esp", VOFF(create_flow_action_esp), 2,
	     show_ptr("ret", ibv_create_flow_action_esp(ctx, (struct ibv_flow_action_esp_attr *)scratch)));
	CASE("ibv_modify_flow_action_esp", VOFF(modify_flow_action_esp), 2,
	     show_int("ret", ibv_modify_flow_action_esp(&action, (struct ibv_flow_action_esp_attr *)scratch)));
	CASE("ibv_destroy_flow_action", VOFF(destroy_flow_action), 1, show_int("ret", ibv_destroy_flow_action(&action)));
	CASE("ibv_open_xrcd", VOFF(open_xrcd), 2, show_ptr("ret", ibv_open_xrcd(ctx, (struct ibv_xrcd_init_attr *)scratch)));
	/* ibv_close_xrcd dereferences the extension unconditionally */
	setup(FULL, 0);
	printf("ibv_close_xrcd [full]\n");
	nargs_to_show = 1;
	show_int("ret", ibv_close_xrcd(&xrcd));
	CASE("ibv_alloc_mw", OOFF(alloc_mw), 2, show_ptr("ret", ibv_alloc_mw(&pd, IBV_MW_TYPE_2)));
	CASE("ibv_dealloc_mw", 0, 1, show_int("ret", ibv_dealloc_mw(&mw)));
	for (i = 0; i < 3; i++)
		printf("ibv_inc_rkey(%#x) = %#x\n", 0x12345600u + 0xfeu + i, ibv_inc_rkey(0x12345600u + 0xfeu + i));
	CASE("ibv_bind_mw ok", 0, 3, {
		memset(&bind, 0, sizeof(bind));
		bind.bind_info.mr = &mr;
		bind.bind_info.addr = 1;
		bind.bind_info.length = 2;
		show_int("ret", ibv_bind_mw(&qp_u.qpx.qp_base, &mw, &bind));
		mw.type = IBV_MW_TYPE_2;
		show_int("type2", ibv_bind_mw(&qp_u.qpx.qp_base, &mw, &bind));
		mw.type = IBV_MW_TYPE_1;
		bind.bind_info.mr = NULL;
		show_int("no mr, range", ibv_bind_mw(&qp_u.qpx.qp_base, &mw, &bind));
		bind.bind_info.addr = 0;
		bind.bind_info.length = 0;
		show_int("no mr, empty", ibv_bind_mw(&qp_u.qpx.qp_base, &mw, &bind));
		mr.pd = &pd_other;
		bind.bind_info.mr = &mr;
		show_int("other pd", ibv_bind_mw(&qp_u.qpx.qp_base, &mw, &bind));
		mr.pd = &pd;
	});
	CASE("ibv_create_cq_ex", VOFF(create_cq_ex), 2, show_ptr("ret", ibv_create_cq_ex(ctx, (struct ibv_cq_init_attr_ex *)scratch)));
	CASE("ibv_poll_cq", 0, 3, show_int("ret", ibv_poll_cq(&cq_u.cqx.context ? (struct ibv_cq *)&cq_u : NULL, 3, &wc)));
	CASE("ibv_req_notify_cq", 0, 2, show_int("ret", ibv_req_notify_cq((struct ibv_cq *)&cq_u, 1)));
	CASE("ibv_modify_cq", VOFF(modify_cq), 2, show_int("ret", ibv_modify_cq((struct ibv_cq *)&cq_u, (struct ibv_modify_cq_attr *)scratch)));

	{
		static const uint32_t masks[] = {
			IBV_SRQ_INIT_ATTR_PD,
			IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE,
			IBV_SRQ_INIT_ATTR_TYPE,
			IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ,
			IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD,
		};
		static const enum ibv_srq_type types[] = { IBV_SRQT_BASIC, IBV_SRQT_XRC };
		size_t m, t;

		for (m = 0; m < sizeof(masks) / sizeof(masks[0]); m++)
			for (t = 0; t < 2; t++) {
				char nm[96];

				snprintf(nm, sizeof(nm), "ibv_create_srq_ex mask %#x type %d", masks[m], (int)types[t]);
				CASE(nm, VOFF(create_srq_ex), 2, {
					memset(&srq_attr, 0, sizeof(srq_attr));
					srq_attr.comp_mask = masks[m];
					srq_attr.srq_type = types[t];
					srq_attr.pd = &pd;
					show_ptr("ret", ibv_create_srq_ex(ctx, &srq_attr));
				});
			}
	}
	CASE("ibv_get_srq_num", VOFF(get_srq_num), 2, show_int("ret", ibv_get_srq_num(&srq, &srq_num)));
	CASE("ibv_post_srq_recv", 0, 3, show_int("ret", ibv_post_srq_recv(&srq, &rwr, &bad_rwr)));
	CASE("ibv_post_srq_ops", VOFF(post_srq_ops), 3, {
		bad_op = NULL;
		show_int("ret", ibv_post_srq_ops(&srq, &op, &bad_op));
		printf("  bad_op %s\n", bad_op == &op ? "op" : bad_op ? "other" : "NULL");
	});
	{
		static const uint32_t masks[] = { IBV_QP_INIT_ATTR_PD, 0, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
						  IBV_QP_INIT_ATTR_XRCD };
		size_t m;

		for (m = 0; m < sizeof(masks) / sizeof(masks[0]); m++) {
			char nm[64];

			snprintf(nm, sizeof(nm), "ibv_create_qp_ex mask %#x", masks[m]);
			CASE(nm, VOFF(create_qp_ex), 2, {
				memset(&qp_attr, 0, sizeof(qp_attr));
				qp_attr.comp_mask = masks[m];
				qp_attr.pd = &pd;
				show_ptr("ret", ibv_create_qp_ex(ctx, &qp_attr));
			});
		}
	}
	CASE("ibv_alloc_td", VOFF(alloc_td), 2, show_ptr("ret", ibv_alloc_td(ctx, (struct ibv_td_init_attr *)scratch)));
	CASE("ibv_dealloc_td", VOFF(dealloc_td), 1, show_int("ret", ibv_dealloc_td(&td)));
	CASE("ibv_alloc_parent_domain", VOFF(alloc_parent_domain), 2,
	     show_ptr("ret", ibv_alloc_parent_domain(ctx, (struct ibv_parent_domain_init_attr *)scratch)));
	CASE("ibv_query_rt_values_ex", VOFF(query_rt_values), 2, show_int("ret", ibv_query_rt_values_ex(ctx, (struct ibv_values_ex *)scratch)));
	{
		static const long rets[] = { 0, EOPNOTSUPP, ENOSYS, EINVAL };
		size_t r;

		for (r = 0; r < sizeof(rets) / sizeof(rets[0]); r++) {
			char nm[64];

			snprintf(nm, sizeof(nm), "ibv_query_device_ex provider returns %ld", rets[r]);
			CASE(nm, VOFF(query_device_ex), 4, {
				next_ret = rets[r];
				memset(&dev_attr, 0xcd, sizeof(dev_attr));
				show_int("ret", ibv_query_device_ex(ctx, &qin, &dev_attr));
				printf("  attr.comp_mask after: %#x\n", dev_attr.comp_mask);
				show_int("NULL input", ibv_query_device_ex(ctx, NULL, &dev_attr));
			});
		}
		qin.comp_mask = 1;
		setup(FULL, 0);
		printf("ibv_query_device_ex input comp_mask 1\n");
		show_int("ret", ibv_query_device_ex(ctx, &qin, &dev_attr));
		qin.comp_mask = 0;
	}
	CASE("ibv_open_qp", VOFF(open_qp), 2, show_ptr("ret", ibv_open_qp(ctx, (struct ibv_qp_open_attr *)scratch)));
	CASE("ibv_modify_qp_rate_limit", VOFF(modify_qp_rate_limit), 2,
	     show_int("ret", ibv_modify_qp_rate_limit(&qp_u.qpx.qp_base, (struct ibv_qp_rate_limit_attr *)scratch)));
	CASE("ibv_create_wq", VOFF(create_wq), 2, {
		memset(&wq_made, 0xee, sizeof(wq_made));
		next_ret = (long)(uintptr_t)&wq_made;
		show_ptr("ret", ibv_create_wq(ctx, (struct ibv_wq_init_attr *)scratch));
		printf("  events_completed %u\n", wq_made.events_completed);
	});
	CASE("ibv_modify_wq", VOFF(modify_wq), 2, show_int("ret", ibv_modify_wq(&wq, (struct ibv_wq_attr *)scratch)));
	CASE("ibv_destroy_wq", VOFF(destroy_wq), 1, show_int("ret", ibv_destroy_wq(&wq)));
	CASE("ibv_create_rwq_ind_table", VOFF(create_rwq_ind_table), 2,
	     show_ptr("ret", ibv_create_rwq_ind_table(ctx, (struct ibv_rwq_ind_table_init_attr *)scratch)));
	CASE("ibv_destroy_rwq_ind_table", VOFF(destroy_rwq_ind_table), 1, show_int("ret", ibv_destroy_rwq_ind_table(&rwq_ind_table)));
	CASE("ibv_post_send", 0, 3, show_int("ret", ibv_post_send(&qp_u.qpx.qp_base, &swr, &bad_swr)));
	CASE("ibv_post_recv", 0, 3, show_int("ret", ibv_post_recv(&qp_u.qpx.qp_base, &rwr, &bad_rwr)));
	CASE("ibv_post_wq_recv", 0, 3, show_int("ret", ibv_post_wq_recv(&wq, &rwr, &bad_rwr)));
	for (i = 0; i < 12; i++)
		printf("ibv_is_qpt_supported(0x114, %d) = %d\n", i, ibv_is_qpt_supported(0x114, (enum ibv_qp_type)i));
	CASE("ibv_create_counters", VOFF(create_counters), 2, show_ptr("ret", ibv_create_counters(ctx, (struct ibv_counters_init_attr *)scratch)));
	CASE("ibv_destroy_counters", VOFF(destroy_counters), 1, show_int("ret", ibv_destroy_counters(&counters)));
	CASE("ibv_attach_counters_point_flow", VOFF(attach_counters_point_flow), 3,
	     show_int("ret", ibv_attach_counters_point_flow(&counters, (struct ibv_counter_attach_attr *)scratch, &flow)));
	CASE("ibv_read_counters", VOFF(read_counters), 4, show_int("ret", ibv_read_counters(&counters, (uint64_t *)scratch, 4, 1)));
	for (i = 0; i < 6; i++) {
		uint32_t fl = (uint32_t)(0x12345u * (unsigned)i * 7u) & 0xFFFFF;

		printf("ibv_flow_label_to_udp_sport(%#x) = %#x\n", fl, ibv_flow_label_to_udp_sport(fl));
	}
	CASE("ibv_alloc_dm", VOFF(alloc_dm), 2, show_ptr("ret", ibv_alloc_dm(ctx, (struct ibv_alloc_dm_attr *)scratch)));
	CASE("ibv_free_dm", VOFF(free_dm), 1, show_int("ret", ibv_free_dm(&dm)));
	CASE("ibv_memcpy_to_dm", 0, 4, show_int("ret", ibv_memcpy_to_dm(&dm, 8, scratch, 16)));
	CASE("ibv_memcpy_from_dm", 0, 4, show_int("ret", ibv_memcpy_from_dm(scratch, &dm, 8, 16)));
	CASE("ibv_alloc_null_mr", VOFF(alloc_null_mr), 1, show_ptr("ret", ibv_alloc_null_mr(&pd)));
	CASE("ibv_reg_dm_mr", VOFF(reg_dm_mr), 5, show_ptr("ret", ibv_reg_dm_mr(&pd, &dm, 8, 64, IBV_ACCESS_ZERO_BASED)));
	CASE("ibv_advise_mr", VOFF(advise_mr), 5, show_int("ret", ibv_advise_mr(&pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 1, &sge, 1)));

	/* extended CQ and QP: provider entry points inside the objects */
	setup(FULL, 0);
	printf("cq_ex readers\n");
	printf("  to_cq %s\n", (void *)ibv_cq_ex_to_cq(&cq_u.cqx) == (void *)&cq_u ? "same" : "different");
	nargs_to_show = 2;
	show_int("start_poll", ibv_start_poll(&cq_u.cqx, (struct ibv_poll_cq_attr *)scratch));
	nargs_to_show = 1;
	show_int("next_poll", ibv_next_poll(&cq_u.cqx));
	nargs_to_show = 1;
	ibv_end_poll(&cq_u.cqx);
	nargs_to_show = 1;
	show_int("opcode", (int)ibv_wc_read_opcode(&cq_u.cqx));
	show_int("vendor_err", (int)ibv_wc_read_vendor_err(&cq_u.cqx));
	show_int("byte_len", (int)ibv_wc_read_byte_len(&cq_u.cqx));
	show_int("imm_data", (int)ibv_wc_read_imm_data(&cq_u.cqx));
	show_int("invalidated_rkey", (int)ibv_wc_read_invalidated_rkey(&cq_u.cqx));
	show_int("qp_num", (int)ibv_wc_read_qp_num(&cq_u.cqx));
	show_int("src_qp", (int)ibv_wc_read_src_qp(&cq_u.cqx));
	show_int("wc_flags", (int)ibv_wc_read_wc_flags(&cq_u.cqx));
	show_int("slid", (int)ibv_wc_read_slid(&cq_u.cqx));
	show_int("sl", ibv_wc_read_sl(&cq_u.cqx));
	show_int("dlid_path_bits", ibv_wc_read_dlid_path_bits(&cq_u.cqx));
	show_int("completion_ts", (int)ibv_wc_read_completion_ts(&cq_u.cqx));
	show_int("completion_wallclock_ns", (int)ibv_wc_read_completion_wallclock_ns(&cq_u.cqx));
	show_int("cvlan", ibv_wc_read_cvlan(&cq_u.cqx));
	show_int("flow_tag", (int)ibv_wc_read_flow_tag(&cq_u.cqx));
	nargs_to_show = 2;
	ibv_wc_read_tm_info(&cq_u.cqx, &tm);

	printf("qp_ex builders\n");
	nargs_to_show = 1;
	ibv_wr_start(&qp_u.qpx);
	nargs_to_show = 5;
	ibv_wr_atomic_cmp_swp(&qp_u.qpx, 11, 12, 13, 14);
	nargs_to_show = 4;
	ibv_wr_atomic_fetch_add(&qp_u.qpx, 21, 22, 23);
	nargs_to_show = 4;
	ibv_wr_bind_mw(&qp_u.qpx, &mw, 31, (struct ibv_mw_bind_info *)scratch);
	nargs_to_show = 2;
	ibv_wr_local_inv(&qp_u.qpx, 41);
	nargs_to_show = 3;
	ibv_wr_rdma_read(&qp_u.qpx, 51, 52);
	nargs_to_show = 3;
	ibv_wr_rdma_write(&qp_u.qpx, 61, 62);
	nargs_to_show = 4;
	ibv_wr_rdma_write_imm(&qp_u.qpx, 71, 72, 73);
	nargs_to_show = 4;
	ibv_wr_atomic_write(&qp_u.qpx, 75, 76, scratch);
	nargs_to_show = 1;
	ibv_wr_send(&qp_u.qpx);
	nargs_to_show = 2;
	ibv_wr_send_imm(&qp_u.qpx, 81);
	nargs_to_show = 2;
	ibv_wr_send_inv(&qp_u.qpx, 91);
	nargs_to_show = 4;
	ibv_wr_send_tso(&qp_u.qpx, scratch, 101, 102);
	nargs_to_show = 4;
	ibv_wr_set_ud_addr(&qp_u.qpx, (struct ibv_ah *)scratch, 111, 112);
	nargs_to_show = 2;
	ibv_wr_set_xrc_srqn(&qp_u.qpx, 121);
	nargs_to_show = 3;
	ibv_wr_set_inline_data(&qp_u.qpx, scratch, 131);
	nargs_to_show = 3;
	ibv_wr_set_inline_data_list(&qp_u.qpx, 1, &dbuf);
	nargs_to_show = 4;
	ibv_wr_set_sge(&qp_u.qpx, 141, 142, 143);
	nargs_to_show = 3;
	ibv_wr_set_sge_list(&qp_u.qpx, 1, &sge);
	nargs_to_show = 1;
	show_int("complete", ibv_wr_complete(&qp_u.qpx));
	nargs_to_show = 1;
	ibv_wr_abort(&qp_u.qpx);

	free(ctx_mem);
	return 0;
}
