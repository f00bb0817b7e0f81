// Exported helpers without an object: fork protection, enum strings, rate
// conversions and the kernel-struct marshalling librdmacm uses.
#include "core/verbs/verbs.h"
#include "facade/export.h"

#include <cerrno>

// ibv_fork_init(3): 0 or errno value (EINVAL: memory was registered before).
// errno is left alone, as rdma-core does.
OV_EXPORT int ibv_fork_init(void)
{
	return ov::verbs::fork_init();
}

OV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return ov::verbs::fork_status();
}

// ibv_dontfork_range/ibv_dofork_range: 0, or -1 with errno from madvise(2).
OV_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	return ov::verbs::dontfork_range(base, size);
}

OV_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	return ov::verbs::dofork_range(base, size);
}

OV_EXPORT const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	return ov::verbs::node_type_str(node_type);
}

OV_EXPORT const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	return ov::verbs::port_state_str(port_state);
}

OV_EXPORT const char *ibv_event_type_str(enum ibv_event_type event)
{
	return ov::verbs::event_type_str(event);
}

OV_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	return ov::verbs::wc_status_str(status);
}

#if _OPENVERBS_ABI >= 56
// ibv_wr_opcode_str(3), rdma-core 56 (IBVERBS_PRIVATE_34): never NULL.
OV_EXPORT const char *ibv_wr_opcode_str(enum ibv_wr_opcode opcode)
{
	return ov::verbs::wr_opcode_str(opcode);
}
#endif

OV_EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
	return ov::verbs::rate_to_mult(rate);
}

OV_EXPORT enum ibv_rate mult_to_ibv_rate(int mult)
{
	return ov::verbs::mult_to_rate(mult);
}

OV_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate)
{
	return ov::verbs::rate_to_mbps(rate);
}

OV_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	return ov::verbs::mbps_to_rate(mbps);
}

// The marshalling helpers do nothing with NULL arguments (they return void).
OV_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst,
					  struct ib_uverbs_ah_attr *src)
{
	if (dst && src)
		ov::verbs::copy_ah_attr_from_kern(dst, src);
}

OV_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst,
					  struct ib_uverbs_qp_attr *src)
{
	if (dst && src)
		ov::verbs::copy_qp_attr_from_kern(dst, src);
}

OV_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
					   struct ib_user_path_rec *src)
{
	if (dst && src)
		ov::verbs::copy_path_rec_from_kern(dst, src);
}

OV_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
					 struct ibv_sa_path_rec *src)
{
	if (dst && src)
		ov::verbs::copy_path_rec_to_kern(dst, src);
}
