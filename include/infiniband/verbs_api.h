/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * openverbs: <infiniband/verbs_api.h>
 *
 * Bridges the kernel uverbs ioctl uapi to the IBV_* spellings used by
 * <infiniband/verbs.h>: the IBV_ names below are the same numbers and the
 * same types as their IB_UVERBS_ counterparts (source: the uapi header
 * rdma/ib_user_ioctl_verbs.h and ibv_advise_mr(3), ibv_reg_mr(3),
 * ibv_create_flow_action(3)).
 */
#ifndef VERBS_API_H
#define VERBS_API_H

#include <linux/types.h>

/*
 * Pointer members of uapi structs: user space sees the real pointer type,
 * overlaid on the 64-bit slot the kernel reads (<name>_data_u64).
 *
 * Like rdma-core 44, this header does not include <stdint.h> itself.  When
 * it is included on its own (UINTPTR_MAX not yet defined), the preprocessor
 * compares two undefined names and takes the 32-bit branch; structs using
 * RDMA_UAPI_PTR then get the padded 32-bit layout.  <infiniband/verbs.h>
 * includes <stdint.h> first and gets the native 64-bit layout.  Both
 * outcomes are kept identical to rdma-core 44 on purpose.
 */
#if UINTPTR_MAX == UINT32_MAX
#include <endian.h>
#if __BYTE_ORDER == __LITTLE_ENDIAN
#define RDMA_UAPI_PTR(_type, _name)                                          \
	union {                                                                \
		struct {                                                       \
			_type _name;                                           \
			__u32 _name##_reserved;                                \
		};                                                             \
		__aligned_u64 _name##_data_u64;                                \
	}
#else
#define RDMA_UAPI_PTR(_type, _name)                                          \
	union {                                                                \
		struct {                                                       \
			__u32 _name##_reserved;                                \
			_type _name;                                           \
		};                                                             \
		__aligned_u64 _name##_data_u64;                                \
	}
#endif
#elif UINTPTR_MAX == UINT64_MAX
#define RDMA_UAPI_PTR(_type, _name)                                          \
	union {                                                                \
		_type _name;                                                   \
		__aligned_u64 _name##_data_u64;                                \
	}
#else
#error "openverbs: unsupported pointer size"
#endif

#include <infiniband/ib_user_ioctl_verbs.h>

/* Flow action ESP (ibv_create_flow_action_esp(3)): type names. */
#define ibv_flow_action_esp_keymat ib_uverbs_flow_action_esp_keymat
#define ibv_flow_action_esp_keymat_aes_gcm_iv_algo                           \
	ib_uverbs_flow_action_esp_keymat_aes_gcm_iv_algo
#define ibv_flow_action_esp_keymat_aes_gcm ib_uverbs_flow_action_esp_keymat_aes_gcm
#define ibv_flow_action_esp_replay ib_uverbs_flow_action_esp_replay
#define ibv_flow_action_esp_replay_bmp ib_uverbs_flow_action_esp_replay_bmp
#define ibv_flow_action_esp_encap ib_uverbs_flow_action_esp_encap
#define ibv_flow_action_esp ib_uverbs_flow_action_esp
#define ibv_flow_action_esp_flags ib_uverbs_flow_action_esp_flags

/* Flow action ESP: constant names. */
#define IBV_FLOW_ACTION_ESP_KEYMAT_AES_GCM IB_UVERBS_FLOW_ACTION_ESP_KEYMAT_AES_GCM
#define IBV_FLOW_ACTION_IV_ALGO_SEQ IB_UVERBS_FLOW_ACTION_IV_ALGO_SEQ
#define IBV_FLOW_ACTION_ESP_REPLAY_NONE IB_UVERBS_FLOW_ACTION_ESP_REPLAY_NONE
#define IBV_FLOW_ACTION_ESP_REPLAY_BMP IB_UVERBS_FLOW_ACTION_ESP_REPLAY_BMP
#define IBV_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO                              \
	IB_UVERBS_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO
#define IBV_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD                               \
	IB_UVERBS_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD
#define IBV_FLOW_ACTION_ESP_FLAGS_TUNNEL IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TUNNEL
#define IBV_FLOW_ACTION_ESP_FLAGS_TRANSPORT                                  \
	IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TRANSPORT
#define IBV_FLOW_ACTION_ESP_FLAGS_DECRYPT IB_UVERBS_FLOW_ACTION_ESP_FLAGS_DECRYPT
#define IBV_FLOW_ACTION_ESP_FLAGS_ENCRYPT IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ENCRYPT
#define IBV_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW                             \
	IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW

/* ibv_advise_mr(3): advice values and flags. */
#define ibv_advise_mr_advice ib_uverbs_advise_mr_advice
#define IBV_ADVISE_MR_ADVICE_PREFETCH IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH
#define IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE
#define IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT                               \
	IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT
#define IBV_ADVISE_MR_FLAG_FLUSH IB_UVERBS_ADVISE_MR_FLAG_FLUSH

/* ibv_query_port(3): ibv_port_attr.flags bits. */
#define IBV_QPF_GRH_REQUIRED IB_UVERBS_QPF_GRH_REQUIRED

/*
 * ibv_reg_mr(3): access bits at or above IBV_ACCESS_OPTIONAL_FIRST are
 * "optional"; a kernel or provider that does not know one ignores it
 * instead of failing the registration.
 */
#define IBV_ACCESS_OPTIONAL_RANGE IB_UVERBS_ACCESS_OPTIONAL_RANGE
#define IBV_ACCESS_OPTIONAL_FIRST IB_UVERBS_ACCESS_OPTIONAL_FIRST

#endif /* VERBS_API_H */
