/*
 * openverbs: libibumad.so.3 public interface (user-space access to the
 * kernel's ib_umad management-datagram service).
 *
 * Layouts, names and constants are those of rdma-core 44's libibumad-dev;
 * the text is this project's own.  Every function is described in man/umad_*.3.
 */
#ifndef _UMAD_H
#define _UMAD_H

#include <arpa/inet.h>
#include <endian.h>
#include <linux/types.h> /* __be16, __be32, __be64 */
#include <stdint.h>
#include <stdlib.h>
#include <infiniband/openverbs_abi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Obsolete spellings of the kernel's big-endian types, kept for old code. */
typedef __be16 __attribute__((deprecated)) be16_t;
typedef __be32 __attribute__((deprecated)) be32_t;
typedef __be64 __attribute__((deprecated)) be64_t;

/*
 * A 128-bit GID as carried inside MADs: packed, 4-byte aligned (unlike
 * union ibv_gid), so never alias the two.
 */
union umad_gid {
	uint8_t raw[16];
	__be16 raw_be16[8];
	struct {
		__be64 subnet_prefix;
		__be64 interface_id;
	} global;
} __attribute__((aligned(4))) __attribute__((packed));

#if _OPENVERBS_ABI >= 64
#define UMAD_MAX_DEVICES 128	/* rdma-core 64 (32 before) */
#else
#define UMAD_MAX_DEVICES 32
#endif
#define UMAD_ANY_PORT 0

/* Address vector of a MAD (struct ib_user_mad_hdr's address part); 44 bytes. */
typedef struct ib_mad_addr {
	__be32 qpn;
	__be32 qkey;
	__be16 lid;
	uint8_t sl;
	uint8_t path_bits;
	uint8_t grh_present;
	uint8_t gid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	union {
		uint8_t gid[16]; /* network byte order */
		union umad_gid ib_gid;
	};
	__be32 flow_label;
	uint16_t pkey_index;
	uint8_t reserved[6];
} ib_mad_addr_t;

/* What read()/write() on /dev/infiniband/umadN exchange: header, then the MAD. */
typedef struct ib_user_mad {
	uint32_t agent_id;
	uint32_t status;
	uint32_t timeout_ms;
	uint32_t retries;
	uint32_t length;
	ib_mad_addr_t addr;
	uint8_t data[0];
} ib_user_mad_t;

#define IB_UMAD_ABI_VERSION 5
#define IB_UMAD_ABI_DIR "/sys/class/infiniband_mad"
#define IB_UMAD_ABI_FILE "abi_version"

/* ioctl numbers of the umad character device (kernel uapi rdma/ib_user_mad.h). */
#define IB_IOCTL_MAGIC 0x1b
#define IB_USER_MAD_REGISTER_AGENT _IOWR(IB_IOCTL_MAGIC, 1, struct ib_user_mad_reg_req)
#define IB_USER_MAD_UNREGISTER_AGENT _IOW(IB_IOCTL_MAGIC, 2, uint32_t)
#define IB_USER_MAD_ENABLE_PKEY _IO(IB_IOCTL_MAGIC, 3)
#define IB_USER_MAD_REGISTER_AGENT2 _IOWR(IB_IOCTL_MAGIC, 4, struct ib_user_mad_reg_req2)

#define UMAD_CA_NAME_LEN 20
#define UMAD_CA_MAX_PORTS 10 /* port numbers 0..9 */
#define UMAD_CA_MAX_AGENTS 32

/* sysfs names read by the library. */
#define SYS_INFINIBAND "/sys/class/infiniband"
#define SYS_INFINIBAND_MAD "/sys/class/infiniband_mad"
#define SYS_IB_MAD_PORT "port"
#define SYS_IB_MAD_DEV "ibdev"

#if _OPENVERBS_ABI >= 64
#define UMAD_MAX_PORTS 192	/* rdma-core 64 (64 before) */
#else
#define UMAD_MAX_PORTS 64
#endif

#define SYS_CA_PORTS_DIR "ports"

#define SYS_NODE_TYPE "node_type"
#define SYS_CA_FW_VERS "fw_ver"
#define SYS_CA_HW_VERS "hw_rev"
#define SYS_CA_TYPE "hca_type"
#define SYS_CA_NODE_GUID "node_guid"
#define SYS_CA_SYS_GUID "sys_image_guid"

#define SYS_PORT_LMC "lid_mask_count"
#define SYS_PORT_SMLID "sm_lid"
#define SYS_PORT_SMSL "sm_sl"
#define SYS_PORT_LID "lid"
#define SYS_PORT_STATE "state"
#define SYS_PORT_PHY_STATE "phys_state"
#define SYS_PORT_CAPMASK "cap_mask"
#define SYS_PORT_RATE "rate"
#define SYS_PORT_GUID "port_guid"
#define SYS_PORT_GID "gids/0"
#define SYS_PORT_LINK_LAYER "link_layer"

/*
 * One port as sysfs describes it (umad_get_port).  112 bytes.  pkeys is
 * allocated by the library and released by umad_release_port().
 */
typedef struct umad_port {
	char ca_name[UMAD_CA_NAME_LEN];
	int portnum;
	unsigned base_lid;
	unsigned lmc;
	unsigned sm_lid;
	unsigned sm_sl;
	unsigned state;      /* 1 DOWN .. 4 ACTIVE, 5 ACTIVE_DEFER */
	unsigned phys_state; /* 2 POLLING, 3 DISABLED, 5 LINKUP, ... */
	unsigned rate;       /* Gb/s, integer part */
	__be32 capmask;
	__be64 gid_prefix;
	__be64 port_guid;
	unsigned pkeys_size;
	uint16_t *pkeys;
	char link_layer[UMAD_CA_NAME_LEN];
} umad_port_t;

/* One channel adapter or switch (umad_get_ca).  208 bytes. */
typedef struct umad_ca {
	char ca_name[UMAD_CA_NAME_LEN];
	unsigned node_type; /* 1 CA, 2 switch, 3 router */
	int numports;
	char fw_ver[20];
	char ca_type[40];
	char hw_ver[20];
	__be64 node_guid;
	__be64 system_guid;
	umad_port_t *ports[UMAD_CA_MAX_PORTS];
} umad_ca_t;

#if _OPENVERBS_ABI >= 56
/*
 * rdma-core 56: one management entity of the fabric as a pair of ports:
 * the device and port that carry subnet management (SMI, QP0) and the
 * device and port for general services (GSI, QP1).  On a classic HCA both
 * name the same device and port; on devices that split them (a separate
 * SMI device sharing the port GUID of the data device, IsSMDisabled set on
 * the data device's port) they differ.  Filled by umad_get_smi_gsi_pairs(3)
 * and umad_get_smi_gsi_pair_by_ca_name(3); ports are 0 for a switch.
 */
struct umad_ca_pair {
	char smi_name[UMAD_CA_NAME_LEN];
	uint32_t smi_preferred_port;
	char gsi_name[UMAD_CA_NAME_LEN];
	uint32_t gsi_preferred_port;
};
#endif

/* Element of the list umad_get_ca_device_list() returns. */
struct umad_device_node {
	struct umad_device_node *next;
	const char *ca_name;
};

/*
 * umad_init/umad_done: kept for old programs; do nothing, return 0.
 * (umad_init(3); the ABI check happens in umad_open_port.)
 */
int umad_init(void);
int umad_done(void);

/*
 * Names of at most max local devices of node type 1..3, alphabetical,
 * names >= UMAD_CA_NAME_LEN characters skipped.  Returns the count; 1 and
 * "mthca0" when /sys/class/infiniband cannot be listed; -EINVAL for a NULL
 * cas with max > 0.  (umad_get_ca(3))
 */
int umad_get_cas_names(char cas[][UMAD_CA_NAME_LEN], int max);
/*
 * GUIDs of ports 0..numports (network order, 0 for a missing port).
 * Returns the count (0 with NULL portguids), -ENODEV (no device chosen),
 * -1 (device unreadable), -ENOMEM (max < numports + 1).  (umad_get_ca(3))
 */
int umad_get_ca_portguids(const char *ca_name, __be64 *portguids, int max);

/*
 * Fills *ca from /sys/class/infiniband/<ca>/ (NULL: the default device);
 * ports[] are allocated, release with umad_release_ca.  0, -ENODEV,
 * -ENOENT (node_type, GUIDs or ports/ missing), -EINVAL (bad GUID, NULL ca),
 * -EIO (a port unreadable or numbered >= UMAD_CA_MAX_PORTS), -ENOMEM.
 */
int umad_get_ca(const char *ca_name, umad_ca_t *ca);
/* Frees ca->ports[]; 0, -ENODEV for NULL.  (umad_get_ca(3)) */
int umad_release_ca(umad_ca_t *ca);
/*
 * Fills *port from /sys/class/infiniband/<ca>/ports/<n>/: lid, lid_mask_count,
 * sm_lid, sm_sl, state, phys_state, rate (Gb/s, integer part), cap_mask
 * (stored big-endian), link_layer ("IB" if absent), gids/0 (prefix, GUID),
 * pkeys/N (allocated).  ca_name NULL and/or portnum 0 choose the default as
 * rdma-core 44 does (IB link layer, ACTIVE first, switch port 0).
 * 0, -ENODEV (nothing to choose), -EIO (missing/malformed attribute),
 * -EINVAL (NULL port).  (umad_get_port(3))
 */
int umad_get_port(const char *ca_name, int portnum, umad_port_t *port);
/* Frees port->pkeys, zeroes pkeys/pkeys_size; 0, -ENODEV for NULL. */
int umad_release_port(umad_port_t *port);

/*
 * "/dev/infiniband/issmN" of the chosen port into path (max bytes).
 * 0, -ENODEV, -EINVAL (no umad device for the port, NULL path, max <= 0).
 * (umad_open_port(3))
 */
int umad_get_issm_path(const char *ca_name, int portnum, char path[], int max);

/*
 * Opens /dev/infiniband/umadN (O_RDWR|O_NONBLOCK) of the chosen port and
 * returns the descriptor; -EOPNOTSUPP (infiniband_mad/abi_version unreadable
 * or < 5), -ENODEV, -EINVAL (port has no umad device), -EIO (open failed).
 * (umad_open_port(3))
 */
int umad_open_port(const char *ca_name, int portnum);
#if _OPENVERBS_ABI >= 56
/*
 * rdma-core 56: umad_open_port() restricted to SMI ports (InfiniBand link
 * layer, IsSMDisabled clear in the capability mask; a switch's port 0).
 * Same defaults and errors; -ENODEV also when the named or chosen port is
 * no SMI port.  (umad_open_smi_port(3))
 */
int umad_open_smi_port(const char *ca_name, int portnum);
#endif
/* close(2) of the descriptor; returns 0. */
int umad_close_port(int portid);

/* Start of the MAD in a umad buffer (after umad_size() bytes); NULL for NULL. */
void *umad_get_mad(void *umad);
/* Header size: 64 with the P_Key-index header (see umad_open_port), else 56. */
size_t umad_size(void);
/* The header's status (0 or an errno value such as ETIMEDOUT). */
int umad_status(void *umad);

/* The address part of a umad buffer; NULL for NULL.  (umad_get_mad(3)) */
ib_mad_addr_t *umad_get_mad_addr(void *umad);
/* Declared by rdma-core 44's header but never exported by its library. */
int umad_set_grh_net(void *umad, void *mad_addr);
/*
 * Copies gid, hop_limit, traffic_class and flow_label (host order in,
 * network order out) from mad_addr and sets grh_present; NULL clears it.
 * 0, -EINVAL for a NULL umad.
 */
int umad_set_grh(void *umad, void *mad_addr);
/* Destination with dlid, dqp, qkey already big-endian; 0 or -EINVAL. */
int umad_set_addr_net(void *umad, __be16 dlid, __be32 dqp, int sl, __be32 qkey);
/* Destination from host-order values; 0 or -EINVAL. */
int umad_set_addr(void *umad, int dlid, int dqp, int sl, int qkey);
/* P_Key index (only with the 64-byte header, else ignored); 0 or -EINVAL. */
int umad_set_pkey(void *umad, int pkey_index);
/* P_Key index, 0 with the old header; -EINVAL for NULL. */
int umad_get_pkey(void *umad);

/*
 * Writes umad_size() + length bytes; the kernel retries requests `retries`
 * times every timeout_ms ms.  0, or -EIO with errno = the write error.
 * (umad_send(3))
 */
int umad_send(int portid, int agentid, void *umad, int length, int timeout_ms,
	      int retries);
/*
 * Reads one MAD (room for *length MAD bytes), waiting up to timeout_ms
 * (0: no wait, -1: forever).  Returns the agent id and sets *length, or
 * -ETIMEDOUT, -EIO (poll), -EWOULDBLOCK/-EAGAIN (nothing queued), -ENOSPC
 * (*length = size needed), -EINVAL; errno is set too.  (umad_send(3))
 */
int umad_recv(int portid, void *umad, int *length, int timeout_ms);
/* Waits for a MAD: 0, -ETIMEDOUT, -EIO.  (umad_send(3)) */
int umad_poll(int portid, int timeout_ms);
/* The descriptor itself (for poll/select). */
int umad_get_fd(int portid);

/*
 * Registers an agent for mgmt_class/mgmt_version with the OpenIB OUI; QP0
 * for classes 0x01/0x81, QP1 otherwise; method_mask 128 bits (NULL: none).
 * Returns the agent id or -EPERM (errno from the kernel).  (umad_register(3))
 */
int umad_register(int portid, int mgmt_class, int mgmt_version,
		  uint8_t rmpp_version, long method_mask[16 / sizeof(long)]);
/* Vendor range 2 class (0x30..0x4f) with an OUI: id, -EINVAL or -EPERM. */
int umad_register_oui(int portid, int mgmt_class, uint8_t rmpp_version,
		      uint8_t oui[3], long method_mask[16 / sizeof(long)]);
/* ioctl(IB_USER_MAD_UNREGISTER_AGENT): 0, or -1 with errno. */
int umad_unregister(int portid, int agentid);
/*
 * Sorts the list by ca_name (strcmp); size is a hint (0: count it).
 * 0, -EINVAL (NULL head), -ENOMEM.  (umad_get_ca_device_list(3))
 */
int umad_sort_ca_device_list(struct umad_device_node **head, size_t size);
/*
 * Devices of /sys/class/infiniband with node type 1..3, directory order.
 * NULL with errno 0 when there is none; NULL with errno (ENOMEM, opendir's
 * error) on failure.  Free with umad_free_ca_device_list.
 */
struct umad_device_node *umad_get_ca_device_list(void);
void umad_free_ca_device_list(struct umad_device_node *head);

/* umad_reg_attr.flags */
enum {
	UMAD_USER_RMPP = (1 << 0)
};

/* Argument of umad_register2(). */
struct umad_reg_attr {
	uint8_t mgmt_class;
	uint8_t mgmt_class_version;
	uint32_t flags;
	uint64_t method_mask[2];
	uint32_t oui;
	uint8_t rmpp_version;
};

/*
 * REGISTER_AGENT2 ioctl, falling back to the original ioctl on ENOTTY or
 * EINVAL when attr->flags is 0.  Returns 0 (id in *agent_id) or a POSITIVE
 * errno: EINVAL (NULL argument, vendor range 2 without a 24-bit OUI) or the
 * kernel's; on failure attr->flags = flags the kernel supports.
 * (umad_register(3))
 */
int umad_register2(int port_fd, struct umad_reg_attr *attr, uint32_t *agent_id);

/* Sets the trace level (level >= 0) and returns the level in force. */
int umad_debug(int level);
/* Print a umad header / an address on stderr ("ibwarn: [pid] func: ..."). */
void umad_addr_dump(ib_mad_addr_t *addr);
void umad_dump(void *umad);
#if _OPENVERBS_ABI >= 56
/*
 * rdma-core 56: the SMI/GSI pairs of the local devices into cas[0..max-1]
 * (zeroed first), one per port GUID, in device-list order.  Returns the
 * number filled, -1 for a NULL cas with max > 0.  (umad_get_smi_gsi_pairs(3))
 */
int umad_get_smi_gsi_pairs(struct umad_ca_pair cas[], size_t max);
/*
 * rdma-core 56: the pair one of whose devices is devname (NULL: any) and
 * whose port on that device is portnum (0: any), with enforce_smi only
 * pairs that have an SMI side.  0 and *ca_pair filled; 1 when no pair
 * matches; -1 for a NULL ca_pair.  (umad_get_smi_gsi_pair_by_ca_name(3))
 */
int umad_get_smi_gsi_pair_by_ca_name(const char *devname, uint8_t portnum,
				     struct umad_ca_pair *ca_pair,
				     unsigned enforce_smi);
#endif

/* Buffers for umad_send/umad_recv: num zeroed blocks of size bytes. */
static inline void *umad_alloc(int num, size_t size)
{
	return calloc(num, size);
}

static inline void umad_free(void *umad)
{
	free(umad);
}

/* Old helpers; new code calls be64toh()/htobe64() directly. Written with
 * the compiler's byte swap so that the header also compiles in strict ISO C
 * modes, where <endian.h> hides be64toh(). */
static inline uint64_t __umad_swap_be64(uint64_t x)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return __builtin_bswap64(x);
#else
	return x;
#endif
}
#ifndef ntohll
#undef ntohll
static inline __attribute__((deprecated)) uint64_t ntohll(uint64_t x)
{
	return __umad_swap_be64(x);
}
#define ntohll ntohll
#endif
#ifndef htonll
#undef htonll
static inline __attribute__((deprecated)) uint64_t htonll(uint64_t x)
{
	return __umad_swap_be64(x);
}
#define htonll htonll
#endif

#ifdef __cplusplus
}
#endif
#endif /* _UMAD_H */
