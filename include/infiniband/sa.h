/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * openverbs: <infiniband/sa.h>
 *
 * Host-order views of InfiniBand subnet administration (SA) records, as
 * used by librdmacm (rdma_cm(7)) and by ibv_copy_path_rec_from_kern() /
 * ibv_copy_path_rec_to_kern(), plus the wire-format path record that
 * rdma_set_option(RDMA_OPTION_IB_PATH) takes.  Layouts match rdma-core 44.
 */
#ifndef INFINIBAND_SA_H
#define INFINIBAND_SA_H

#include <infiniband/verbs.h>
#include <linux/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A PathRecord (IBA 15.2.5.16).  GIDs, LIDs, flow label and P_Key keep
 * network byte order; the selector/value pairs are the raw 2-bit and 6-bit
 * IB encodings.
 */
struct ibv_sa_path_rec {
	/* reserved */
	/* reserved */
	union ibv_gid dgid;
	union ibv_gid sgid;
	__be16 dlid;
	__be16 slid;
	int raw_traffic;
	/* reserved */
	__be32 flow_label;
	uint8_t hop_limit;
	uint8_t traffic_class;
	int reversible;
	uint8_t numb_path;
	__be16 pkey;
	/* reserved */
	uint8_t sl;
	uint8_t mtu_selector;
	uint8_t mtu;
	uint8_t rate_selector;
	uint8_t rate;
	uint8_t packet_life_time_selector;
	uint8_t packet_life_time;
	uint8_t preference;
};

/* A MCMemberRecord (IBA 15.2.5.17); join_state bits per the spec. */
struct ibv_sa_mcmember_rec {
	union ibv_gid mgid;
	union ibv_gid port_gid;
	uint32_t qkey;
	uint16_t mlid;
	uint8_t mtu_selector;
	uint8_t mtu;
	uint8_t traffic_class;
	uint16_t pkey;
	uint8_t rate_selector;
	uint8_t rate;
	uint8_t packet_life_time_selector;
	uint8_t packet_life_time;
	uint8_t sl;
	uint32_t flow_label;
	uint8_t hop_limit;
	uint8_t scope;
	uint8_t join_state;
	int proxy_join;
};

/* A ServiceRecord (IBA 15.2.5.14). */
struct ibv_sa_service_rec {
	uint64_t id;
	union ibv_gid gid;
	uint16_t pkey;
	/* reserved */
	uint32_t lease;
	uint8_t key[16];
	uint8_t name[64];
	uint8_t data8[16];
	uint16_t data16[8];
	uint32_t data32[4];
	uint64_t data64[2];
};

/* ibv_path_record.reversible_numpath: the path is reversible. */
#define IBV_PATH_RECORD_REVERSIBLE 0x80

/*
 * A PathRecord exactly as it travels on the wire (64 bytes, big endian
 * multi-byte fields).
 */
struct ibv_path_record {
	__be64 service_id;
	union ibv_gid dgid;
	union ibv_gid sgid;
	__be16 dlid;
	__be16 slid;
	__be32 flowlabel_hoplimit;	/* reserved:4 flow label:20 hop limit:8 */
	uint8_t tclass;
	uint8_t reversible_numpath;	/* reversible:1 reserved:2 numb path:5 */
	__be16 pkey;
	__be16 qosclass_sl;	/* QoS class:12 SL:4 */
	uint8_t mtu;		/* selector:2 MTU:6 */
	uint8_t rate;		/* selector:2 rate:6 */
	uint8_t packetlifetime;	/* selector:2 lifetime:6 */
	uint8_t preference;
	uint8_t reserved[6];
};

/* ibv_path_data.flags: how a path may be used. */
#define IBV_PATH_FLAG_GMP (1 << 0)
#define IBV_PATH_FLAG_PRIMARY (1 << 1)
#define IBV_PATH_FLAG_ALTERNATE (1 << 2)
#define IBV_PATH_FLAG_OUTBOUND (1 << 3)
#define IBV_PATH_FLAG_INBOUND (1 << 4)
#define IBV_PATH_FLAG_INBOUND_REVERSE (1 << 5)
#define IBV_PATH_FLAG_BIDIRECTIONAL                                          \
	(IBV_PATH_FLAG_OUTBOUND | IBV_PATH_FLAG_INBOUND_REVERSE)

/* A wire path record with its usage flags (rdma_set_option(3)). */
struct ibv_path_data {
	uint32_t flags;		/* IBV_PATH_FLAG_* */
	uint32_t reserved;
	struct ibv_path_record path;
};

#ifdef __cplusplus
}
#endif

#endif /* INFINIBAND_SA_H */
