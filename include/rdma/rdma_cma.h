/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * openverbs: <rdma/rdma_cma.h>
 *
 * The RDMA connection manager API of librdmacm.so.1 (rdma_cm(7)): event
 * channels, communication identifiers (struct rdma_cm_id), address and route
 * resolution, connection set-up and tear-down, multicast and the "endpoint"
 * helpers.  Every layout, value and prototype matches rdma-core 44 (Debian
 * 12's librdmacm-dev); the functions are described in their man pages.
 */
#ifndef RDMA_CMA_H
#define RDMA_CMA_H

#include <netinet/in.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>
#include <infiniband/sa.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Events reported through rdma_get_cm_event(). */
enum rdma_cm_event_type {
	RDMA_CM_EVENT_ADDR_RESOLVED,
	RDMA_CM_EVENT_ADDR_ERROR,
	RDMA_CM_EVENT_ROUTE_RESOLVED,
	RDMA_CM_EVENT_ROUTE_ERROR,
	RDMA_CM_EVENT_CONNECT_REQUEST,
	RDMA_CM_EVENT_CONNECT_RESPONSE,
	RDMA_CM_EVENT_CONNECT_ERROR,
	RDMA_CM_EVENT_UNREACHABLE,
	RDMA_CM_EVENT_REJECTED,
	RDMA_CM_EVENT_ESTABLISHED,
	RDMA_CM_EVENT_DISCONNECTED,
	RDMA_CM_EVENT_DEVICE_REMOVAL,
	RDMA_CM_EVENT_MULTICAST_JOIN,
	RDMA_CM_EVENT_MULTICAST_ERROR,
	RDMA_CM_EVENT_ADDR_CHANGE,
#if _OPENVERBS_ABI < 64
	RDMA_CM_EVENT_TIMEWAIT_EXIT
#else
	RDMA_CM_EVENT_TIMEWAIT_EXIT,
	/* rdma-core 64 (RDMACM_1.4) */
	RDMA_CM_EVENT_ADDRINFO_RESOLVED, /* rdma_resolve_addrinfo() done */
	RDMA_CM_EVENT_ADDRINFO_ERROR,	 /* rdma_resolve_addrinfo() failed */
	RDMA_CM_EVENT_USER,		 /* written by rdma_write_cm_event() */
	RDMA_CM_EVENT_INTERNAL		 /* the library's own; never reported */
#endif
};

/* Port spaces: the service (and QP type) an identifier belongs to. */
enum rdma_port_space {
	RDMA_PS_IPOIB = 0x0002,
	RDMA_PS_TCP = 0x0106,
	RDMA_PS_UDP = 0x0111,
	RDMA_PS_IB = 0x013F,
};

/* Service IDs of the IP port spaces: the port space in bits 16..31. */
#define RDMA_IB_IP_PS_MASK 0xFFFFFFFFFFFF0000ULL
#define RDMA_IB_IP_PORT_MASK 0x000000000000FFFFULL
#define RDMA_IB_IP_PS_TCP 0x0000000001060000ULL
#define RDMA_IB_IP_PS_UDP 0x0000000001110000ULL
#define RDMA_IB_PS_IB 0x00000000013F0000ULL

/* The Q_Key of RDMA_PS_UDP identifiers (rdma_post_ud_send(3)). */
#define RDMA_UDP_QKEY 0x01234567

/* InfiniBand addressing of an identifier: its GIDs and P_Key. */
struct rdma_ib_addr {
	union ibv_gid sgid;
	union ibv_gid dgid;
	__be16 pkey;
};

/* Source and destination of an identifier (any family fits the storage). */
struct rdma_addr {
	union {
		struct sockaddr src_addr;
		struct sockaddr_in src_sin;
		struct sockaddr_in6 src_sin6;
		struct sockaddr_storage src_storage;
	};
	union {
		struct sockaddr dst_addr;
		struct sockaddr_in dst_sin;
		struct sockaddr_in6 dst_sin6;
		struct sockaddr_storage dst_storage;
	};
	union {
		struct rdma_ib_addr ibaddr;
	} addr;
};

/* Resolved route: the addresses and num_paths path records. */
struct rdma_route {
	struct rdma_addr addr;
	struct ibv_sa_path_rec *path_rec;
	int num_paths;
};

/* A queue of CM events; fd may be polled (readable when an event waits). */
struct rdma_event_channel {
	int fd;
};

/* A communication identifier (the socket of rdma_cm). */
struct rdma_cm_id {
	struct ibv_context *verbs;
	struct rdma_event_channel *channel;
	void *context;
	struct ibv_qp *qp;
	struct rdma_route route;
	enum rdma_port_space ps;
	uint8_t port_num;
	struct rdma_cm_event *event;
	struct ibv_comp_channel *send_cq_channel;
	struct ibv_cq *send_cq;
	struct ibv_comp_channel *recv_cq_channel;
	struct ibv_cq *recv_cq;
	struct ibv_srq *srq;
	struct ibv_pd *pd;
	enum ibv_qp_type qp_type;
};

enum {
	RDMA_MAX_RESP_RES = 0xFF,
	RDMA_MAX_INIT_DEPTH = 0xFF
};

/* Parameters of rdma_connect()/rdma_accept() and of connection events. */
struct rdma_conn_param {
	const void *private_data;
	uint8_t private_data_len;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t flow_control;
	uint8_t retry_count; /* ignored when accepting */
	uint8_t rnr_retry_count;
	/* Ignored when the identifier has a QP: then taken from the QP. */
	uint8_t srq;
	uint32_t qp_num;
};

/* Parameters of unreliable-datagram (RDMA_PS_UDP, RDMA_PS_IB UD) events. */
struct rdma_ud_param {
	const void *private_data;
	uint8_t private_data_len;
	struct ibv_ah_attr ah_attr;
	uint32_t qp_num;
	uint32_t qkey;
};

/* One event; released with rdma_ack_cm_event(). */
struct rdma_cm_event {
	struct rdma_cm_id *id;
	struct rdma_cm_id *listen_id;
	enum rdma_cm_event_type event;
	int status;
	union {
		struct rdma_conn_param conn;
		struct rdma_ud_param ud;
#if _OPENVERBS_ABI >= 64
		uint64_t arg; /* RDMA_CM_EVENT_USER: rdma_write_cm_event()'s arg */
#endif
	} param;
};

/* rdma_getaddrinfo() hints and results (rdma_getaddrinfo(3)). */
#define RAI_PASSIVE 0x00000001
#define RAI_NUMERICHOST 0x00000002
#define RAI_NOROUTE 0x00000004
#define RAI_FAMILY 0x00000008
#if _OPENVERBS_ABI >= 64
/* rdma-core 64: resolve through the subnet administrator's service records
 * (RAI_SA) or through the name service only (RAI_DNS); never both. */
#define RAI_SA 0x00000010
#define RAI_DNS 0x00000020
#endif

struct rdma_addrinfo {
	int ai_flags;
	int ai_family;
	int ai_qp_type;
	int ai_port_space;
	socklen_t ai_src_len;
	socklen_t ai_dst_len;
	struct sockaddr *ai_src_addr;
	struct sockaddr *ai_dst_addr;
	char *ai_src_canonname;
	char *ai_dst_canonname;
	size_t ai_route_len;
	void *ai_route;
	size_t ai_connect_len;
	void *ai_connect;
	struct rdma_addrinfo *ai_next;
};

/* rdma_join_multicast_ex() */
enum rdma_cm_join_mc_attr_mask {
	RDMA_CM_JOIN_MC_ATTR_ADDRESS = 1 << 0,
	RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS = 1 << 1,
	RDMA_CM_JOIN_MC_ATTR_RESERVED = 1 << 2,
};

enum rdma_cm_mc_join_flags {
	RDMA_MC_JOIN_FLAG_FULLMEMBER,
	RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER,
	RDMA_MC_JOIN_FLAG_RESERVED,
};

struct rdma_cm_join_mc_attr_ex {
	uint32_t comp_mask;  /* enum rdma_cm_join_mc_attr_mask */
	uint32_t join_flags; /* enum rdma_cm_mc_join_flags */
	struct sockaddr *addr;
};

struct rdma_event_channel *rdma_create_event_channel(void);
void rdma_destroy_event_channel(struct rdma_event_channel *channel);

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
		   void *context, enum rdma_port_space ps);
int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
		   struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr);
void rdma_destroy_ep(struct rdma_cm_id *id);
int rdma_destroy_id(struct rdma_cm_id *id);

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr);
int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
		      struct sockaddr *dst_addr, int timeout_ms);
int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms);

/* The QP attributes for a transition to qp_attr->qp_state (INIT, RTR, RTS). */
int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
		      int *qp_attr_mask);

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr);
int rdma_create_qp_ex(struct rdma_cm_id *id,
		      struct ibv_qp_init_attr_ex *qp_init_attr);
void rdma_destroy_qp(struct rdma_cm_id *id);

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param);
int rdma_establish(struct rdma_cm_id *id);
int rdma_listen(struct rdma_cm_id *id, int backlog);
int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id);
int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param);
int rdma_reject(struct rdma_cm_id *id, const void *private_data,
		uint8_t private_data_len);
int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
		    uint8_t private_data_len);
int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event);
int rdma_disconnect(struct rdma_cm_id *id);

int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
			void *context);
int rdma_join_multicast_ex(struct rdma_cm_id *id,
			   struct rdma_cm_join_mc_attr_ex *mc_join_attr,
			   void *context);
int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr);

int rdma_get_cm_event(struct rdma_event_channel *channel,
		      struct rdma_cm_event **event);
int rdma_ack_cm_event(struct rdma_cm_event *event);

__be16 rdma_get_src_port(struct rdma_cm_id *id);
__be16 rdma_get_dst_port(struct rdma_cm_id *id);

static inline struct sockaddr *rdma_get_local_addr(struct rdma_cm_id *id)
{
	return &id->route.addr.src_addr;
}

static inline struct sockaddr *rdma_get_peer_addr(struct rdma_cm_id *id)
{
	return &id->route.addr.dst_addr;
}

struct ibv_context **rdma_get_devices(int *num_devices);
void rdma_free_devices(struct ibv_context **list);

const char *rdma_event_str(enum rdma_cm_event_type event);

/* rdma_set_option() levels and names. */
enum {
	RDMA_OPTION_ID = 0,
	RDMA_OPTION_IB = 1
};

enum {
	RDMA_OPTION_ID_TOS = 0,	       /* uint8_t: type of service */
	RDMA_OPTION_ID_REUSEADDR = 1,  /* int: allow reuse of the address */
	RDMA_OPTION_ID_AFONLY = 2,     /* int: IPv6 only, no IPv4-mapped */
	RDMA_OPTION_ID_ACK_TIMEOUT = 3 /* uint8_t: local ACK timeout */
};

enum {
	RDMA_OPTION_IB_PATH = 1 /* struct ibv_path_data[]: the route */
};

int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
		    void *optval, size_t optlen);
int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel);

int rdma_getaddrinfo(const char *node, const char *service,
		     const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res);
void rdma_freeaddrinfo(struct rdma_addrinfo *res);

int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece);
int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece);

#if _OPENVERBS_ABI >= 64
/* rdma-core 64 (RDMACM_1.4): address resolution as an event of the id's
 * channel (rdma_resolve_addrinfo(3), rdma_query_addrinfo(3)) and events
 * written by the application (rdma_write_cm_event(3)). */
int rdma_resolve_addrinfo(struct rdma_cm_id *id, const char *node,
			  const char *service,
			  const struct rdma_addrinfo *hints);
int rdma_query_addrinfo(struct rdma_cm_id *id, struct rdma_addrinfo **info);
int rdma_write_cm_event(struct rdma_cm_id *id, enum rdma_cm_event_type event,
			int status, uint64_t arg);
#endif

#ifdef __cplusplus
}
#endif

#endif /* RDMA_CMA_H */
