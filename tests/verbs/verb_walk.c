/*
 * verb_walk: calls every verb of libibverbs once (and a few with bad
 * arguments) on one device, printing one line per call: the verb, its return
 * value, errno when it failed, and the fields of the result that do not vary
 * between runs (no pointers, handles, keys or QP numbers).
 *
 * The test-bed group vm-group-verbs.sh runs it twice, with Debian's
 * libibverbs and with ours, and compares the lines: the same program on the
 * same kernel device must see the same answers.
 *
 *   verb_walk DEVICE GID_INDEX
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int gid_index;
static uint8_t port = 1;

#define LINE(...) do { printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

static void int_result(const char *what, int ret, int err)
{
	if (ret)
		LINE("%s ret=%d errno=%s", what, ret, strerror(err));
	else
		LINE("%s ret=0", what);
}

#define CALL_INT(what, expr) do { errno = 0; int r_ = (expr); int e_ = errno; int_result(what, r_, e_); } while (0)
#define CALL_PTR(var, what, expr) do { errno = 0; var = (expr); int e_ = errno; \
	if (var) LINE("%s ok", what); else LINE("%s NULL errno=%s", what, strerror(e_)); } while (0)

static void print_gid(const char *what, const union ibv_gid *gid)
{
	char text[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET6, gid->raw, text, sizeof(text));
	LINE("%s gid=%s", what, text);
}

extern int ibv_dontfork_range(void *base, size_t size);
extern int ibv_dofork_range(void *base, size_t size);

static void walk_strings(void)
{
	unsigned long h = 5381;
	for (int i = -2; i < 40; i++) {
		const char *s[] = {ibv_node_type_str(i), ibv_port_state_str(i), ibv_event_type_str(i),
				   ibv_wc_status_str(i)};
		for (int k = 0; k < 4; k++)
			for (const char *p = s[k]; *p; p++)
				h = h * 33 + (unsigned char)*p;
		h = h * 33 + (unsigned)ibv_rate_to_mult(i) + (unsigned)ibv_rate_to_mbps(i);
	}
	for (int m = -1; m < 600; m++)
		h = h * 33 + mult_to_ibv_rate(m) + mbps_to_ibv_rate(m * 2500);
	LINE("strings_and_rates hash=%lx", h);
	LINE("ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR) %s", ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR));
	LINE("ibv_port_state_str(IBV_PORT_ACTIVE) %s", ibv_port_state_str(IBV_PORT_ACTIVE));
}

static int to_init(struct ibv_qp *qp, enum ibv_qp_type type)
{
	struct ibv_qp_attr a = {0};
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = port;
	if (type == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	}
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static void walk(struct ibv_context *ctx)
{
	struct ibv_device_attr dattr;
	CALL_INT("ibv_query_device", ibv_query_device(ctx, &dattr));
	LINE("  device phys_port_cnt=%u max_qp=%d max_cqe=%d max_mr_size=%llu max_sge=%d atomic_cap=%d "
	     "max_srq=%d max_pd=%d",
	     dattr.phys_port_cnt, dattr.max_qp, dattr.max_cqe, (unsigned long long)dattr.max_mr_size,
	     dattr.max_sge, dattr.atomic_cap, dattr.max_srq, dattr.max_pd);

	struct ibv_port_attr pattr;
	CALL_INT("ibv_query_port", ibv_query_port(ctx, port, &pattr));
	LINE("  port state=%s max_mtu=%d active_mtu=%d gid_tbl_len=%d pkey_tbl_len=%u link_layer=%u "
	     "cap_flags=%x cap_flags2=%x",
	     ibv_port_state_str(pattr.state), pattr.max_mtu, pattr.active_mtu, pattr.gid_tbl_len,
	     pattr.pkey_tbl_len, pattr.link_layer, pattr.port_cap_flags, pattr.port_cap_flags2);
	CALL_INT("ibv_query_port(port 99)", ibv_query_port(ctx, 99, &pattr));
	ibv_query_port(ctx, port, &pattr);

	union ibv_gid gid, own_gid;
	CALL_INT("ibv_query_gid", ibv_query_gid(ctx, port, gid_index, &own_gid));
	print_gid("  gid", &own_gid);
	CALL_INT("ibv_query_gid(index 0)", ibv_query_gid(ctx, port, 0, &gid));
	print_gid("  gid0", &gid);
	CALL_INT("ibv_query_gid(beyond table)", ibv_query_gid(ctx, port, pattr.gid_tbl_len + 5, &gid));

	struct ibv_gid_entry entry;
	memset(&entry, 0, sizeof(entry));
	CALL_INT("ibv_query_gid_ex", ibv_query_gid_ex(ctx, port, gid_index, &entry, 0));
	LINE("  entry type=%u index=%u port=%u has_ndev=%d", entry.gid_type, entry.gid_index,
	     entry.port_num, entry.ndev_ifindex != 0);
	CALL_INT("ibv_query_gid_ex(flags 1)", ibv_query_gid_ex(ctx, port, gid_index, &entry, 1));
	CALL_INT("ibv_query_gid_ex(empty slot)", ibv_query_gid_ex(ctx, port, pattr.gid_tbl_len - 1, &entry, 0));

	struct ibv_gid_entry table[64];
	errno = 0;
	ssize_t n = ibv_query_gid_table(ctx, table, 64, 0);
	LINE("ibv_query_gid_table ret=%zd", n);
	for (ssize_t i = 0; i < n && i < 64; i++)
		LINE("  table[%zd] index=%u type=%u", i, table[i].gid_index, table[i].gid_type);
	n = ibv_query_gid_table(ctx, table, 0, 0);
	LINE("ibv_query_gid_table(max 0) ret=%zd", n);

	__be16 pkey = 0;
	CALL_INT("ibv_query_pkey", ibv_query_pkey(ctx, port, 0, &pkey));
	LINE("  pkey=%04x", ntohs(pkey));
	CALL_INT("ibv_query_pkey(index 5000)", ibv_query_pkey(ctx, port, 5000, &pkey));
	LINE("ibv_get_pkey_index ret=%d", ibv_get_pkey_index(ctx, port, htons(0xffff)));
	LINE("ibv_get_pkey_index(absent) ret=%d", ibv_get_pkey_index(ctx, port, htons(0x1234)));

	LINE("ibv_is_fork_initialized %d", ibv_is_fork_initialized());

	struct ibv_pd *pd;
	CALL_PTR(pd, "ibv_alloc_pd", ibv_alloc_pd(ctx));
	if (!pd)
		return;

	size_t len = 1 << 16;
	char *buf = aligned_alloc(4096, len);
	memset(buf, 0, len);
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *mr, *mr2, *bad;
	CALL_PTR(mr, "ibv_reg_mr", ibv_reg_mr(pd, buf, len, rw));
	if (mr)
		LINE("  mr length=%zu addr_ok=%d", mr->length, mr->addr == buf);
	CALL_PTR(mr2, "ibv_reg_mr_iova", ibv_reg_mr_iova(pd, buf, 4096, 0x100000, IBV_ACCESS_LOCAL_WRITE));
	CALL_PTR(bad, "ibv_reg_mr(remote write without local write)",
		 ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE));
	if (bad)
		ibv_dereg_mr(bad);
	CALL_PTR(bad, "ibv_reg_mr(relaxed ordering)",
		 ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING));
	if (bad)
		ibv_dereg_mr(bad);
	CALL_PTR(bad, "ibv_reg_mr(on demand)", ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND));
	if (bad)
		ibv_dereg_mr(bad);
	if (mr2) {
		CALL_INT("ibv_rereg_mr(access)", ibv_rereg_mr(mr2, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, rw));
		CALL_INT("ibv_rereg_mr(bad flags)", ibv_rereg_mr(mr2, 0x80, NULL, NULL, 0, 0));
	}
	CALL_INT("ibv_dealloc_pd(busy)", ibv_dealloc_pd(pd));

	struct ibv_comp_channel *ch;
	CALL_PTR(ch, "ibv_create_comp_channel", ibv_create_comp_channel(ctx));
	struct ibv_cq *cq, *cq2;
	CALL_PTR(cq, "ibv_create_cq", ibv_create_cq(ctx, 64, NULL, ch, 0));
	CALL_PTR(cq2, "ibv_create_cq(no channel)", ibv_create_cq(ctx, 16, NULL, NULL, 0));
	if (cq) {
		CALL_INT("ibv_req_notify_cq", ibv_req_notify_cq(cq, 0));
		CALL_INT("ibv_resize_cq", ibv_resize_cq(cq, 128));
		LINE("  cq cqe>=128 %d", cq->cqe >= 128);
	}
	if (ch)
		CALL_INT("ibv_destroy_comp_channel(busy)", ibv_destroy_comp_channel(ch));
	struct ibv_cq *bigcq;
	CALL_PTR(bigcq, "ibv_create_cq(too big)", ibv_create_cq(ctx, dattr.max_cqe + 1, NULL, NULL, 0));
	if (bigcq)
		ibv_destroy_cq(bigcq);

	struct ibv_cq_init_attr_ex cqa = {0};
	cqa.cqe = 16;
	cqa.wc_flags = IBV_WC_STANDARD_FLAGS;
	struct ibv_cq_ex *cqx;
	CALL_PTR(cqx, "ibv_create_cq_ex", ibv_create_cq_ex(ctx, &cqa));
	if (cqx)
		CALL_INT("ibv_destroy_cq(cq_ex)", ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)));
	cqa.wc_flags = 1ULL << 40;
	CALL_PTR(cqx, "ibv_create_cq_ex(unknown wc flag)", ibv_create_cq_ex(ctx, &cqa));
	cqa.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	CALL_PTR(cqx, "ibv_create_cq_ex(timestamp)", ibv_create_cq_ex(ctx, &cqa));
	if (cqx)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));

	struct ibv_srq_init_attr sia = {0};
	sia.attr.max_wr = 32;
	sia.attr.max_sge = 1;
	struct ibv_srq *srq;
	CALL_PTR(srq, "ibv_create_srq", ibv_create_srq(pd, &sia));
	if (srq) {
		struct ibv_srq_attr sa = {0};
		sa.srq_limit = 4;
		CALL_INT("ibv_modify_srq(limit)", ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT));
		memset(&sa, 0, sizeof(sa));
		CALL_INT("ibv_query_srq", ibv_query_srq(srq, &sa));
		LINE("  srq max_wr>=32 %d max_sge=%u limit=%u", sa.max_wr >= 32, sa.max_sge, sa.srq_limit);
		sa.max_wr = 1u << 30;
		CALL_INT("ibv_modify_srq(huge)", ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR));
	}

	struct ibv_qp_init_attr qia = {0};
	qia.send_cq = cq;
	qia.recv_cq = cq;
	qia.qp_type = IBV_QPT_RC;
	qia.cap.max_send_wr = 8;
	qia.cap.max_recv_wr = 8;
	qia.cap.max_send_sge = 1;
	qia.cap.max_recv_sge = 1;
	struct ibv_qp *rc = NULL, *ud = NULL, *srq_qp = NULL;
	if (cq) {
		CALL_PTR(rc, "ibv_create_qp(RC)", ibv_create_qp(pd, &qia));
		qia.qp_type = IBV_QPT_UD;
		CALL_PTR(ud, "ibv_create_qp(UD)", ibv_create_qp(pd, &qia));
		qia.qp_type = IBV_QPT_RC;
		qia.srq = srq;
		if (srq)
			CALL_PTR(srq_qp, "ibv_create_qp(RC on SRQ)", ibv_create_qp(pd, &qia));
		qia.srq = NULL;
		qia.cap.max_send_wr = 1u << 30;
		struct ibv_qp *huge;
		CALL_PTR(huge, "ibv_create_qp(huge)", ibv_create_qp(pd, &qia));
		if (huge)
			ibv_destroy_qp(huge);
	}
	if (rc) {
		LINE("  rc state=%d type=%d qp_ex_null=%d", rc->state, rc->qp_type, ibv_qp_to_qp_ex(rc) == NULL);
		struct ibv_qp_attr a = {0};
		a.qp_state = IBV_QPS_RTR;
		CALL_INT("ibv_modify_qp(RESET->RTR)", ibv_modify_qp(rc, &a, IBV_QP_STATE));
		CALL_INT("ibv_modify_qp(INIT)", to_init(rc, IBV_QPT_RC));
		LINE("  rc state=%d", rc->state);
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = pattr.active_mtu;
		a.dest_qp_num = rc->qp_num;
		a.rq_psn = 1;
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 12;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = own_gid;
		a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.dlid = pattr.lid;
		a.ah_attr.port_num = port;
		CALL_INT("ibv_modify_qp(RTR)", ibv_modify_qp(rc, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
						     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
						     IBV_QP_MIN_RNR_TIMER));
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.sq_psn = 1;
		a.max_rd_atomic = 1;
		CALL_INT("ibv_modify_qp(RTS)", ibv_modify_qp(rc, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
						     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC));
		struct ibv_qp_init_attr qi;
		memset(&a, 0, sizeof(a));
		CALL_INT("ibv_query_qp", ibv_query_qp(rc, &a, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_PORT, &qi));
		LINE("  rc state=%d attr_state=%d mtu=%d timeout=%u retry=%u sig_all=%d", rc->state, a.qp_state,
		     a.path_mtu, a.timeout, a.retry_cnt, qi.sq_sig_all);
		struct ibv_ece ece = {0};
		CALL_INT("ibv_query_ece", ibv_query_ece(rc, &ece));
		CALL_INT("ibv_set_ece", ibv_set_ece(rc, &ece));
		LINE("ibv_query_qp_data_in_order %d", ibv_query_qp_data_in_order(rc, IBV_WR_RDMA_WRITE, 0));
	}
	if (ud) {
		CALL_INT("ibv_modify_qp(UD INIT)", to_init(ud, IBV_QPT_UD));
		union ibv_gid mgid = {0};
		mgid.raw[0] = 0xff;
		mgid.raw[1] = 0x0e;
		mgid.raw[15] = 0x42;
		CALL_INT("ibv_attach_mcast", ibv_attach_mcast(ud, &mgid, 0));
		CALL_INT("ibv_detach_mcast", ibv_detach_mcast(ud, &mgid, 0));
		CALL_INT("ibv_detach_mcast(again)", ibv_detach_mcast(ud, &mgid, 0));
	}
	if (rc)
		CALL_INT("ibv_attach_mcast(RC)", ibv_attach_mcast(rc, &own_gid, 0));

	struct ibv_ah_attr aha = {0};
	aha.is_global = 1;
	aha.grh.dgid = own_gid;
	aha.grh.sgid_index = (uint8_t)gid_index;
	aha.grh.hop_limit = 64;
	aha.dlid = pattr.lid;
	aha.port_num = port;
	struct ibv_ah *ah;
	CALL_PTR(ah, "ibv_create_ah", ibv_create_ah(pd, &aha));
	if (ah)
		CALL_INT("ibv_destroy_ah", ibv_destroy_ah(ah));

	/* A received RoCE v2 / IPv4 datagram addressed to our own GID. */
	struct ibv_wc wc = {0};
	wc.wc_flags = IBV_WC_GRH;
	wc.slid = 0;
	unsigned char grh[40] = {0};
	struct iphdr ip = {0};
	ip.version = 4;
	ip.ihl = 5;
	ip.ttl = 33;
	ip.tos = 0x10;
	ip.protocol = IPPROTO_UDP;
	memcpy(&ip.daddr, &own_gid.raw[12], 4);
	memcpy(&ip.saddr, &own_gid.raw[12], 4);
	uint32_t sum = 0;
	uint16_t w[10];
	memcpy(w, &ip, sizeof(w));
	for (int i = 0; i < 10; i++)
		sum += w[i];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	ip.check = (uint16_t)~sum;
	memcpy(grh + 20, &ip, sizeof(ip));
	struct ibv_ah_attr from_wc;
	errno = 0;
	int r = ibv_init_ah_from_wc(ctx, port, &wc, (struct ibv_grh *)grh, &from_wc);
	int e = errno;
	LINE("ibv_init_ah_from_wc ret=%d%s%s", r, r ? " errno=" : "", r ? strerror(e) : "");
	if (!r)
		LINE("  ah sgid_index=%u hop_limit=%u tclass=%u is_global=%u", from_wc.grh.sgid_index,
		     from_wc.grh.hop_limit, from_wc.grh.traffic_class, from_wc.is_global);
	CALL_PTR(ah, "ibv_create_ah_from_wc", ibv_create_ah_from_wc(pd, &wc, (struct ibv_grh *)grh, port));
	if (ah)
		ibv_destroy_ah(ah);

	if (srq_qp)
		CALL_INT("ibv_destroy_qp(on SRQ)", ibv_destroy_qp(srq_qp));
	if (ud)
		CALL_INT("ibv_destroy_qp(UD)", ibv_destroy_qp(ud));
	if (rc)
		CALL_INT("ibv_destroy_qp(RC)", ibv_destroy_qp(rc));
	if (srq)
		CALL_INT("ibv_destroy_srq", ibv_destroy_srq(srq));
	if (cq2)
		CALL_INT("ibv_destroy_cq(no channel)", ibv_destroy_cq(cq2));
	if (cq)
		CALL_INT("ibv_destroy_cq", ibv_destroy_cq(cq));
	if (ch)
		CALL_INT("ibv_destroy_comp_channel", ibv_destroy_comp_channel(ch));
	if (mr2)
		CALL_INT("ibv_dereg_mr(iova)", ibv_dereg_mr(mr2));
	if (mr)
		CALL_INT("ibv_dereg_mr", ibv_dereg_mr(mr));
	CALL_INT("ibv_dealloc_pd", ibv_dealloc_pd(pd));
	free(buf);
}

/* The IBVERBS_1.0 entry points, as a libibverbs 1.0 binary reaches them. */
static void walk_compat(const char *devname)
{
	void *(*get)(int *) = dlvsym(RTLD_DEFAULT, "ibv_get_device_list", "IBVERBS_1.0");
	void (*put)(void *) = dlvsym(RTLD_DEFAULT, "ibv_free_device_list", "IBVERBS_1.0");
	const char *(*name)(void *) = dlvsym(RTLD_DEFAULT, "ibv_get_device_name", "IBVERBS_1.0");
	void *(*open10)(void *) = dlvsym(RTLD_DEFAULT, "ibv_open_device", "IBVERBS_1.0");
	int (*close10)(void *) = dlvsym(RTLD_DEFAULT, "ibv_close_device", "IBVERBS_1.0");
	int (*qport10)(void *, uint8_t, struct ibv_port_attr *) = dlvsym(RTLD_DEFAULT, "ibv_query_port", "IBVERBS_1.0");
	void *(*apd10)(void *) = dlvsym(RTLD_DEFAULT, "ibv_alloc_pd", "IBVERBS_1.0");
	int (*dpd10)(void *) = dlvsym(RTLD_DEFAULT, "ibv_dealloc_pd", "IBVERBS_1.0");
	void *(*ccq10)(void *, int, void *, void *, int) = dlvsym(RTLD_DEFAULT, "ibv_create_cq", "IBVERBS_1.0");
	int (*dcq10)(void *) = dlvsym(RTLD_DEFAULT, "ibv_destroy_cq", "IBVERBS_1.0");
	if (!get || !put || !name || !open10 || !close10 || !qport10 || !apd10 || !dpd10 || !ccq10 || !dcq10) {
		LINE("compat_1_0 symbols missing");
		return;
	}
	int n = 0;
	void **list = get(&n);
	LINE("ibv_get_device_list@1.0 %s", list ? "ok" : "NULL");
	void *dev = NULL;
	for (int i = 0; list && i < n; i++)
		if (!strcmp(name(list[i]), devname))
			dev = list[i];
	LINE("  found=%d", dev != NULL);
	if (dev) {
		void *ctx = open10(dev);
		LINE("ibv_open_device@1.0 %s", ctx ? "ok" : "NULL");
		if (ctx) {
			struct ibv_port_attr pa;
			memset(&pa, 0, sizeof(pa));
			CALL_INT("ibv_query_port@1.0", qport10(ctx, port, &pa));
			LINE("  state=%d gid_tbl_len=%d", pa.state, pa.gid_tbl_len);
			void *pd = apd10(ctx);
			LINE("ibv_alloc_pd@1.0 %s", pd ? "ok" : "NULL");
			void *cq = ccq10(ctx, 8, NULL, NULL, 0);
			LINE("ibv_create_cq@1.0 %s", cq ? "ok" : "NULL");
			if (cq)
				CALL_INT("ibv_destroy_cq@1.0", dcq10(cq));
			if (pd)
				CALL_INT("ibv_dealloc_pd@1.0", dpd10(pd));
			CALL_INT("ibv_close_device@1.0", close10(ctx));
		}
	}
	if (list)
		put(list);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s DEVICE GID_INDEX\n", argv[0]);
		return 2;
	}
	gid_index = atoi(argv[2]);
	int num = 0;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list) {
		LINE("ibv_get_device_list NULL errno=%s", strerror(errno));
		return 1;
	}
	struct ibv_device *dev = NULL;
	for (int i = 0; i < num; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	LINE("ibv_get_device_list found=%d", dev != NULL);
	if (!dev)
		return 1;
	LINE("  node_type=%s transport=%d", ibv_node_type_str(dev->node_type), dev->transport_type);
	struct ibv_context *ctx = ibv_open_device(dev);
	LINE("ibv_open_device %s", ctx ? "ok" : "NULL");
	if (!ctx)
		return 1;
	walk(ctx);
	CALL_INT("ibv_close_device", ibv_close_device(ctx));
	ibv_free_device_list(list);
	walk_compat(argv[1]);
	walk_strings();
	CALL_INT("ibv_fork_init", ibv_fork_init());
	LINE("ibv_is_fork_initialized %d", ibv_is_fork_initialized());
	return 0;
}
