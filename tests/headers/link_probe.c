/*
 * Link-level probe: which libibverbs symbols (and symbol versions) a program
 * imports when built against a header set.  Built against our headers and
 * against Debian's, both linked with Debian's libibverbs.so; the dynamic
 * import tables must be identical (macros such as ibv_query_port,
 * ibv_reg_mr, ibv_reg_mr_iova and the inline fallbacks pick the symbols).
 * Never run: the calls sit behind a condition that is false at run time.
 */
#include <infiniband/verbs.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (argc > 1000 && list && n) {
		struct ibv_context *c = ibv_open_device(list[0]);
		struct ibv_port_attr pa;
		struct ibv_device_attr_ex da;
		struct ibv_gid_entry ge;
		struct ibv_pd *pd = ibv_alloc_pd(c);
		struct ibv_srq_init_attr_ex sa = { .comp_mask = IBV_SRQ_INIT_ATTR_PD, .pd = pd };
		struct ibv_qp_init_attr_ex qa = { .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd };

		ibv_query_port(c, 1, &pa);
		ibv_query_device_ex(c, NULL, &da);
		ibv_query_gid_ex(c, 1, 0, &ge, 0);
		ibv_query_gid_table(c, &ge, 1, 0);
		ibv_reg_mr(pd, argv, 8, IBV_ACCESS_LOCAL_WRITE);
		ibv_reg_mr(pd, argv, 8, argc);
		ibv_reg_mr(pd, argv, 8, IBV_ACCESS_RELAXED_ORDERING);
		ibv_reg_mr_iova(pd, argv, 8, 0, IBV_ACCESS_LOCAL_WRITE);
		ibv_reg_mr_iova(pd, argv, 8, 0, argc);
		ibv_create_srq_ex(c, &sa);
		ibv_create_qp_ex(c, &qa);
		ibv_close_device(c);
	}
	printf("%d devices\n", n);
	if (list)
		ibv_free_device_list(list);
	return 0;
}
