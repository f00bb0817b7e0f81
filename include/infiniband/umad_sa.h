/*
 * openverbs: Subnet Administration (class 0x03) methods, status codes,
 * attribute IDs, capability bits and the SA MAD layout (IBA chapter 15).
 * ABI-identical to rdma-core 44's <infiniband/umad_sa.h>.
 */
#ifndef _UMAD_SA_H
#define _UMAD_SA_H

#include <infiniband/umad_types.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
	UMAD_SA_CLASS_VERSION = 2, /* IBA 1.1 and 1.2 */

	UMAD_SA_METHOD_GET_TABLE = 0x12,
	UMAD_SA_METHOD_GET_TABLE_RESP = 0x92,
	UMAD_SA_METHOD_DELETE = 0x15,
	UMAD_SA_METHOD_DELETE_RESP = 0x95,
	UMAD_SA_METHOD_GET_MULTI = 0x14,
	UMAD_SA_METHOD_GET_MULTI_RESP = 0x94,
	UMAD_SA_METHOD_GET_TRACE_TABLE = 0x13
};

/* Class-specific status (upper byte of the MAD status). */
enum {
	UMAD_SA_STATUS_SUCCESS = 0,
	UMAD_SA_STATUS_NO_RESOURCES = 1,
	UMAD_SA_STATUS_REQ_INVALID = 2,
	UMAD_SA_STATUS_NO_RECORDS = 3,
	UMAD_SA_STATUS_TOO_MANY_RECORDS = 4,
	UMAD_SA_STATUS_INVALID_GID = 5,
	UMAD_SA_STATUS_INSUF_COMPS = 6,
	UMAD_SA_STATUS_REQ_DENIED = 7,
	UMAD_SA_STATUS_PRI_SUGGESTED = 8
};

enum {
	UMAD_SA_ATTR_NODE_REC = 0x0011,
	UMAD_SA_ATTR_PORT_INFO_REC = 0x0012,
	UMAD_SA_ATTR_SLVL_REC = 0x0013,
	UMAD_SA_ATTR_SWITCH_INFO_REC = 0x0014,
	UMAD_SA_ATTR_LINEAR_FT_REC = 0x0015,
	UMAD_SA_ATTR_RANDOM_FT_REC = 0x0016,
	UMAD_SA_ATTR_MCAST_FT_REC = 0x0017,
	UMAD_SA_ATTR_SM_INFO_REC = 0x0018,
	UMAD_SA_ATTR_LINK_SPD_WIDTH_TABLE_REC = 0x0019,
	UMAD_SA_ATTR_INFORM_INFO_REC = 0x00F3,
	UMAD_SA_ATTR_LINK_REC = 0x0020,
	UMAD_SA_ATTR_GUID_INFO_REC = 0x0030,
	UMAD_SA_ATTR_SERVICE_REC = 0x0031,
	UMAD_SA_ATTR_PKEY_TABLE_REC = 0x0033,
	UMAD_SA_ATTR_PATH_REC = 0x0035,
	UMAD_SA_ATTR_VL_ARB_REC = 0x0036,
	UMAD_SA_ATTR_MCMEMBER_REC = 0x0038,
	UMAD_SA_ATTR_TRACE_REC = 0x0039,
	UMAD_SA_ATTR_MULTI_PATH_REC = 0x003A,
	UMAD_SA_ATTR_SERVICE_ASSOC_REC = 0x003B,
	UMAD_SA_ATTR_HIERARCHY_INFO_REC = 0x003C,
	UMAD_SA_ATTR_CABLE_INFO_REC = 0x003D,
	UMAD_SA_ATTR_PORT_INFO_EXT_REC = 0x003E
};

enum {
	UMAD_LEN_SA_DATA = 200
};

/* ClassPortInfo:CapabilityMask bits of the SA. */
enum {
	UMAD_SA_CAP_MASK_IS_SUBNET_OPT_REC_SUP = (1 << 8),
	UMAD_SA_CAP_MASK_IS_UD_MCAST_SUP = (1 << 9),
	UMAD_SA_CAP_MASK_IS_MULTIPATH_SUP = (1 << 10),
	UMAD_SA_CAP_MASK_IS_REINIT_SUP = (1 << 11),
	UMAD_SA_CAP_MASK_IS_GID_SCOPED_MULTIPATH_SUP = (1 << 12),
	UMAD_SA_CAP_MASK_IS_PORTINFO_CAP_MASK_MATCH_SUP = (1 << 13),
	UMAD_SA_CAP_MASK_IS_LINK_SPEED_WIDTH_PAIRS_REC_SUP = (1 << 14),
	UMAD_SA_CAP_MASK_IS_PA_SERVICES_SUP = (1 << 15)
};

/* ClassPortInfo:CapabilityMask2 bits of the SA. */
enum {
	UMAD_SA_CAP_MASK2_IS_UNPATH_REPATH_SUP = (1 << 0),
	UMAD_SA_CAP_MASK2_IS_QOS_SUP = (1 << 1),
	UMAD_SA_CAP_MASK2_IS_REV_PATH_PKEY_MEM_BIT_SUP = (1 << 2),
	UMAD_SA_CAP_MASK2_IS_MCAST_TOP_SUP = (1 << 3),
	UMAD_SA_CAP_MASK2_IS_HIERARCHY_INFO_SUP = (1 << 4),
	UMAD_SA_CAP_MASK2_IS_ADDITIONAL_GUID_SUP = (1 << 5),
	UMAD_SA_CAP_MASK2_IS_FULL_PORTINFO_REC_SUP = (1 << 6),
	UMAD_SA_CAP_MASK2_IS_EXT_SPEEDS_SUP = (1 << 7),
	UMAD_SA_CAP_MASK2_IS_MCAST_SERVICE_REC_SUP = (1 << 8),
	UMAD_SA_CAP_MASK2_IS_CABLE_INFO_REC_SUP = (1 << 9),
	UMAD_SA_CAP_MASK2_IS_PORT_INFO_CAPMASK2_MATCH_SUP = (1 << 10),
	UMAD_SA_CAP_MASK2_IS_PORT_INFO_EXT_REC_SUP = (1 << 11)
};

/* Selector of rate, MTU and packet-lifetime fields (PathRecord, MCMemberRecord). */
enum {
	UMAD_SA_SELECTOR_GREATER_THAN = 0,
	UMAD_SA_SELECTOR_LESS_THAN = 1,
	UMAD_SA_SELECTOR_EXACTLY = 2,
	UMAD_SA_SELECTOR_LARGEST_AVAIL = 3, /* rate and MTU */
	UMAD_SA_SELECTOR_SMALLEST_AVAIL = 3 /* packet lifetime */
};

#define UMAD_SA_SELECTOR_SHIFT 6
#define UMAD_SA_RATE_MTU_PKT_LIFE_MASK 0x3f
#define UMAD_SA_SELECTOR_MASK 0x3

/* SA MAD, 256 bytes; sm_key sits at offset 36, hence a byte array. */
struct umad_sa_packet {
	struct umad_hdr mad_hdr;
	struct umad_rmpp_hdr rmpp_hdr;
	uint8_t sm_key[8]; /* network byte order */
	__be16 attr_offset;
	__be16 reserved;
	__be64 comp_mask;
	uint8_t data[UMAD_LEN_SA_DATA]; /* network byte order */
};

/* The 6-bit value without its selector. */
static inline uint8_t umad_sa_get_rate_mtu_or_life(uint8_t rate_mtu_or_life)
{
	return rate_mtu_or_life & UMAD_SA_RATE_MTU_PKT_LIFE_MASK;
}

/* Selector in bits 7..6, value in bits 5..0. */
static inline uint8_t umad_sa_set_rate_mtu_or_life(uint8_t selector,
						   uint8_t rate_mtu_or_life)
{
	return (uint8_t)(((selector & UMAD_SA_SELECTOR_MASK)
			  << UMAD_SA_SELECTOR_SHIFT) |
			 (rate_mtu_or_life & UMAD_SA_RATE_MTU_PKT_LIFE_MASK));
}

#ifdef __cplusplus
}
#endif
#endif /* _UMAD_SA_H */
