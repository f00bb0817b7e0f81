// Printable names for management classes, methods, attributes and MAD
// status codes (umad_class_str(3)).  The strings are those rdma-core 44
// returns, checked exhaustively by tests/umad/differential.sh ("str").
#include "umad/internal.h"

#include <infiniband/umad_cm.h>
#include <infiniband/umad_sa.h>
#include <infiniband/umad_sm.h>
#include <infiniband/umad_str.h>
#include <infiniband/umad_types.h>

#include <endian.h>

namespace {

struct Name {
	unsigned value;
	const char *text;
};

template <size_t N>
const char *lookup(const Name (&table)[N], unsigned value, const char *fallback) noexcept
{
	for (const Name &n : table)
		if (n.value == value)
			return n.text;
	return fallback;
}

const Name kClasses[] = {
	{UMAD_CLASS_SUBN_LID_ROUTED, "Subn"}, {UMAD_CLASS_SUBN_DIRECTED_ROUTE, "Subn"},
	{UMAD_CLASS_SUBN_ADM, "SubnAdm"},     {UMAD_CLASS_PERF_MGMT, "Perf"},
	{UMAD_CLASS_BM, "BM"},                {UMAD_CLASS_DEVICE_MGMT, "DevMgt"},
	{UMAD_CLASS_CM, "ComMgt"},            {UMAD_CLASS_SNMP, "SNMP"},
	{UMAD_CLASS_DEVICE_ADM, "DevAdm"},    {UMAD_CLASS_BOOT_MGMT, "BootMgt"},
	{UMAD_CLASS_BIS, "BIS"},
	// sic: rdma-core spells it this way; programs may compare the text.
	{UMAD_CLASS_CONG_MGMT, "CongestionManagment"},
};

const Name kCommonMethods[] = {
	{UMAD_METHOD_GET, "Get"},
	{UMAD_METHOD_SET, "Set"},
	{UMAD_METHOD_GET_RESP, "GetResp"},
	{UMAD_METHOD_SEND, "Send"},
	{UMAD_METHOD_TRAP, "Trap"},
	{UMAD_METHOD_REPORT, "Report"},
	{UMAD_METHOD_REPORT_RESP, "ReportResp"},
	{UMAD_METHOD_TRAP_REPRESS, "TrapRepress"},
};
// sic: rdma-core 44 returns this unbalanced text for unknown methods.
constexpr const char kUnknownMethod[] = "<unknown";

const Name kSaMethods[] = {
	{UMAD_SA_METHOD_GET_TABLE, "GetTable"},
	{UMAD_SA_METHOD_GET_TABLE_RESP, "GetTableResp"},
	{UMAD_SA_METHOD_DELETE, "Delete"},
	{UMAD_SA_METHOD_DELETE_RESP, "DeleteResp"},
	{UMAD_SA_METHOD_GET_MULTI, "GetMulti"},
	{UMAD_SA_METHOD_GET_MULTI_RESP, "GetMultiResp"},
	{UMAD_SA_METHOD_GET_TRACE_TABLE, "GetTraceTable"},
};

const Name kCommonAttrs[] = {
	{UMAD_ATTR_CLASS_PORT_INFO, "Class Port Info"},
	{UMAD_ATTR_NOTICE, "Notice"},
	{UMAD_ATTR_INFORM_INFO, "Inform Info"},
};

const Name kSmAttrs[] = {
	{UMAD_SM_ATTR_NODE_DESC, "NodeDescription"},
	{UMAD_SM_ATTR_NODE_INFO, "NodeInfo"},
	{UMAD_SM_ATTR_SWITCH_INFO, "SwitchInfo"},
	{UMAD_SM_ATTR_GUID_INFO, "GUIDInfo"},
	{UMAD_SM_ATTR_PORT_INFO, "PortInfo"},
	{UMAD_SM_ATTR_PKEY_TABLE, "P_KeyTable"},
	{UMAD_SM_ATTR_SLVL_TABLE, "SLtoVLMappingTable"},
	{UMAD_SM_ATTR_VL_ARB_TABLE, "VLArbitrationTable"},
	{UMAD_SM_ATTR_LINEAR_FT, "LinearForwardingTable"},
	{UMAD_SM_ATTR_RANDOM_FT, "RandomForwardingTable"},
	{UMAD_SM_ATTR_MCAST_FT, "MulticastForwardingTable"},
	{UMAD_SM_ATTR_SM_INFO, "SMInfo"},
	{UMAD_SM_ATTR_VENDOR_DIAG, "VendorDiag"},
	{UMAD_SM_ATTR_LED_INFO, "LedInfo"},
	{UMAD_SM_ATTR_LINK_SPD_WIDTH_TABLE, "LinkSpeedWidthPairsTable"},
	{UMAD_SM_ATTR_VENDOR_MADS_TABLE, "VendorSpecificMadsTable"},
	{UMAD_SM_ATTR_HIERARCHY_INFO, "HierarchyInfo"},
	{UMAD_SM_ATTR_CABLE_INFO, "CableInfo"},
	{UMAD_SM_ATTR_PORT_INFO_EXT, "PortInfoExtended"},
};

const Name kSaAttrs[] = {
	{UMAD_SA_ATTR_NODE_REC, "NodeRecord"},
	{UMAD_SA_ATTR_PORT_INFO_REC, "PortInfoRecord"},
	{UMAD_SA_ATTR_SLVL_REC, "SLtoVLMappingTableRecord"},
	{UMAD_SA_ATTR_SWITCH_INFO_REC, "SwitchInfoRecord"},
	{UMAD_SA_ATTR_LINEAR_FT_REC, "LinearForwardingTableRecord"},
	{UMAD_SA_ATTR_RANDOM_FT_REC, "RandomForwardingTableRecord"},
	{UMAD_SA_ATTR_MCAST_FT_REC, "MulticastForwardingTableRecord"},
	{UMAD_SA_ATTR_SM_INFO_REC, "SMInfoRecord"},
	{UMAD_SA_ATTR_INFORM_INFO_REC, "InformInfoRecord"},
	{UMAD_SA_ATTR_LINK_REC, "LinkRecord"},
	{UMAD_SA_ATTR_GUID_INFO_REC, "GuidInfoRecord"},
	{UMAD_SA_ATTR_SERVICE_REC, "ServiceRecord"},
	{UMAD_SA_ATTR_PKEY_TABLE_REC, "P_KeyTableRecord"},
	{UMAD_SA_ATTR_PATH_REC, "PathRecord"},
	{UMAD_SA_ATTR_VL_ARB_REC, "VLArbitrationTableRecord"},
	{UMAD_SA_ATTR_MCMEMBER_REC, "MCMemberRecord"},
	{UMAD_SA_ATTR_TRACE_REC, "TraceRecord"},
	{UMAD_SA_ATTR_MULTI_PATH_REC, "MultiPathRecord"},
	{UMAD_SA_ATTR_SERVICE_ASSOC_REC, "ServiceAssociationRecord"},
	{UMAD_SA_ATTR_LINK_SPD_WIDTH_TABLE_REC, "LinkSpeedWidthPairsTableRecord"},
	{UMAD_SA_ATTR_HIERARCHY_INFO_REC, "HierarchyInfoRecord"},
	{UMAD_SA_ATTR_CABLE_INFO_REC, "CableInfoRecord"},
	{UMAD_SA_ATTR_PORT_INFO_EXT_REC, "PortInfoExtendedRecord"},
};

const Name kCmAttrs[] = {
	{UMAD_CM_ATTR_REQ, "ConnectRequest"},
	{UMAD_CM_ATTR_MRA, "MsgRcptAck"},
	{UMAD_CM_ATTR_REJ, "ConnectReject"},
	{UMAD_CM_ATTR_REP, "ConnectReply"},
	{UMAD_CM_ATTR_RTU, "ReadyToUse"},
	{UMAD_CM_ATTR_DREQ, "DisconnectRequest"},
	{UMAD_CM_ATTR_DREP, "DisconnectReply"},
	{UMAD_CM_ATTR_SIDR_REQ, "ServiceIDResReq"},
	{UMAD_CM_ATTR_SIDR_REP, "ServiceIDResReqResp"},
	{UMAD_CM_ATTR_LAP, "LoadAlternatePath"},
	{UMAD_CM_ATTR_APR, "AlternatePathResponse"},
	{UMAD_CM_ATTR_SAP, "SuggestAlternatePath"},
	{UMAD_CM_ATTR_SPR, "SuggestPathResponse"},
};

const Name kSaStatus[] = {
	{UMAD_SA_STATUS_SUCCESS, "Success"},
	{UMAD_SA_STATUS_NO_RESOURCES, "No Resources"},
	{UMAD_SA_STATUS_REQ_INVALID, "Request Invalid"},
	{UMAD_SA_STATUS_NO_RECORDS, "No Records"},
	{UMAD_SA_STATUS_TOO_MANY_RECORDS, "Too Many Records"},
	{UMAD_SA_STATUS_INVALID_GID, "Invalid GID"},
	{UMAD_SA_STATUS_INSUF_COMPS, "Insufficient Components"},
	{UMAD_SA_STATUS_REQ_DENIED, "Request Denied"},
	{UMAD_SA_STATUS_PRI_SUGGESTED, "Priority Suggested"},
};

const Name kInvalidField[] = {
	{UMAD_STATUS_BAD_VERSION, "Bad Version"},
	{UMAD_STATUS_METHOD_NOT_SUPPORTED, "Method not supported"},
	{UMAD_STATUS_ATTR_NOT_SUPPORTED, "Method/Attribute combo not supported"},
	{UMAD_STATUS_INVALID_ATTR_VALUE, "Invalid attribute/modifier field"},
};

bool in_range(unsigned v, unsigned lo, unsigned hi) noexcept { return v >= lo && v <= hi; }

} // namespace

UMAD_EXPORT const char *umad_class_str(uint8_t mgmt_class)
{
	if (const char *s = lookup(kClasses, mgmt_class, nullptr))
		return s;
	if (in_range(mgmt_class, UMAD_CLASS_VENDOR_RANGE1_START, UMAD_CLASS_VENDOR_RANGE1_END) ||
	    in_range(mgmt_class, UMAD_CLASS_VENDOR_RANGE2_START, UMAD_CLASS_VENDOR_RANGE2_END))
		return "Vendor";
	if (in_range(mgmt_class, UMAD_CLASS_APPLICATION_START, UMAD_CLASS_APPLICATION_END))
		return "Application";
	return "<unknown>";
}

UMAD_EXPORT const char *umad_method_str(uint8_t mgmt_class, uint8_t method)
{
	if (mgmt_class == UMAD_CLASS_SUBN_ADM)
		if (const char *s = lookup(kSaMethods, method, nullptr))
			return s;
	return lookup(kCommonMethods, method, kUnknownMethod);
}

UMAD_EXPORT const char *umad_attribute_str(uint8_t mgmt_class, __be16 attr_id)
{
	unsigned id = be16toh(attr_id);
	const char *s = nullptr;
	switch (mgmt_class) {
	case UMAD_CLASS_SUBN_LID_ROUTED:
	case UMAD_CLASS_SUBN_DIRECTED_ROUTE:
		s = lookup(kSmAttrs, id, nullptr);
		break;
	case UMAD_CLASS_SUBN_ADM:
		s = lookup(kSaAttrs, id, nullptr);
		break;
	case UMAD_CLASS_CM:
		s = lookup(kCmAttrs, id, nullptr);
		break;
	default:
		break;
	}
	return s ? s : lookup(kCommonAttrs, id, "<unknown>");
}

UMAD_EXPORT const char *umad_common_mad_status_str(__be16 status)
{
	unsigned s = be16toh(status);
	if (s & UMAD_STATUS_BUSY)
		return "Busy";
	if (s & UMAD_STATUS_REDIRECT)
		return "Redirection required";
	return lookup(kInvalidField, s & UMAD_STATUS_INVALID_FIELD_MASK, "Success");
}

UMAD_EXPORT const char *umad_sa_mad_status_str(__be16 status)
{
	unsigned s = be16toh(status);
	return lookup(kSaStatus, (s & UMAD_STATUS_CLASS_MASK) >> 8, "Undefined Error");
}
