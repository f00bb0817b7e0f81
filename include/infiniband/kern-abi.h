/*
 * openverbs: request heads of the uverbs write() protocol, for providers.
 *
 * Layout fixed by IBVERBS_PRIVATE_34 (rdma-core 44). Every command has a
 * request type `struct ibv_<cmd>`: the 8-byte `struct ib_uverbs_cmd_hdr`
 * (or, for extended commands, `struct ex_hdr`: the header plus the 16-byte
 * `struct ib_uverbs_ex_cmd_hdr`) followed by the kernel's request structure.
 * A provider embeds the request head first in its own command structure and
 * appends its driver data; the library fills the head and the core payload
 * and sends the whole buffer (write() or the INVOKE_WRITE ioctl).
 *
 * The kernel structure sits in a union, twice: as `core_payload` (its own
 * type, from the kernel uapi header <rdma/ib_user_verbs.h>) and as an
 * anonymous struct with the same members, so that code names the kernel's
 * fields on the request itself (`cmd.pd_handle`, `cmd.response`). The member
 * lists come from <infiniband/kern-abi-fields.h>, which
 * cmake/gen_kern_abi_fields.py derives from the uapi headers.
 *
 * C++: the kernel structs that end in a flexible array member (driver_data[])
 * make every request head that carries them a variable-sized type. C and
 * C++ accept the heads themselves, but g++ rejects such a head followed by
 * another member (as DECLARE_DRV_CMD does), so DECLARE_DRV_CMD on those
 * commands is for C providers (as in rdma-core, whose providers are C);
 * clang accepts it in both languages as a GNU extension (the warning is
 * silenced inside the macro).
 */
#ifndef INFINIBAND_KERN_ABI_H
#define INFINIBAND_KERN_ABI_H

#include <linux/types.h>
#include <stddef.h>
#include <stdint.h>
#include <rdma/ib_user_verbs.h>
#include <infiniband/kern-abi-fields.h>

/* Oldest and newest uverbs ABI (sysfs abi_version) the library speaks. */
#define IB_USER_VERBS_MIN_ABI_VERSION 3
#define IB_USER_VERBS_MAX_ABI_VERSION 6

/* Head of an extended (IB_USER_VERBS_CMD_FLAG_EXTENDED) write command. */
struct ex_hdr {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
};

/*
 * _OV_DECLARE_CMD(enum, name, kernel struct, kernel response type): request
 * head of a legacy write command; the union holds the kernel struct's
 * members (anonymous, _OV_ANON_<kernel struct>) and the struct itself
 * (`core_payload`), in that order as in rdma-core. _OV_DECLARE_CMD_EX: the
 * same for an extended command. Each also records, for DECLARE_DRV_CMD,
 * which request type and which kernel response type belong to the
 * command's enum value.
 */
#define _OV_DECLARE_CMD(_enum, _name, _kabi, _kabi_resp)                       \
	struct _name {                                                         \
		struct ib_uverbs_cmd_hdr hdr;                                  \
		union {                                                        \
			_OV_ANON_##_kabi                                       \
			struct _kabi core_payload;                             \
		};                                                             \
	};                                                                     \
	typedef struct _name IBV_ABI_REQ_##_enum;                              \
	typedef _kabi_resp IBV_KABI_RESP_##_enum

#define _OV_DECLARE_CMD_EX(_enum, _name, _kabi, _kabi_resp)                    \
	struct _name {                                                         \
		struct ex_hdr hdr;                                             \
		union {                                                        \
			_OV_ANON_##_kabi                                       \
			struct _kabi core_payload;                             \
		};                                                             \
	};                                                                     \
	typedef struct _name IBV_ABI_REQ_##_enum;                              \
	typedef _kabi_resp IBV_KABI_RESP_##_enum

/* Commands without a response carry this placeholder response type. */
struct ibv_kern_no_resp {
	__u32 reserved[0];
};

_OV_DECLARE_CMD(IB_USER_VERBS_CMD_GET_CONTEXT, ibv_get_context,
		ib_uverbs_get_context, struct ib_uverbs_get_context_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_QUERY_DEVICE, ibv_query_device,
		ib_uverbs_query_device, struct ib_uverbs_query_device_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_QUERY_PORT, ibv_query_port,
		ib_uverbs_query_port, struct ib_uverbs_query_port_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_ALLOC_PD, ibv_alloc_pd, ib_uverbs_alloc_pd,
		struct ib_uverbs_alloc_pd_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_DEALLOC_PD, ibv_dealloc_pd,
		ib_uverbs_dealloc_pd, struct ibv_kern_no_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_CREATE_AH, ibv_create_ah,
		ib_uverbs_create_ah, struct ib_uverbs_create_ah_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_DESTROY_AH, ibv_destroy_ah,
		ib_uverbs_destroy_ah, struct ibv_kern_no_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_REG_MR, ibv_reg_mr, ib_uverbs_reg_mr,
		struct ib_uverbs_reg_mr_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_REREG_MR, ibv_rereg_mr, ib_uverbs_rereg_mr,
		struct ib_uverbs_rereg_mr_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_DEREG_MR, ibv_dereg_mr, ib_uverbs_dereg_mr,
		struct ibv_kern_no_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_ALLOC_MW, ibv_alloc_mw, ib_uverbs_alloc_mw,
		struct ib_uverbs_alloc_mw_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_DEALLOC_MW, ibv_dealloc_mw,
		ib_uverbs_dealloc_mw, struct ibv_kern_no_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, ibv_create_comp_channel,
		ib_uverbs_create_comp_channel,
		struct ib_uverbs_create_comp_channel_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_CREATE_CQ, ibv_create_cq,
		ib_uverbs_create_cq, struct ib_uverbs_create_cq_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_RESIZE_CQ, ibv_resize_cq,
		ib_uverbs_resize_cq, struct ib_uverbs_resize_cq_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_DESTROY_CQ, ibv_destroy_cq,
		ib_uverbs_destroy_cq, struct ib_uverbs_destroy_cq_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_POLL_CQ, ibv_poll_cq, ib_uverbs_poll_cq,
		struct ib_uverbs_poll_cq_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, ibv_req_notify_cq,
		ib_uverbs_req_notify_cq, struct ibv_kern_no_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_CREATE_QP, ibv_create_qp,
		ib_uverbs_create_qp, struct ib_uverbs_create_qp_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_QUERY_QP, ibv_query_qp, ib_uverbs_query_qp,
		struct ib_uverbs_query_qp_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_MODIFY_QP, ibv_modify_qp,
		ib_uverbs_modify_qp, struct ibv_kern_no_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_DESTROY_QP, ibv_destroy_qp,
		ib_uverbs_destroy_qp, struct ib_uverbs_destroy_qp_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_POST_SEND, ibv_post_send,
		ib_uverbs_post_send, struct ib_uverbs_post_send_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_POST_RECV, ibv_post_recv,
		ib_uverbs_post_recv, struct ib_uverbs_post_recv_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_ATTACH_MCAST, ibv_attach_mcast,
		ib_uverbs_attach_mcast, struct ibv_kern_no_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_DETACH_MCAST, ibv_detach_mcast,
		ib_uverbs_detach_mcast, struct ibv_kern_no_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_CREATE_SRQ, ibv_create_srq,
		ib_uverbs_create_srq, struct ib_uverbs_create_srq_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_MODIFY_SRQ, ibv_modify_srq,
		ib_uverbs_modify_srq, struct ibv_kern_no_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_QUERY_SRQ, ibv_query_srq,
		ib_uverbs_query_srq, struct ib_uverbs_query_srq_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_DESTROY_SRQ, ibv_destroy_srq,
		ib_uverbs_destroy_srq, struct ib_uverbs_destroy_srq_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_POST_SRQ_RECV, ibv_post_srq_recv,
		ib_uverbs_post_srq_recv, struct ib_uverbs_post_srq_recv_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_OPEN_XRCD, ibv_open_xrcd,
		ib_uverbs_open_xrcd, struct ib_uverbs_open_xrcd_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_CLOSE_XRCD, ibv_close_xrcd,
		ib_uverbs_close_xrcd, struct ibv_kern_no_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_CREATE_XSRQ, ibv_create_xsrq,
		ib_uverbs_create_xsrq, struct ib_uverbs_create_srq_resp);
_OV_DECLARE_CMD(IB_USER_VERBS_CMD_OPEN_QP, ibv_open_qp, ib_uverbs_open_qp,
		struct ib_uverbs_create_qp_resp);

_OV_DECLARE_CMD_EX(IB_USER_VERBS_EX_CMD_QUERY_DEVICE, ibv_query_device_ex,
		   ib_uverbs_ex_query_device,
		   struct ib_uverbs_ex_query_device_resp);
_OV_DECLARE_CMD_EX(IB_USER_VERBS_EX_CMD_CREATE_CQ, ibv_create_cq_ex,
		   ib_uverbs_ex_create_cq, struct ib_uverbs_ex_create_cq_resp);
_OV_DECLARE_CMD_EX(IB_USER_VERBS_EX_CMD_CREATE_QP, ibv_create_qp_ex,
		   ib_uverbs_ex_create_qp, struct ib_uverbs_ex_create_qp_resp);
_OV_DECLARE_CMD_EX(IB_USER_VERBS_EX_CMD_MODIFY_QP, ibv_modify_qp_ex,
		   ib_uverbs_ex_modify_qp, struct ib_uverbs_ex_modify_qp_resp);
_OV_DECLARE_CMD_EX(IB_USER_VERBS_EX_CMD_MODIFY_CQ, ibv_modify_cq,
		   ib_uverbs_ex_modify_cq, struct ibv_kern_no_resp);
_OV_DECLARE_CMD_EX(IB_USER_VERBS_EX_CMD_CREATE_FLOW, ibv_create_flow,
		   ib_uverbs_create_flow, struct ib_uverbs_create_flow_resp);
_OV_DECLARE_CMD_EX(IB_USER_VERBS_EX_CMD_DESTROY_FLOW, ibv_destroy_flow,
		   ib_uverbs_destroy_flow, struct ibv_kern_no_resp);
_OV_DECLARE_CMD_EX(IB_USER_VERBS_EX_CMD_CREATE_WQ, ibv_create_wq,
		   ib_uverbs_ex_create_wq, struct ib_uverbs_ex_create_wq_resp);
_OV_DECLARE_CMD_EX(IB_USER_VERBS_EX_CMD_MODIFY_WQ, ibv_modify_wq,
		   ib_uverbs_ex_modify_wq, struct ibv_kern_no_resp);
_OV_DECLARE_CMD_EX(IB_USER_VERBS_EX_CMD_DESTROY_WQ, ibv_destroy_wq,
		   ib_uverbs_ex_destroy_wq, struct ib_uverbs_ex_destroy_wq_resp);
_OV_DECLARE_CMD_EX(IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL,
		   ibv_create_rwq_ind_table, ib_uverbs_ex_create_rwq_ind_table,
		   struct ib_uverbs_ex_create_rwq_ind_table_resp);
_OV_DECLARE_CMD_EX(IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL,
		   ibv_destroy_rwq_ind_table, ib_uverbs_ex_destroy_rwq_ind_table,
		   struct ibv_kern_no_resp);

/* The request type and the kernel response type of a command enum value. */
#define IBV_ABI_REQ(_enum) IBV_ABI_REQ_##_enum
#define IBV_KABI_RESP(_enum) IBV_KABI_RESP_##_enum

/*
 * DECLARE_DRV_CMD(name, enum, driver request, driver response) declares a
 * provider's command pair:
 *   struct name      { <request head of enum> ibv_cmd;
 *                      union { <driver request's members>; struct driver_req drv_payload; }; }
 *   struct name_resp { <kernel response of enum> ibv_resp;
 *                      union { <driver response's members>; struct driver_resp drv_payload; }; }
 * so the driver's fields are reachable both as cmd.drv_payload.x and as
 * cmd.x. The member lists are _OV_ANON_<driver struct> of
 * <infiniband/kern-abi-fields.h> (every struct of the driver ABI headers of
 * <rdma/>); a provider with its own ABI header defines _OV_ANON_<struct>
 * itself or runs cmake/gen_kern_abi_fields.py on that header.
 * `empty` stands for "no driver data" (size 0). Compile-time checks: no
 * padding between the head and the driver data, nor after the driver data.
 */
struct empty {
	__u32 reserved[0];
};
#define _OV_ANON_empty

#ifdef __cplusplus
#define _OV_KABI_ASSERT static_assert
#else
#define _OV_KABI_ASSERT _Static_assert
#endif

#ifdef __clang__
#define _OV_KABI_VLA_BEGIN                                                     \
	_Pragma("clang diagnostic push")                                       \
	_Pragma("clang diagnostic ignored \"-Wgnu-variable-sized-type-not-at-end\"")
#define _OV_KABI_VLA_END _Pragma("clang diagnostic pop")
#else
#define _OV_KABI_VLA_BEGIN
#define _OV_KABI_VLA_END
#endif

#define DECLARE_DRV_CMD(_name, _enum, _kabi_req, _kabi_resp)                   \
	_OV_KABI_VLA_BEGIN                                                     \
	struct _name {                                                         \
		IBV_ABI_REQ(_enum) ibv_cmd;                                    \
		union {                                                        \
			_OV_ANON_##_kabi_req                                   \
			struct _kabi_req drv_payload;                          \
		};                                                             \
	};                                                                     \
	struct _name##_resp {                                                  \
		IBV_KABI_RESP(_enum) ibv_resp;                                 \
		union {                                                        \
			_OV_ANON_##_kabi_resp                                  \
			struct _kabi_resp drv_payload;                         \
		};                                                             \
	};                                                                     \
	_OV_KABI_VLA_END                                                       \
	_OV_KABI_ASSERT(offsetof(struct _name, drv_payload) ==                 \
				sizeof(IBV_ABI_REQ(_enum)),                    \
			#_name ": padding before the driver request");         \
	_OV_KABI_ASSERT(sizeof(struct _name) == sizeof(IBV_ABI_REQ(_enum)) +   \
				sizeof(struct _kabi_req),                      \
			#_name ": padding after the driver request");          \
	_OV_KABI_ASSERT(offsetof(struct _name##_resp, drv_payload) ==          \
				sizeof(IBV_KABI_RESP(_enum)),                  \
			#_name "_resp: padding before the driver response");   \
	_OV_KABI_ASSERT(sizeof(struct _name##_resp) ==                         \
				sizeof(IBV_KABI_RESP(_enum)) +                 \
				sizeof(struct _kabi_resp),                     \
			#_name "_resp: padding after the driver response")

#endif /* INFINIBAND_KERN_ABI_H */
