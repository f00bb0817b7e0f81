/*
 * DECLARE_DRV_CMD as providers use it: command pairs over the structs of
 * the driver ABI headers (rdma/...-abi.h), fields named directly on the
 * command (cmd.x), through the driver payload (cmd.drv_payload.x) and
 * through the request head (cmd.ibv_cmd.x, cmd.ibv_cmd.core_payload.x),
 * and `empty`.
 *
 * Compiled as C11 and as C++17 (this file is also included by
 * drv_cmd.cpp) with -Wall -Wextra -Werror, then run: main() writes through
 * one name and reads through the other. Built with
 * -DOV_KABI_EXPECT_PADDING_ERROR it must NOT compile (a pair with padding
 * between the head and the driver data).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/kern-abi.h>
#include <rdma/bnxt_re-abi.h>
#include <rdma/mlx5-abi.h>
#include <rdma/rdma_user_rxe.h>
#include <rdma/siw-abi.h>

#ifdef __cplusplus
#define OV_SA static_assert
#else
#define OV_SA _Static_assert
#endif

/*
 * Heads whose kernel struct ends in a flexible array member: g++ refuses
 * any member after them (see kern-abi.h), so C++ uses them with clang only.
 */
#if !defined(__cplusplus) || defined(__clang__)
#define OV_KABI_FLEX_HEADS 1
#endif

/* Extended commands: no flexible array in the kernel request. */
DECLARE_DRV_CMD(ov_mlx5_create_cq_ex, IB_USER_VERBS_EX_CMD_CREATE_CQ, mlx5_ib_create_cq,
		mlx5_ib_create_cq_resp);
DECLARE_DRV_CMD(ov_urxe_create_cq_ex, IB_USER_VERBS_EX_CMD_CREATE_CQ, empty, rxe_create_cq_resp);
DECLARE_DRV_CMD(ov_mlx5_modify_qp_ex, IB_USER_VERBS_EX_CMD_MODIFY_QP, mlx5_ib_modify_qp,
		mlx5_ib_modify_qp_resp);
DECLARE_DRV_CMD(ov_mlx5_create_wq, IB_USER_VERBS_EX_CMD_CREATE_WQ, mlx5_ib_create_wq,
		mlx5_ib_create_wq_resp);

OV_SA(offsetof(struct ov_mlx5_create_cq_ex, buf_addr) ==
	      offsetof(struct ov_mlx5_create_cq_ex, drv_payload) +
		      offsetof(struct mlx5_ib_create_cq, buf_addr),
      "cmd.buf_addr is drv_payload.buf_addr");
OV_SA(offsetof(struct ov_mlx5_create_cq_ex, drv_payload) == sizeof(struct ibv_create_cq_ex),
      "driver data follows the extended head");
OV_SA(offsetof(struct ov_mlx5_create_cq_ex, ibv_cmd.cqe) ==
	      sizeof(struct ex_hdr) + offsetof(struct ib_uverbs_ex_create_cq, cqe),
      "ibv_cmd.cqe");
OV_SA(sizeof(struct ov_urxe_create_cq_ex) == sizeof(struct ibv_create_cq_ex), "empty adds nothing");
OV_SA(sizeof(struct ov_urxe_create_cq_ex_resp) ==
	      sizeof(struct ib_uverbs_ex_create_cq_resp) + sizeof(struct rxe_create_cq_resp),
      "rxe response");

#ifdef OV_KABI_FLEX_HEADS
DECLARE_DRV_CMD(ov_mlx5_create_cq, IB_USER_VERBS_CMD_CREATE_CQ, mlx5_ib_create_cq,
		mlx5_ib_create_cq_resp);
DECLARE_DRV_CMD(ov_mlx5_create_qp, IB_USER_VERBS_CMD_CREATE_QP, mlx5_ib_create_qp,
		mlx5_ib_create_qp_resp);
DECLARE_DRV_CMD(ov_mlx5_alloc_ucontext, IB_USER_VERBS_CMD_GET_CONTEXT,
		mlx5_ib_alloc_ucontext_req_v2, mlx5_ib_alloc_ucontext_resp);
DECLARE_DRV_CMD(ov_siw_cmd_reg_mr, IB_USER_VERBS_CMD_REG_MR, siw_ureq_reg_mr, siw_uresp_reg_mr);
DECLARE_DRV_CMD(ov_siw_cmd_create_cq, IB_USER_VERBS_CMD_CREATE_CQ, empty, siw_uresp_create_cq);
DECLARE_DRV_CMD(ov_bnxt_re_alloc_pd, IB_USER_VERBS_CMD_ALLOC_PD, empty, bnxt_re_pd_resp);
DECLARE_DRV_CMD(ov_plain_alloc_pd, IB_USER_VERBS_CMD_ALLOC_PD, empty, empty);

OV_SA(sizeof(struct ov_plain_alloc_pd) == sizeof(struct ibv_alloc_pd), "empty request");
OV_SA(sizeof(struct ov_plain_alloc_pd_resp) == sizeof(struct ib_uverbs_alloc_pd_resp),
      "empty response");
OV_SA(offsetof(struct ov_bnxt_re_alloc_pd_resp, dbr) ==
	      sizeof(struct ib_uverbs_alloc_pd_resp) + offsetof(struct bnxt_re_pd_resp, dbr),
      "packed driver response keeps the uapi's packing");
OV_SA(offsetof(struct ov_mlx5_create_qp, sq_buf_addr) ==
	      sizeof(struct ibv_create_qp) + offsetof(struct mlx5_ib_create_qp, sq_buf_addr),
      "member of a nested anonymous union");
OV_SA(offsetof(struct ov_mlx5_create_qp, access_key) ==
	      offsetof(struct ov_mlx5_create_qp, sq_buf_addr),
      "union members share their offset");
#endif

#ifdef OV_KABI_EXPECT_PADDING_ERROR
/* A 4-byte kernel response followed by an 8-byte aligned driver response. */
DECLARE_DRV_CMD(ov_padded, IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, empty, siw_uresp_create_cq);
#endif

static int failures;

#define OV_EXPECT(cond)                                                        \
	do {                                                                   \
		if (!(cond)) {                                                 \
			printf("FAIL: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                            \
		}                                                              \
	} while (0)

int main(void)
{
	struct ov_mlx5_create_cq_ex ex;
	struct ov_mlx5_modify_qp_ex_resp mresp;

	memset(&ex, 0, sizeof(ex));
	ex.buf_addr = 0x1122334455667788ULL;
	ex.cqe_size = 64;
	ex.ibv_cmd.cqe = 255;
	ex.ibv_cmd.hdr.ex_hdr.provider_in_words = 1;
	OV_EXPECT(ex.drv_payload.buf_addr == 0x1122334455667788ULL);
	OV_EXPECT(ex.drv_payload.cqe_size == 64);
	OV_EXPECT(ex.ibv_cmd.core_payload.cqe == 255);
	OV_EXPECT(ex.ibv_cmd.hdr.ex_hdr.provider_in_words == 1);

	memset(&mresp, 0, sizeof(mresp));
	mresp.drv_payload.dctn = 7;
	OV_EXPECT(mresp.dctn == 7);
	mresp.ibv_resp.response_length = 16;
	OV_EXPECT(mresp.ibv_resp.response_length == 16);

#ifdef OV_KABI_FLEX_HEADS
	{
		struct ov_mlx5_create_qp qp;
		struct ov_bnxt_re_alloc_pd_resp pd;
		struct ov_siw_cmd_reg_mr mr;

		memset(&qp, 0, sizeof(qp));
		qp.ibv_cmd.pd_handle = 3;
		qp.ibv_cmd.response = 0xabcULL;
		qp.access_key = 99;
		qp.rq_wqe_count = 8;
		OV_EXPECT(qp.ibv_cmd.core_payload.pd_handle == 3);
		OV_EXPECT(qp.ibv_cmd.core_payload.response == 0xabcULL);
		OV_EXPECT(qp.drv_payload.sq_buf_addr == 99);
		OV_EXPECT(qp.drv_payload.rq_wqe_count == 8);

		memset(&pd, 0, sizeof(pd));
		pd.ibv_resp.pd_handle = 5;
		pd.dbr = 0x55ULL;
		OV_EXPECT(pd.drv_payload.dbr == 0x55ULL);

		memset(&mr, 0, sizeof(mr));
		mr.ibv_cmd.start = 0x1000;
		mr.ibv_cmd.length = 4096;
		mr.stag_key = 2;
		OV_EXPECT(mr.ibv_cmd.core_payload.start == 0x1000);
		OV_EXPECT(mr.ibv_cmd.core_payload.length == 4096);
		OV_EXPECT(mr.drv_payload.stag_key == 2);
	}
#endif
	if (failures)
		return 1;
	printf("PASS: DECLARE_DRV_CMD pairs alias their fields\n");
	return 0;
}
