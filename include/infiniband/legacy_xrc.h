/*
 * openverbs: the legacy OFED XRC API, rebuilt on XRC domains (ibv_open_xrcd).
 *
 * OFED 1.3-1.5 offered XRC through ibv_open_xrc_domain() and "XRC receive
 * QPs" that processes register with. rdma-core never had this API; openverbs
 * brings it back for source compatibility as a thin layer over the modern
 * verbs (ibv_open_xrcd, ibv_create_srq_ex, ibv_create_qp_ex, ibv_open_qp).
 * The functions are exported in the version node OPENVERBS_XRC_1.0 and are
 * declared only here, never from <infiniband/verbs.h>.
 *
 * Differences from OFED 1.5 (the struct layouts of verbs.h are rdma-core's):
 *  - ibv_create_xrc_rcv_qp() takes struct ibv_xrc_rcv_qp_init_attr, which has
 *    the xrc_domain member that rdma-core's struct ibv_qp_init_attr lacks;
 *  - the SRQ number of an XRC SRQ is read with ibv_get_srq_num() (or
 *    ibv_xrc_srq_num()), not srq->xrc_srq_num;
 *  - an async event of a registered receive QP has IBV_XRC_QP_EVENT_FLAG set
 *    in event_type and carries the QP number instead of a QP pointer: read it
 *    with ibv_xrc_event_qp_num() (OFED: element.xrc_qp_num); acknowledge the
 *    event unchanged with ibv_ack_async_event().
 * Semantics: ibv_reg_xrc_rcv_qp(3).
 */
#ifndef INFINIBAND_LEGACY_XRC_H
#define INFINIBAND_LEGACY_XRC_H

#include <stdint.h>
#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Set in ibv_async_event.event_type for events of registered receive QPs. */
#define IBV_XRC_QP_EVENT_FLAG 0x80000000

/* An XRC domain of the legacy API (wraps a struct ibv_xrcd). */
struct ibv_xrc_domain {
	struct ibv_context *context;
	uint32_t handle;
};

/*
 * The init attributes of ibv_create_xrc_rcv_qp(). Only xrc_domain is used
 * (as in OFED); the other members exist so that code filling an OFED
 * struct ibv_qp_init_attr compiles after changing the type name.
 */
struct ibv_xrc_rcv_qp_init_attr {
	void *qp_context;
	struct ibv_cq *send_cq;
	struct ibv_cq *recv_cq;
	struct ibv_srq *srq;
	struct ibv_qp_cap cap;
	enum ibv_qp_type qp_type;
	int sq_sig_all;
	struct ibv_xrc_domain *xrc_domain;
};

/*
 * Opens (oflag O_CREAT: creates if absent) the XRC domain of the file open on
 * fd, shared by every process that opens the same file on the same device;
 * fd -1 gives a private domain. Returns NULL with errno: EINVAL (bad
 * context, bad oflag, O_CREAT|O_EXCL and the domain exists), EAGAIN (absent
 * without O_CREAT), EBADF (fd not open), EOPNOTSUPP (device without XRC),
 * ENOMEM.
 */
struct ibv_xrc_domain *ibv_open_xrc_domain(struct ibv_context *context,
					   int fd, int oflag);

/*
 * Closes a domain opened by ibv_open_xrc_domain(). Returns 0, or an errno
 * value: EINVAL (NULL or unknown domain), EBUSY (this process still has
 * receive QPs registered in it, or SRQs/QPs still use it).
 */
int ibv_close_xrc_domain(struct ibv_xrc_domain *d);

/*
 * Creates an XRC SRQ in domain d whose completions go to xrc_cq. Uses
 * srq_init_attr->attr (max_wr, max_sge, srq_limit) and srq_context.
 * Returns NULL with errno (EINVAL, EOPNOTSUPP, ENOMEM, ...).
 */
struct ibv_srq *ibv_create_xrc_srq(struct ibv_pd *pd,
				   struct ibv_xrc_domain *xrc_domain,
				   struct ibv_cq *xrc_cq,
				   struct ibv_srq_init_attr *srq_init_attr);

/* The SRQ number remote XRC senders target (0 with errno on failure). */
uint32_t ibv_xrc_srq_num(struct ibv_srq *srq);

/*
 * Creates an XRC receive QP in init_attr->xrc_domain, registers the calling
 * process with it and stores its number in *xrc_rcv_qpn. Returns 0 or an
 * errno value (EINVAL, EOPNOTSUPP, ENOMEM, ...).
 */
int ibv_create_xrc_rcv_qp(struct ibv_xrc_rcv_qp_init_attr *init_attr,
			  uint32_t *xrc_rcv_qpn);

/* Modifies / queries a receive QP this process is registered with.
 * 0 or an errno value (EINVAL when not registered in that domain). */
int ibv_modify_xrc_rcv_qp(struct ibv_xrc_domain *xrc_domain,
			  uint32_t xrc_qp_num, struct ibv_qp_attr *attr,
			  int attr_mask);
int ibv_query_xrc_rcv_qp(struct ibv_xrc_domain *xrc_domain,
			 uint32_t xrc_qp_num, struct ibv_qp_attr *attr,
			 int attr_mask, struct ibv_xrc_rcv_qp_init_attr *init_attr);

/*
 * Registers / unregisters the calling process with receive QP xrc_qp_num of
 * the domain. The QP lives while at least one process is registered (a
 * process that exits counts as unregistered). Returns 0 or an errno value:
 * EINVAL (no such receive QP in that domain; unregister without register).
 * A second registration by the same process succeeds and changes nothing.
 */
int ibv_reg_xrc_rcv_qp(struct ibv_xrc_domain *xrc_domain, uint32_t xrc_qp_num);
int ibv_unreg_xrc_rcv_qp(struct ibv_xrc_domain *xrc_domain,
			 uint32_t xrc_qp_num);

/* The QP number of an event carrying IBV_XRC_QP_EVENT_FLAG. */
static inline uint32_t ibv_xrc_event_qp_num(const struct ibv_async_event *event)
{
	return (uint32_t)event->element.port_num;
}

#ifdef __cplusplus
}
#endif

#endif /* INFINIBAND_LEGACY_XRC_H */
