// openverbs RoCE v2 software device (sroce0, sroce1, ...): the soft device's
// objects (PD, MR and key table, CQ, SRQ, AH, the QP's queues and state
// machine: ../objects.h) with a transport of its own: RoCE v2 packets
// (wire.h) over one UDP socket bound to port 4791 on a network interface,
// instead of copies into a peer's shared segment. src/DESIGN.md ("RoCE v2
// software device") describes the whole design.
//
// Locking: RoceCtx::lock guards the transport state of every QP of the
// context (RoceQp), the QP table and, for its QPs, the send queue ring
// (SoftQp::sq, sq_head, sq_count): the receive thread takes it for each
// packet, the verbs (post_send, modify_qp, destroy_qp) around their work.
// Within it the soft device's own send-queue guard (qp_sq_lock) is taken
// where the soft code expects it (qp_to_error).
#pragma once

#include "../soft.h"
#include "wire.h"

#include <atomic>
#include <memory>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103 // <linux/udp.h>: a GSO train's packet size (cmsg, Linux 4.18)
#endif
#ifndef UDP_GRO
#define UDP_GRO 104 // <linux/udp.h>: receive trains whole (Linux 5.0)
#endif

struct nl_sock; // libnl's socket (<netlink/socket.h>): the link watch

namespace ovsoft {

inline constexpr uint32_t kRoceMaxGids = 16;
inline constexpr uint32_t kRoceMaxWindow = 256;  // packets in flight per QP, at most
inline constexpr uint32_t kRoceAckEvery = 16;    // AckReq on every n-th packet too
inline constexpr int kRoceBatch = 16;            // datagrams per recvmmsg
// A receive buffer holds a whole UDP datagram, which with UDP_GRO may be a
// train of packets of one size (device.cpp, open_socket).
inline constexpr size_t kRoceRxBuffer = 65536;
// Transmit batch (transport.cpp, "transmit"): packets built in place and
// sent together by one sendmmsg when the lock holder is done, or when full.
inline constexpr uint32_t kRoceTxBatch = 128;
inline constexpr size_t kRoceTxSlot = 4224; // headers, 4096-byte payload, pad, ICRC
// UDP GSO (UDP_SEGMENT): consecutive packets to one address, all of one
// size but a shorter last one, go as one train of at most this many
// packets and bytes (Linux 6.1's UDP_MAX_SEGMENTS; the IP length limit).
inline constexpr uint32_t kRoceGsoSegs = 64;
inline constexpr uint32_t kRoceGsoBytes = 65000;
// An ACK asked for by a single-packet request (SEND or RDMA WRITE Only)
// waits up to this long for a packet of the same QP to follow (the
// application's answer): it then goes right behind it, so that a
// ping-pong's peer, polling its CQ for the ACK, finds the answer first.
// ACKs within a message, and those of longer messages, go when the batch
// that asked for them is done (coalesced: one per QP).
inline constexpr uint64_t kRoceAckDelayNs = 50000;
// While application threads poll CQs of the device, they read the socket
// themselves (roce_drain) and send the delayed ACKs that fall due; the
// receive thread keeps only the retransmission and RNR timers, and only
// when one is due (RoceCtx::timer_hint_ns): a thread woken for each datagram
// would take a core from the spinning application. The receive thread looks
// once per window whether they polled since it last looked
// (RoceCtx::app_polls counts the polls: no clock read per poll) and watches
// the socket again once they did not, or when one of them armed a CQ's
// notification (roce_req_notify_cq: it may block next; at once if the
// thread was leaving the socket to them). The window
// starts at kRoceAppPollNs and doubles, up to kRoceAppPollMaxNs, each time
// the receive thread finds they polled at least once per kRoceAppBusyNs on
// average; it is back at kRoceAppPollNs once none polled. On a machine whose
// cores the spinning applications fill (two processes on two cores, a TCG
// guest), each wake of the receive thread preempts one of them: waking every
// 100 us made ib_write_lat's average 4.9-5.6 us where 1 ms made it 3.5 us on
// the host; in the test bed's TCG guest, where a wake costs tens of
// microseconds, waking at most every 4 ms and without the lock unless a
// timer is due took ib_write_lat's median from 91-151 us to 50-77 us.
// The cost: a program that stops polling its CQ and waits for data some
// other way than a CQ's notification sees its first datagram up to two
// windows (8 ms) late, once, and the ACK of a single-packet request it took
// in its last poll up to one window late.
inline constexpr uint64_t kRoceAppPollNs = 100000;
inline constexpr uint64_t kRoceAppPollMaxNs = 4000000;
inline constexpr uint64_t kRoceAppBusyNs = 20000;
// A PSN sequence NAK is sent once per gap, and again when the gap is still
// there this long after (the packets sent again were lost too); the
// requester takes a NAK for the PSN it went back to as new after as long.
inline constexpr uint64_t kRoceNakRepeatNs = 2000000;
// Atomic operations the responder remembers, to answer a request sent again
// (its acknowledgement was lost) without executing it twice.
inline constexpr uint32_t kRoceAtomicReplay = 128;
inline constexpr size_t kRoceMaxDatagram = 8192; // larger ones are dropped
// IPv4 datagrams in a row from a connected QP's peer whose ICRC checked with
// identification 0, after which one that needs another is taken as damaged
// (transport.cpp, note_ip_id).
inline constexpr uint32_t kRoceZeroIdRun = 8;

struct RoceGid {
	union ibv_gid gid;
	bool v4;    // IPv4-mapped (::ffff:a.b.c.d)
	bool valid; // false: an empty slot (the address went away)
};

// The fault-injection point's state (transport.cpp, inject): a datagram held
// back to be handled after the next one, and a copy for handling one twice.
// Made on the first injected fault; under RoceCtx::rx_lock.
struct RoceFaultState {
	uint8_t held[kRoceMaxDatagram];
	size_t held_len = 0;  // 0: nothing held
	uint64_t held_ns = 0; // when it was held back
	struct sockaddr_in6 held_name;
	int held_flags = 0;
	size_t held_ctl_len = 0;
	alignas(struct cmsghdr) char held_ctl[128];
	uint8_t copy[kRoceMaxDatagram];
};

// One per device and network namespace in a process, shared by every
// context of the process that opens that device (the UDP port is the
// device's, as a NIC's): device.cpp keeps the list (g_roce), counted in refs.
// Multicast groups a device's UD QPs can be attached to, and QPs per group
// (ibv_attach_mcast(3); the query_device limits).
inline constexpr uint32_t kRoceMaxGroups = 64;
inline constexpr uint32_t kRoceGroupQps = 32;

struct RoceCtx {
	RoceCtx *next_shared = nullptr; // the process's list, under g_roce_lock
	uint32_t refs = 0;              // contexts using it, under g_roce_lock
	uint64_t netns = 0;             // the network namespace's inode
	char ifname[16];
	int ifindex;
	uint8_t mac[6];
	uint64_t guid;            // EUI-64 of the MAC (host order)
	// The interface's MTU and the largest IB MTU whose packets fit it: read
	// at open and again at most once a second (roce_refresh_mtu), as the
	// kernel's rxe follows the interface's MTU changes.
	std::atomic<uint32_t> if_mtu{0};
	std::atomic<enum ibv_mtu> active_mtu{IBV_MTU_256};
	std::atomic<uint64_t> mtu_read_ns{0};
	// Port state events (IBV_EVENT_PORT_ACTIVE, IBV_EVENT_PORT_ERR), as the
	// kernel's rxe raises them when its interface goes down or comes up:
	// the receive thread reads the interface's link messages from a
	// NETLINK_ROUTE socket (libnl, RTNLGRP_LINK) and tells every context
	// that uses this transport (ctxs, under ctx_lock) when the state
	// (link_up: IFF_UP and IFF_RUNNING, first read at open) changes. nl is null when the
	// socket could not be made (no events then; query_port still reads the
	// state at each call).
	::nl_sock *nl = nullptr;
	int link_up = 0;
	pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
	SoftContext *ctxs[64] = {};
	uint32_t nctxs = 0;
	uint64_t link_msgs_bad = 0; // link messages too short to read, dropped
	// Multicast (under lock): the groups this device's UD QPs are attached
	// to, by MGID (an IPv4-mapped 224.0.0.0/4 address or an IPv6 ff00::/8
	// one: the group's IP address, RoCE v2), each joined on the socket
	// (IP_ADD_MEMBERSHIP, IPV6_JOIN_GROUP) while it has a QP.
	struct Group {
		uint8_t gid[16];
		SoftQp *qps[kRoceGroupQps];
		uint32_t nqps;
	} groups[kRoceMaxGroups] = {};
	uint32_t ngroups = 0;
	RoceGid gids[kRoceMaxGids]; // under lock (roce_refresh_gids)
	uint32_t ngids;
	std::atomic<uint64_t> gids_read_ns;
	int fd = -1;              // the UDP socket (AF_INET6, dual stack, port 4791)
	int wake_fd = -1;         // eventfd: wakes the receive thread (stop, app_waits)
	pthread_t rx;
	bool rx_started;
	std::atomic<bool> stop;
	uint32_t window;          // packets in flight per QP the receive buffer holds
	// Reading the socket: one thread at a time (the receive thread, or an
	// application thread polling a CQ: roce_drain), so that the packets of
	// a QP are handled in the order they arrived. rx_bufs belong to the
	// holder.
	pthread_mutex_t rx_lock;
	uint8_t *rx_bufs;         // kRoceBatch * kRoceRxBuffer
	// recvmmsg's headers over rx_bufs, also the holder's: set up once and
	// afterwards only the entries a receive filled (the first rx_dirty),
	// so that a poll finding the socket empty costs the system call alone.
	struct RxMsgs {
		union Ctl {
			char b[CMSG_SPACE(sizeof(struct in6_pktinfo)) +
			       CMSG_SPACE(sizeof(struct in_pktinfo)) + CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} ctls[kRoceBatch];
		struct mmsghdr msgs[kRoceBatch];
		struct iovec iovs[kRoceBatch];
		struct sockaddr_in6 names[kRoceBatch];
	} rx_msgs;
	int rx_dirty = kRoceBatch;
	bool gro = false;         // UDP_GRO accepted: datagrams may be trains
	std::atomic<uint64_t> app_polls{0}; // roce_drain calls of application threads
	// ibv_req_notify_cq calls on CQs of the device: a window in which a
	// thread armed one is not left to the applications (it may block).
	std::atomic<uint64_t> app_arms{0};
	// The receive thread leaves the socket to polling applications
	// (kRoceAppPollNs); an application thread that arms a CQ's notification
	// then sets app_waits and wakes it (wake_fd), once.
	std::atomic<bool> apps_read{false};
	std::atomic<bool> app_waits{false};
	std::atomic<uint64_t> app_wait_wakes{0}; // those wakes (logged at close)
	pthread_mutex_t lock;
	SoftQp *by_slot[kMaxQps]; // QPs of this context by segment slot
	uint32_t slots_end = 0;   // by_slot is empty from here on (the timers' scan)
	// The transmit batch, under lock (transport.cpp, "transmit"): tx[i]
	// describes the packet built in tx_bufs + i * kRoceTxSlot.
	struct TxPkt {
		uint32_t off;  // where the packet starts in its slot
		uint32_t len;  // its length, ICRC included
		uint16_t seg;  // its place in its GSO train (0: a train starts)
		struct sockaddr_in6 to;
		uint8_t src[16];
	};
	uint8_t *tx_bufs = nullptr; // kRoceTxBatch * kRoceTxSlot
	TxPkt tx[kRoceTxBatch];
	uint32_t ntx = 0;
	bool gso = true;          // UDP_SEGMENT works here (off after a refusal)
	uint32_t train_len = 0;   // the open train's packet size (0: none open)
	uint32_t train_bytes = 0;
	// QPs (by slot) with an acknowledgement to send (RoceQp::ack_*), under
	// lock; ack_next_ns: the earliest delayed one's time (0: none).
	uint32_t ack_slots[kMaxQps];
	uint32_t nacks = 0;
	uint64_t ack_next_ns = 0;
	std::atomic<bool> tx_work{false}; // ACKs wait (read without the lock)
	// No retransmission or RNR deadline of a QP is earlier than this (0:
	// none): run_timers sets it to the earliest, arming a deadline lowers it
	// (under lock; the receive thread reads it without, to sleep until it).
	std::atomic<uint64_t> timer_hint_ns{0};
	// When the sleeping receive thread wakes next (0: it is awake and looks
	// again): a deadline armed before that wakes it (arm_timer).
	std::atomic<uint64_t> rx_wake_ns{0};
	// The device's QP1 in this process (general services: the CM's MADs):
	// the first UD QP given the GSI Q_Key 0x80010000 (a controlled Q_Key,
	// which a kernel device gives only to privileged users). Datagrams for
	// QPN 1 go to it, and it sends as QPN 1 (roce_gsi_update). Under lock.
	SoftQp *gsi = nullptr;
	// Several processes on the device (share.cpp): the device's segment
	// (its QP table names each QP's owner; the endpoints' files are beside
	// it), the name of this process's marker's group and segment
	// ("openverbs-sroce-UID-IFINDEX-", then the segment's identity), the
	// endpoint other
	// processes hand this one's datagrams to, and whether any datagram
	// was handed to this process yet (from then on a polling application
	// reads the endpoint too).
	const Segment *seg = nullptr;
	char share_prefix[96] = {};
	int fwd_fd = -1;
	int marker_fd = -1; // this process's marker (share.cpp)
	std::atomic<bool> multi{false};
	std::atomic<uint64_t> fwd_out{0}, fwd_in{0}, fwd_lost{0}, fwd_bad{0};
	// kRoceRxBuffer bytes, made at the first wait (roce_share_wait): the
	// datagrams handed to this process that are read while it waits to
	// hand one on (rx_bufs then hold the batch being handled). rx_lock's.
	uint8_t *side_buf = nullptr;
	// Counters (for diagnostics and tests: roce_counters()).
	std::atomic<uint64_t> drops[ovroce::D_COUNT];
	std::atomic<uint64_t> rx_packets, tx_packets, tx_errors, retransmits, icrc_solved;
	// Fault injection (tests): the generator, the state, a datagram held
	// back (read without rx_lock by the receive thread's wait), and the
	// faults injected (drops are drops[D_FILTERED]).
	uint64_t fault_rng = 0;
	std::unique_ptr<RoceFaultState> fault;
	std::atomic<bool> fault_held{false};
	std::atomic<uint64_t> reordered{0}, duplicated{0}, corrupted{0};
};

// Per work request transmission state, parallel to SoftQp::sq.
struct RoceTx {
	uint32_t psn;     // first PSN
	uint32_t npkts;   // PSNs it uses (READ: the responses)
	uint32_t sent;    // packets sent so far (READ: 0 or 1 request)
	uint32_t len;     // message length
	uint32_t rd_next; // READ: next response PSN expected
	bool done;        // READ: every response placed; atomics: acknowledged
	bool rereq;       // READ: asked again from rereq_psn after a lost response
	uint32_t rereq_psn;
	enum ibv_wc_status status; // local error found while sending
};

struct RoceQp {
	// Addresses: ours (from the AV's sgid_index) and the peer's (dgid);
	// for UD, per work request from the AH.
	struct sockaddr_in6 peer;
	uint8_t src[16];
	bool v4;
	uint32_t mtu;          // path MTU in bytes
	// Requester.
	RoceTx *tx;            // sq_depth entries
	uint32_t snd_nxt;      // next PSN to send
	uint32_t snd_max;      // one past the highest PSN ever sent
	// Where and when the requester last went back (rewind_to; rewind_ns 0:
	// never): a NAK that repeats the one that sent it there is not acted on
	// twice (recovery.h, nak_goes_back).
	uint32_t rewind_psn;
	uint64_t rewind_ns;
	// Packets allowed in flight: halved when packets are lost (NAK, timeout),
	// one more per acknowledgement that makes progress, up to RoceCtx::window
	// (what the peer's socket buffer holds). Go-back-N sends everything after
	// a loss again: a smaller flight wastes less on a lossy link.
	uint32_t cwnd;
	uint32_t una;          // first PSN not acknowledged
	uint32_t next_wr;      // offset from sq_head of the first WR with unsent packets
	uint32_t sq_psn;       // next PSN to assign
	uint64_t deadline_ns;  // retransmission timer (0: off)
	uint64_t rnr_until_ns; // waiting out an RNR NAK
	int retry_left, rnr_left;
	uint32_t zero_id_run;  // see kRoceZeroIdRun
	// Responder.
	uint32_t epsn;         // next PSN expected
	uint32_t msn;          // messages completed
	// The acknowledgement to send (coalesced: the latest one asked for):
	// at the next flush (ack_due_ns 0), or behind this QP's next packet
	// and at the latest at ack_due_ns (kRoceAckDelayNs).
	bool ack_pending;
	bool ack_listed;       // in RoceCtx::ack_slots
	uint32_t ack_psn, ack_msn;
	uint64_t ack_due_ns;
	// The newest PSN a plain ACK may name, and the MSN that goes with it:
	// that of the last SEND or RDMA WRITE packet executed. Never a PSN of
	// an RDMA READ's responses or of an atomic: the kernel's rxe, as a
	// requester, takes an ACK naming the PSN it waits for as that request's
	// answer (a READ completed with its last response missing, an atomic
	// without its original value). Such an ACK went out when a duplicate
	// SEND or WRITE packet arrived just after a READ or an atomic.
	uint32_t plain_ack_psn, plain_ack_msn;
	bool nak_sent;         // a PSN sequence NAK is outstanding for epsn
	uint64_t nak_ns;       // when it was sent (repeated after kRoceNakRepeatNs)
	// The receive message in progress (SEND First .. Last).
	bool in_send;
	uint64_t recv_wr_id;
	uint32_t recv_nsge;
	struct ibv_sge recv_sge[kMaxSge];
	uint64_t recv_off;
	enum ibv_wc_status recv_status;
	bool recv_held;        // UC: kept from a dropped message for the next one
	uint32_t recv_cq;      // XRC: the completion queue (slot) of the WQE's SRQ
	uint32_t recv_pd;      // XRC: the protection domain of the WQE's SRQ
	uint32_t recv_owner;   // XRC: the process (slot, pid) of the WQE's SRQ
	int32_t recv_pid;
	// An XRC receive QP: the XRC SRQ the request being handled names
	// (its XRCETH, checked by xrc_target), its ring, protection domain and
	// process. The SRQ's PD stands for the QP's, which has none, in every
	// check of a local or remote key, and the keys are that process's.
	RingHeader *xrc_ring;
	uint32_t xrc_srq;      // segment slot
	uint32_t xrc_pd;
	uint32_t xrc_owner;
	int32_t xrc_pid;
	// Executed atomics by PSN (a ring): the original values they returned.
	struct AtomicDone {
		uint32_t psn;
		bool valid;
		uint64_t orig;
	} replay[kRoceAtomicReplay];
	uint32_t replay_next;
	// The RDMA WRITE in progress (First .. Last).
	bool in_write;
	uint64_t write_va;
	uint32_t write_rkey;
	uint64_t write_left;
	uint32_t write_total;
};

// context.cpp -> device.cpp
int roce_segment_name(const SoftDevice *dev, char *buf, size_t len);
struct verbs_device *roce_alloc_device(struct verbs_sysfs_dev *sysfs_dev);
int roce_open(SoftContext *ctx, const SoftDevice *dev);
void roce_close(SoftContext *ctx);
void roce_port_event(RoceCtx *rc, bool up);
void roce_read_link_messages(RoceCtx *rc);
// Forgets QP qp in every multicast group (its destruction; rc->lock held).
void roce_mcast_forget(RoceCtx *rc, SoftQp *qp);
const struct verbs_context_ops &roce_context_ops();
int roce_query_gid(SoftContext *ctx, uint8_t port, int index, union ibv_gid *gid);
void roce_refresh_gids(RoceCtx *rc, bool force);
// Reads the interface's MTU again (through the device's socket) when the
// last read is a second old or force is set; returns the port's active MTU.
enum ibv_mtu roce_refresh_mtu(RoceCtx *rc, bool force);
int roce_query_gid_entry(SoftContext *ctx, uint32_t port, uint32_t index,
			 struct ibv_gid_entry *entry);

// transport.cpp
void *roce_rx_main(void *arg);
// Reads and handles what waits on the socket. from_app: an application
// thread (poll_cq) that skips it when another thread is reading. Returns the
// datagrams handled.
int roce_drain(RoceCtx *rc, bool from_app);
// ibv_req_notify_cq on a CQ of the device: the receive thread watches the
// socket again at once if it had left it to polling applications.
void roce_note_app_waits(RoceCtx *rc);
// Sends the transmit batch (rc->lock held).
void roce_flush(RoceCtx *rc);
// Sends every acknowledgement still waiting and the batch, whatever their
// time (rc->lock held): before a QP or the device goes away.
void roce_flush_acks(RoceCtx *rc);
int roce_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int roce_submit_wrs(SoftQp *qp, SoftWr *wrs, uint32_t n);
// Sets up the transport state for a transition to `next` (RTR: responder,
// RTS: requester). rc->lock held.
void roce_qp_transition(SoftQp *qp, enum ibv_qp_state cur, enum ibv_qp_state next);
// Forgets every queued request's transmission state (RESET). rc->lock held.
void roce_qp_reset(SoftQp *qp);
// QP1: the GSI Q_Key, and the QP that serves QPN 1 (RoceCtx::gsi).
inline constexpr uint32_t kRoceGsiQkey = 0x80010000;
inline constexpr uint32_t kRoceGsiQpn = 1;
// The destination QP number of every multicast datagram (IBTA 9.8.2).
inline constexpr uint32_t kRoceMcastQpn = 0xffffff;


// share.cpp: several processes on one device (src/DESIGN.md).
// Makes this process's endpoint for datagrams of its QPs that reached
// another process's socket (before the UDP port is bound).
int roce_share_open(RoceCtx *rc, const Segment *seg);
// After the port is bound: EADDRINUSE when a process of another segment
// (another /dev/shm) shares it.
int roce_share_check(RoceCtx *rc);
void roce_share_close(RoceCtx *rc);
// The process datagram [p, p+n) belongs to: 0 this one (or none: handled,
// and dropped, here), else its pid. By the destination QP's owner in the
// segment; a CM MAD for QP1 by its content (a REQ's service ID: the
// process whose CM listens on it; any other message: the communication ID
// it answers, whose low bits are the tag of the process whose CM made it).
int roce_share_target(RoceCtx *rc, const uint8_t *p, size_t n);
// Hands datagram [p, p+n) (a UDP_GRO train of gro_seg-byte packets when
// gro_seg < n) to process `target` (as roce_share_target gives it): 1 done,
// 0 lost (the endpoint's queue stayed full), -1 no such endpoint. While the
// endpoint's queue is full it calls roce_share_wait (rx_lock held).
int roce_share_send(RoceCtx *rc, int target, const uint8_t *p, size_t n, size_t gro_seg,
		     const struct sockaddr_in6 &from, const uint8_t dst[16], int ifindex);
// Called while this process waits for room at another one's endpoint
// (transport.cpp; rx_lock held): handles the datagrams handed to this
// process meanwhile, so that two processes that hand datagrams to each
// other (a burst each way) do not both wait, each for the other's queue.
// Returns how many it handled.
int roce_share_wait(RoceCtx *rc);
// The device's last context closes (the receive thread stopped, the socket
// not yet closed): the datagrams still in the socket for other processes'
// QPs are handed to them (the port's hash kept sending them here), the
// rest dropped (transport.cpp).
void roce_hand_on_rest(RoceCtx *rc);
// What came with a datagram handed on.
struct RoceFwdMeta {
	struct sockaddr_in6 from;
	uint8_t dst[16];
	int ifindex;
	uint32_t gro_seg;
};
// Reads one datagram handed to endpoint fd into buf: its length, 0 when it
// was dropped (not of this user, or malformed), -1 when none waits.
ssize_t roce_share_recv(RoceCtx *rc, int fd, uint8_t *buf, size_t cap, RoceFwdMeta *meta);

// Path MTU in bytes for the enum.
uint32_t roce_mtu_bytes(enum ibv_mtu m);

} // namespace ovsoft
