/*
 * xrc_probe DEVICE: calls the XRC and parent/thread-domain verbs once each on
 * a real device and prints one line per call, "<verb> <case>: <result>",
 * where the result is "ok" or "fail errno=<name>". vm-group-xrc.sh runs it
 * with Debian's libibverbs and with ours on rxe0 and siw0 and compares the
 * two outputs line by line (the same provider and kernel answer both, so
 * every line must match).
 *
 * Objects the device refuses to create are replaced by zeroed stand-ins of
 * the right type (with the context set), so that the next verb is still
 * reached through the provider's op and never dereferences NULL.
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *errname(int e)
{
	switch (e) {
	case 0: return "0";
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case EIO: return "EIO";
	case EBADF: return "EBADF";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EFAULT: return "EFAULT";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case ENODEV: return "ENODEV";
	case EINVAL: return "EINVAL";
	case ENOSYS: return "ENOSYS";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
	default: {
		static char buf[32];
		snprintf(buf, sizeof(buf), "%d", e);
		return buf;
	}
	}
}

/* Names the libibverbs this process loaded, on stderr (not compared). */
static void print_loaded_library(void)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, " /");
		if (p && strstr(p, "/libibverbs.so.1")) {
			fprintf(stderr, "loaded:%s", p);
			break;
		}
	}
	fclose(f);
}

static void ptr_result(const char *what, const void *p)
{
	if (p)
		printf("%s: ok\n", what);
	else
		printf("%s: fail errno=%s\n", what, errname(errno));
}

static void int_result(const char *what, int ret)
{
	if (!ret)
		printf("%s: ok\n", what);
	else
		printf("%s: fail ret=%s errno=%s\n", what, errname(ret), errname(errno));
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "rxe0";
	int n = 0, i;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;
	for (i = 0; list && i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	print_loaded_library();
	if (!ctx) {
		printf("open %s: fail errno=%s\n", name, errname(errno));
		return 2;
	}
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!pd || !cq) {
		printf("setup: fail errno=%s\n", errname(errno));
		return 3;
	}
	char path[] = "/tmp/xrc_probe_XXXXXX";
	int fd = mkstemp(path);

	/* XRC domains */
	struct ibv_xrcd_init_attr xa = { 0 };
	xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	xa.fd = fd;
	xa.oflags = O_CREAT;
	errno = 0;
	struct ibv_xrcd *xrcd = ibv_open_xrcd(ctx, &xa);
	ptr_result("ibv_open_xrcd file,O_CREAT", xrcd);
	xa.fd = -1;
	errno = 0;
	struct ibv_xrcd *anon = ibv_open_xrcd(ctx, &xa);
	ptr_result("ibv_open_xrcd -1,O_CREAT", anon);
	xa.fd = fd;
	xa.oflags = 0;
	errno = 0;
	struct ibv_xrcd *x2 = ibv_open_xrcd(ctx, &xa);
	ptr_result("ibv_open_xrcd file,0", x2);
	xa.comp_mask = IBV_XRCD_INIT_ATTR_FD;
	errno = 0;
	struct ibv_xrcd *x3 = ibv_open_xrcd(ctx, &xa);
	ptr_result("ibv_open_xrcd comp_mask=FD", x3);
	xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS | IBV_XRCD_INIT_ATTR_RESERVED;
	errno = 0;
	struct ibv_xrcd *x4 = ibv_open_xrcd(ctx, &xa);
	ptr_result("ibv_open_xrcd comp_mask=RESERVED", x4);

	/* Room for a provider's verbs_xrcd (ibv_xrcd, comp_mask, handle). */
	static union {
		struct ibv_xrcd xrcd;
		char room[128];
	} stand_in_xrcd;
	stand_in_xrcd.xrcd.context = ctx;
	struct ibv_xrcd *use_xrcd = xrcd ? xrcd : &stand_in_xrcd.xrcd;

	struct ibv_srq_init_attr_ex sa = { 0 };
	sa.attr.max_wr = 8;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
		       IBV_SRQ_INIT_ATTR_CQ;
	sa.srq_type = IBV_SRQT_XRC;
	sa.pd = pd;
	sa.xrcd = use_xrcd;
	sa.cq = cq;
	errno = 0;
	struct ibv_srq *srq = ibv_create_srq_ex(ctx, &sa);
	ptr_result("ibv_create_srq_ex XRC", srq);
	if (srq) {
		uint32_t num = 0;
		int_result("ibv_get_srq_num", ibv_get_srq_num(srq, &num));
	}

	struct ibv_qp_init_attr_ex qa = { 0 };
	qa.qp_type = IBV_QPT_XRC_RECV;
	qa.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	qa.xrcd = use_xrcd;
	errno = 0;
	struct ibv_qp *rqp = ibv_create_qp_ex(ctx, &qa);
	ptr_result("ibv_create_qp_ex XRC_RECV", rqp);

	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_XRC_SEND;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	qa.pd = pd;
	qa.send_cq = qa.recv_cq = cq;
	qa.cap.max_send_wr = 4;
	qa.cap.max_send_sge = 1;
	errno = 0;
	struct ibv_qp *sqp = ibv_create_qp_ex(ctx, &qa);
	ptr_result("ibv_create_qp_ex XRC_SEND", sqp);

	struct ibv_qp_open_attr oa = { 0 };
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
	oa.qp_num = rqp ? rqp->qp_num : 0x11;
	oa.xrcd = use_xrcd;
	oa.qp_type = IBV_QPT_XRC_RECV;
	errno = 0;
	struct ibv_qp *oqp = ibv_open_qp(ctx, &oa);
	ptr_result("ibv_open_qp XRC_RECV", oqp);

	/* Thread and parent domains */
	struct ibv_td_init_attr ta = { 0 };
	errno = 0;
	struct ibv_td *td = ibv_alloc_td(ctx, &ta);
	ptr_result("ibv_alloc_td", td);
	ta.comp_mask = 1;
	errno = 0;
	struct ibv_td *td2 = ibv_alloc_td(ctx, &ta);
	ptr_result("ibv_alloc_td comp_mask=1", td2);
	errno = 0;
	struct ibv_td *td3 = ibv_alloc_td(ctx, NULL);
	ptr_result("ibv_alloc_td NULL attr", td3);

	static struct ibv_td stand_in_td;
	stand_in_td.context = ctx;
	struct ibv_parent_domain_init_attr pa = { 0 };
	pa.pd = pd;
	pa.td = td;
	errno = 0;
	struct ibv_pd *par = ibv_alloc_parent_domain(ctx, &pa);
	ptr_result("ibv_alloc_parent_domain pd+td", par);
	pa.td = NULL;
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	pa.pd_context = &pa;
	errno = 0;
	struct ibv_pd *par2 = ibv_alloc_parent_domain(ctx, &pa);
	ptr_result("ibv_alloc_parent_domain pd_context", par2);
	pa.comp_mask = 0x80;
	errno = 0;
	struct ibv_pd *par3 = ibv_alloc_parent_domain(ctx, &pa);
	ptr_result("ibv_alloc_parent_domain comp_mask=0x80", par3);
	errno = 0;
	struct ibv_pd *par4 = ibv_alloc_parent_domain(ctx, NULL);
	ptr_result("ibv_alloc_parent_domain NULL attr", par4);
	pa.comp_mask = 0;
	pa.pd = NULL;
	errno = 0;
	struct ibv_pd *par5 = ibv_alloc_parent_domain(ctx, &pa);
	ptr_result("ibv_alloc_parent_domain NULL pd", par5);

	errno = 0;
	int_result("ibv_dealloc_td", ibv_dealloc_td(td ? td : &stand_in_td));

	/* Clean-up of whatever the device accepted. */
	if (par)
		ibv_dealloc_pd(par);
	if (par2)
		ibv_dealloc_pd(par2);
	if (oqp)
		ibv_destroy_qp(oqp);
	if (sqp)
		ibv_destroy_qp(sqp);
	if (rqp)
		ibv_destroy_qp(rqp);
	if (srq)
		ibv_destroy_srq(srq);
	if (x2)
		ibv_close_xrcd(x2);
	if (anon)
		ibv_close_xrcd(anon);
	if (xrcd)
		int_result("ibv_close_xrcd", ibv_close_xrcd(xrcd));
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	printf("done\n");
	return 0;
}
