/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * openverbs: <rdma/rdma_cma_abi.h>
 *
 * The command and event formats of the kernel's connection manager
 * (/dev/infiniband/rdma_cm, ABI versions 3 and 4) as librdmacm 44 publishes
 * them: each command struct starts with the header words cmd/in/out and
 * is written to the device with write(2); "response" holds the address of
 * the answer.  The kernel's own definitions are <rdma/rdma_user_cm.h>;
 * openverbs' library uses those, this header exists for programs that
 * include it.  Field names, order and sizes match rdma-core 44.
 */
#ifndef RDMA_CMA_ABI_H
#define RDMA_CMA_ABI_H

#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <infiniband/openverbs_abi.h>
#include <infiniband/sa.h>
#include <netinet/in.h>

/* ABI versions of the device this format serves. */
#define RDMA_USER_CM_MIN_ABI_VERSION	3
#define RDMA_USER_CM_MAX_ABI_VERSION	4

#define RDMA_MAX_PRIVATE_DATA		256

/* Command numbers. */
enum {
	UCMA_CMD_CREATE_ID,
	UCMA_CMD_DESTROY_ID,
	UCMA_CMD_BIND_IP,
	UCMA_CMD_RESOLVE_IP,
	UCMA_CMD_RESOLVE_ROUTE,
	UCMA_CMD_QUERY_ROUTE,
	UCMA_CMD_CONNECT,
	UCMA_CMD_LISTEN,
	UCMA_CMD_ACCEPT,
	UCMA_CMD_REJECT,
	UCMA_CMD_DISCONNECT,
	UCMA_CMD_INIT_QP_ATTR,
	UCMA_CMD_GET_EVENT,
	UCMA_CMD_GET_OPTION,
	UCMA_CMD_SET_OPTION,
	UCMA_CMD_NOTIFY,
	UCMA_CMD_JOIN_IP_MCAST,
	UCMA_CMD_LEAVE_MCAST,
	UCMA_CMD_MIGRATE_ID,
	UCMA_CMD_QUERY,
	UCMA_CMD_BIND,
	UCMA_CMD_RESOLVE_ADDR,
#if _OPENVERBS_ABI < 64
	UCMA_CMD_JOIN_MCAST
#else
	UCMA_CMD_JOIN_MCAST,
	UCMA_CMD_RESOLVE_IB_SERVICE, /* rdma-core 64: SA service record lookup */
	UCMA_CMD_WRITE_CM_EVENT	     /* rdma-core 64: queue an event */
#endif
};

/* Header of every command: command number, input and output lengths in bytes (the header excluded). */
struct ucma_abi_cmd_hdr {
	__u32 cmd;
	__u16 in;
	__u16 out;
};

/* CREATE_ID: uid is echoed in events; answer: the kernel id. */
struct ucma_abi_create_id {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 uid;
	__u64 response;
	__u16 ps;
	__u8  qp_type;
	__u8  reserved[5];
};

struct ucma_abi_create_id_resp {
	__u32 id;
};

/* DESTROY_ID: answer: events the kernel reported for the id. */
struct ucma_abi_destroy_id {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;
	__u32 id;
	__u32 reserved;
};

struct ucma_abi_destroy_id_resp {
	__u32 events_reported;
};

/* BIND_IP (IPv4/IPv6 only). */
struct ucma_abi_bind_ip {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;
	struct sockaddr_in6 addr;
	__u32 id;
};

/* BIND: any family (AF_IB included), addr_size bytes of addr used. */
struct ucma_abi_bind {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	__u16 addr_size;
	__u16 reserved;
	struct sockaddr_storage addr;
};

/* RESOLVE_IP (IPv4/IPv6 only). */
struct ucma_abi_resolve_ip {
	__u32 cmd;
	__u16 in;
	__u16 out;
	struct sockaddr_in6 src_addr;
	struct sockaddr_in6 dst_addr;
	__u32 id;
	__u32 timeout_ms;
};

/* RESOLVE_ADDR: any family, with explicit sizes. */
struct ucma_abi_resolve_addr {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	__u32 timeout_ms;
	__u16 src_size;
	__u16 dst_size;
	__u32 reserved;
	struct sockaddr_storage src_addr;
	struct sockaddr_storage dst_addr;
};

/* RESOLVE_ROUTE. */
struct ucma_abi_resolve_route {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	__u32 timeout_ms;
};

enum {
	UCMA_QUERY_ADDR,
	UCMA_QUERY_PATH,
#if _OPENVERBS_ABI < 64
	UCMA_QUERY_GID
#else
	UCMA_QUERY_GID,
	UCMA_QUERY_IB_SERVICE /* rdma-core 64: the resolved service records */
#endif
};

/* QUERY: option is UCMA_QUERY_ADDR, _PATH or _GID. */
struct ucma_abi_query {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;
	__u32 id;
	__u32 option;
};

/* Answer of QUERY_ROUTE. */
struct ucma_abi_query_route_resp {
	__be64 node_guid;
	struct ib_user_path_rec ib_route[2];
	struct sockaddr_in6 src_addr;
	struct sockaddr_in6 dst_addr;
	__u32 num_paths;
	__u8 port_num;
	__u8 reserved[3];
	__u32 ibdev_index;
	__u32 reserved1;
};

/* Answer of QUERY with UCMA_QUERY_ADDR or UCMA_QUERY_GID. */
struct ucma_abi_query_addr_resp {
	__be64 node_guid;
	__u8  port_num;
	__u8  reserved;
	__be16 pkey;
	__u16 src_size;
	__u16 dst_size;
	struct sockaddr_storage src_addr;
	struct sockaddr_storage dst_addr;
	__u32 ibdev_index;
	__u32 reserved1;
};

/* Answer of QUERY with UCMA_QUERY_PATH: num_paths records follow. */
struct ucma_abi_query_path_resp {
	__u32 num_paths;
	__u32 reserved;
	struct ibv_path_data path_data[0];
};

/* Connection parameters of CONNECT, ACCEPT and connection events. */
struct ucma_abi_conn_param {
	__u32 qp_num;
	__u32 reserved;
	__u8  private_data[RDMA_MAX_PRIVATE_DATA];
	__u8  private_data_len;
	__u8  srq;
	__u8  responder_resources;
	__u8  initiator_depth;
	__u8  flow_control;
	__u8  retry_count;
	__u8  rnr_retry_count;
	__u8  valid;
};

/* Datagram parameters of UD events. */
struct ucma_abi_ud_param {
	__u32 qp_num;
	__u32 qkey;
	struct ib_uverbs_ah_attr ah_attr;
	__u8 private_data[RDMA_MAX_PRIVATE_DATA];
	__u8 private_data_len;
	__u8 reserved[7];
	__u8 reserved2[4];
};

/* Enhanced connection establishment options. */
struct ucma_abi_ece {
	__u32 vendor_id;
	__u32 attr_mod;
};

/* CONNECT. */
struct ucma_abi_connect {
	__u32 cmd;
	__u16 in;
	__u16 out;
	struct ucma_abi_conn_param conn_param;
	__u32 id;
	__u32 reserved;
	struct ucma_abi_ece ece;
};

/* LISTEN. */
struct ucma_abi_listen {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	__u32 backlog;
};

/* ACCEPT (also sent by the active side of a connection to finish it). */
struct ucma_abi_accept {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 uid;
	struct ucma_abi_conn_param conn_param;
	__u32 id;
	__u32 reserved;
	struct ucma_abi_ece ece;
};

/* REJECT with private data and a reason. */
struct ucma_abi_reject {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	__u8  private_data_len;
	__u8  reason;
	__u8  reserved[2];
	__u8  private_data[RDMA_MAX_PRIVATE_DATA];
};

/* DISCONNECT. */
struct ucma_abi_disconnect {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
};

/* INIT_QP_ATTR: answer is a struct ib_uverbs_qp_attr. */
struct ucma_abi_init_qp_attr {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;
	__u32 id;
	__u32 qp_state;
};

/* NOTIFY: an affiliated QP event the application saw. */
struct ucma_abi_notify {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	__u32 event;
};

/* JOIN_IP_MCAST (IPv4/IPv6 only); answer: the kernel id of the group. */
struct ucma_abi_join_ip_mcast {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;
	__u64 uid;
	struct sockaddr_in6 addr;
	__u32 id;
};

/* JOIN_MCAST: any family, with join flags. */
struct ucma_abi_join_mcast {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;
	__u64 uid;
	__u32 id;
	__u16 addr_size;
	__u16 join_flags;
	struct sockaddr_storage addr;
};

/* GET_EVENT: blocks (unless the fd is non-blocking) for the next event. */
struct ucma_abi_get_event {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;
};

/* Answer of GET_EVENT. */
struct ucma_abi_event_resp {
	__u64 uid;
	__u32 id;
	__u32 event;
	__u32 status;
	union {
		struct ucma_abi_conn_param conn;
		struct ucma_abi_ud_param   ud;
#if _OPENVERBS_ABI >= 64
		__u32 arg32[2]; /* USER/INTERNAL events: the 64-bit argument */
#endif
	} param;
	struct ucma_abi_ece ece;
};

/* SET_OPTION: optlen bytes at the user address optval. */
struct ucma_abi_set_option {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 optval;
	__u32 id;
	__u32 level;
	__u32 optname;
	__u32 optlen;
};

/* MIGRATE_ID: moves the id to the event channel fd. */
struct ucma_abi_migrate_id {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;
	__u32 id;
	__u32 fd;
};

/* Answer of MIGRATE_ID. */
struct ucma_abi_migrate_resp {
	__u32 events_reported;
};

#if _OPENVERBS_ABI >= 64
/* rdma-core 64: RESOLVE_IB_SERVICE asks the SA for the service records of
 * a service, named by its 64-bit id (FLAG_ID) or by its name (FLAG_NAME);
 * the answer is an ADDRINFO_RESOLVED or ADDRINFO_ERROR event, then QUERY with
 * UCMA_QUERY_IB_SERVICE returns the records. */
enum {
	UCMA_IB_SERVICE_FLAG_ID = 1 << 0,
	UCMA_IB_SERVICE_FLAG_NAME = 1 << 1,
};

#define UCMA_IB_SERVICE_NAME_SIZE 64
struct ucma_abi_ib_service {
	__u64 service_id;
	__u8 service_name[UCMA_IB_SERVICE_NAME_SIZE];
	__u32 flags;
	__u32 reserved;
};

struct ucma_abi_resolve_ib_service {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	struct ucma_abi_ib_service ibs;
};

/* One service record of the answer (network order where marked). */
struct ucma_user_service_rec {
	__be64 id;
	__u8 gid[16];
	__be16 pkey;
	__u8 reserved[2];
	__be32 lease;
	__u8 key[16];
	__u8 name[64];
	__u8 data_8[16];
	__be16 data_16[8];
	__be32 data_32[4];
	__be64 data_64[2];
};

/* Answer of QUERY with UCMA_QUERY_IB_SERVICE: as many records as fit. */
struct ucma_abi_query_ib_service_resp {
	__u32 num_service_recs;
	struct ucma_user_service_rec recs[];
};

/* WRITE_CM_EVENT: queues event (with status and param) on the id's channel. */
struct ucma_abi_write_cm_event {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	__u32 reserved;
	__u32 event;
	__u32 status;
	union {
		struct ucma_abi_conn_param conn;
		struct ucma_abi_ud_param ud;
		__u64 arg;
	} param;
};
#endif

#endif /* RDMA_CMA_ABI_H */
