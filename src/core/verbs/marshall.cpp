// Conversions between the kernel's uverbs/SA structs and the verbs structs,
// used by librdmacm (ibv_copy_qp_attr_from_kern, ibv_copy_ah_attr_from_kern,
// ibv_copy_path_rec_from_kern, ibv_copy_path_rec_to_kern). Field by field:
// the layouts differ, the values do not (byte order is kept as is).
#include "core/verbs/verbs.h"

#include <cstring>

namespace ov::verbs {

void copy_ah_attr_from_kern(struct ibv_ah_attr *dst, const struct ib_uverbs_ah_attr *src) noexcept
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid.raw));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

void copy_qp_attr_from_kern(struct ibv_qp_attr *dst, const struct ib_uverbs_qp_attr *src) noexcept
{
	dst->qp_state = static_cast<enum ibv_qp_state>(src->qp_state);
	dst->cur_qp_state = static_cast<enum ibv_qp_state>(src->cur_qp_state);
	dst->path_mtu = static_cast<enum ibv_mtu>(src->path_mtu);
	dst->path_mig_state = static_cast<enum ibv_mig_state>(src->path_mig_state);
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = static_cast<int>(src->qp_access_flags);

	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;

	copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);

	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

namespace {

// The path record fields ib_user_path_rec and ibv_sa_path_rec share by name,
// copied in either direction; the GIDs (arrays on one side, unions on the
// other) are left to the caller. Values keep their byte order; only the
// integer width changes where the two declare it differently.
template <class Dst, class Src> void copy_path_rec_fields(Dst *dst, const Src *src) noexcept
{
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = static_cast<decltype(dst->raw_traffic)>(src->raw_traffic);
	dst->flow_label = src->flow_label;
	dst->reversible = static_cast<decltype(dst->reversible)>(src->reversible);
	dst->mtu = static_cast<decltype(dst->mtu)>(src->mtu);
	dst->pkey = src->pkey;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->numb_path = src->numb_path;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}

} // namespace

void copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, const struct ib_user_path_rec *src) noexcept
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid.raw));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid.raw));
	copy_path_rec_fields(dst, src);
}

void copy_path_rec_to_kern(struct ib_user_path_rec *dst, const struct ibv_sa_path_rec *src) noexcept
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
	copy_path_rec_fields(dst, src);
}

} // namespace ov::verbs
