// Acceptance of XRC (issue 5) on the software device, through our real
// libibverbs.so.1 and providers/soft: no doubles.
//
//  - XrcdProcesses: the O_CREAT / O_EXCL / EAGAIN / EINVAL / EBADF matrix of
//    ibv_open_xrcd(3) across processes, two processes sharing one XRCD
//    through a file, EBUSY on close with live SRQs/QPs;
//  - LegacyXrcProcesses: three processes sharing one receive QP of the
//    legacy API (ibv_reg_xrc_rcv_qp(3)): traffic after the creator
//    unregisters, the QP gone after the last registration, a killed
//    process counting as unregistered;
//  - XrcBadInput: NULL / foreign / stale arguments of every legacy verb and
//    of ibv_open_xrcd, each a documented errno (also run under valgrind).
//
// Peers are fresh processes: fork + exec of xrcpd_peer (XRCPD_PEER), one
// command per line (see xrcpd_peer.cpp). The suite needs two soft devices
// (RDMAV_SOFT_DEVICES=2, set by ctest and by main()).
#include "../soft/soft_fixture.h"
#include "peer_process.h"

#include <infiniband/legacy_xrc.h>
#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#ifndef XRCPD_PEER
#error "XRCPD_PEER (path of the peer binary) must be defined by the build"
#endif

namespace {

using xrcpd::PeerProcess;

// A private temporary folder with the files that name XRC domains.
class TempDir {
public:
	TempDir()
	{
		char tmpl[] = "/tmp/ov-xrc-XXXXXX";
		const char *p = mkdtemp(tmpl);
		dir_ = p ? p : "";
	}
	~TempDir()
	{
		std::string cmd = "rm -rf '" + dir_ + "'";
		if (!dir_.empty() && system(cmd.c_str()) != 0) {
		}
	}
	std::string file(const char *name) const { return dir_ + "/" + name; }

private:
	std::string dir_;
};

std::string err(int e) { return "err " + std::to_string(e); }

class Peer : public PeerProcess {
public:
	explicit Peer(const char *dev = "soft0")
	{
		hello = start({XRCPD_PEER, dev});
	}
	std::string hello;
};

#define ASSERT_PEER(p) ASSERT_EQ((p).hello.rfind("hello ", 0), 0u) << (p).hello

// ------------------------------------------------------------------ ibv_open_xrcd across processes

TEST(XrcdProcesses, OflagMatrix)
{
	TempDir tmp;
	const std::string f = tmp.file("domain");
	Peer p1, p2;
	ASSERT_PEER(p1);
	ASSERT_PEER(p2);
	// No domain yet: without O_CREAT the file has none.
	EXPECT_EQ(p1.cmd("xrcd 0 %s 0", f.c_str()), err(EAGAIN));
	EXPECT_EQ(p1.cmd("xrcd 0 %s %d", f.c_str(), O_CREAT), "ok");
	// Another process: exclusive creation fails, plain open and O_CREAT share.
	EXPECT_EQ(p2.cmd("xrcd 0 %s %d", f.c_str(), O_CREAT | O_EXCL), err(EINVAL));
	EXPECT_EQ(p2.cmd("xrcd 0 %s 0", f.c_str()), "ok");
	EXPECT_EQ(p2.cmd("xrcd 1 %s %d", f.c_str(), O_CREAT), "ok");
	// A descriptor that is not open.
	EXPECT_EQ(p2.cmd("xrcd 2 closed %d", O_CREAT), err(EBADF));
	// Flags other than O_CREAT / O_EXCL (software device: EINVAL).
	if (p2.cmd("xrcd 2 %s %d", f.c_str(), O_CREAT | O_TRUNC) == "ok") {
		ADD_FAILURE() << "oflags O_CREAT|O_TRUNC accepted (ibv_open_xrcd(3): EINVAL)";
		EXPECT_EQ(p2.cmd("closexrcd 2"), "ok");
	}
	// fd -1: a private domain, with or without O_CREAT.
	EXPECT_EQ(p2.cmd("xrcd 3 - %d", O_CREAT), "ok");
	EXPECT_EQ(p2.cmd("xrcd 4 - 0"), "ok");
	// A fresh file: exclusive creation succeeds once.
	const std::string g = tmp.file("other");
	EXPECT_EQ(p2.cmd("xrcd 5 %s %d", g.c_str(), O_CREAT | O_EXCL), "ok");
	EXPECT_EQ(p1.cmd("xrcd 5 %s %d", g.c_str(), O_CREAT | O_EXCL), err(EINVAL));
	// Every reference closed: the domain of the file is gone.
	for (int s : {0, 1, 3, 4, 5})
		EXPECT_EQ(p2.cmd("closexrcd %d", s), "ok") << s;
	EXPECT_EQ(p1.cmd("closexrcd 0"), "ok");
	Peer p3;
	ASSERT_PEER(p3);
	EXPECT_EQ(p3.cmd("xrcd 0 %s 0", f.c_str()), err(EAGAIN));
	EXPECT_EQ(p3.cmd("xrcd 0 %s 0", g.c_str()), err(EAGAIN));
}

TEST(XrcdProcesses, ExclusiveCreationIsAtomicAcrossProcesses)
{
	// Several processes race O_CREAT|O_EXCL on one file: exactly one wins,
	// the others get EINVAL; then plain O_CREAT racers all share it.
	TempDir tmp;
	for (int round = 0; round < 5; round++) {
		const std::string f = tmp.file(("race" + std::to_string(round)).c_str());
		Peer p[4];
		for (auto &x : p)
			ASSERT_PEER(x);
		for (auto &x : p)
			ASSERT_TRUE(x.send_line("xrcd 0 " + f + " " + std::to_string(O_CREAT | O_EXCL)));
		int winners = 0, einval = 0;
		for (auto &x : p) {
			std::string r = x.read_reply();
			winners += r == "ok";
			einval += r == err(EINVAL);
		}
		EXPECT_EQ(winners, 1) << "round " << round;
		EXPECT_EQ(einval, 3) << "round " << round;
		const std::string g = tmp.file(("share" + std::to_string(round)).c_str());
		for (auto &x : p)
			ASSERT_TRUE(x.send_line("xrcd 1 " + g + " " + std::to_string(O_CREAT)));
		for (auto &x : p)
			EXPECT_EQ(x.read_reply(), "ok");
		// One domain: a receive QP made by one racer opens in all others.
		unsigned qpn = PeerProcess::value(p[0].cmd("rqp 0 1"));
		ASSERT_NE(qpn, ~0u);
		for (int i = 1; i < 4; i++)
			EXPECT_EQ(PeerProcess::value(p[i].cmd("openqp 0 1 %u", qpn)), qpn) << i;
	}
}

TEST(XrcdProcesses, ExitingProcessDropsItsReferences)
{
	TempDir tmp;
	const std::string f = tmp.file("domain");
	{
		Peer p1;
		ASSERT_PEER(p1);
		EXPECT_EQ(p1.cmd("xrcd 0 %s %d", f.c_str(), O_CREAT), "ok");
		p1.kill_now(); // never closes it
	}
	Peer p2;
	ASSERT_PEER(p2);
	EXPECT_EQ(p2.cmd("xrcd 0 %s 0", f.c_str()), err(EAGAIN));
	EXPECT_EQ(p2.cmd("xrcd 0 %s %d", f.c_str(), O_CREAT | O_EXCL), "ok");
}

TEST(XrcdProcesses, TwoProcessesShareOneXrcdThroughAFile)
{
	TempDir tmp;
	const std::string f = tmp.file("shared"), other = tmp.file("other");
	Peer owner, second, sender, stranger;
	ASSERT_PEER(owner);
	ASSERT_PEER(second);
	ASSERT_PEER(sender);
	ASSERT_PEER(stranger);
	ASSERT_EQ(owner.cmd("xrcd 0 %s %d", f.c_str(), O_CREAT), "ok");
	unsigned srq1 = PeerProcess::value(owner.cmd("xsrq 0 0"));
	unsigned rqpn = PeerProcess::value(owner.cmd("rqp 0 0"));
	ASSERT_NE(srq1, ~0u);
	ASSERT_NE(rqpn, ~0u);
	unsigned sqpn = PeerProcess::value(sender.cmd("sender 0"));
	ASSERT_NE(sqpn, ~0u);
	ASSERT_EQ(owner.cmd("rconnect 0 %u", sqpn), "ok");
	ASSERT_EQ(sender.cmd("sconnect 0 %u", rqpn), "ok");

	// The second process opens the same file: same domain, so it can open
	// the receive QP by number and attach its own XRC SRQ to the domain.
	ASSERT_EQ(second.cmd("xrcd 0 %s 0", f.c_str()), "ok");
	EXPECT_EQ(PeerProcess::value(second.cmd("openqp 0 0 %u", rqpn)), rqpn);
	unsigned srq2 = PeerProcess::value(second.cmd("xsrq 0 0"));
	ASSERT_NE(srq2, ~0u);
	ASSERT_NE(srq1, srq2);
	// A process with a domain of another file cannot reach that QP.
	ASSERT_EQ(stranger.cmd("xrcd 0 %s %d", other.c_str(), O_CREAT), "ok");
	EXPECT_EQ(stranger.cmd("openqp 0 0 %u", rqpn), err(EINVAL));

	ASSERT_EQ(owner.cmd("post 0 4"), "ok");
	ASSERT_EQ(second.cmd("post 0 4"), "ok");
	// One receive QP, two SRQs in two processes: each message lands in the
	// SRQ its sender named.
	EXPECT_EQ(sender.cmd("send 0 %u to-owner", srq1), "ok 0");
	EXPECT_EQ(sender.cmd("send 0 %u to-second", srq2), "ok 0");
	EXPECT_EQ(owner.cmd("poll 1 5000"), "ok 1 0:to-owner");
	EXPECT_EQ(second.cmd("poll 1 5000"), "ok 1 0:to-second");
	EXPECT_EQ(owner.cmd("poll 1 200"), "ok 0");
}

TEST(XrcdProcesses, CloseWithLiveResourcesIsEbusy)
{
	TempDir tmp;
	const std::string f = tmp.file("domain");
	Peer p;
	ASSERT_PEER(p);
	ASSERT_EQ(p.cmd("xrcd 0 %s %d", f.c_str(), O_CREAT), "ok");
	ASSERT_NE(PeerProcess::value(p.cmd("xsrq 0 0")), ~0u);
	EXPECT_EQ(p.cmd("closexrcd 0"), err(EBUSY));
	EXPECT_EQ(p.cmd("destroysrq 0"), "ok");
	ASSERT_NE(PeerProcess::value(p.cmd("rqp 0 0")), ~0u);
	EXPECT_EQ(p.cmd("closexrcd 0"), err(EBUSY));
	EXPECT_EQ(p.cmd("destroyqp 0"), "ok");
	EXPECT_EQ(p.cmd("closexrcd 0"), "ok");
}

TEST(XrcdProcesses, CloseLegacyDomainWithLiveResourcesIsEbusy)
{
	TempDir tmp;
	const std::string f = tmp.file("domain");
	Peer p;
	ASSERT_PEER(p);
	// Legacy API: a registration or an SRQ keeps the domain busy.
	ASSERT_EQ(p.cmd("ldom 0 %s %d", f.c_str(), O_CREAT), "ok");
	unsigned qpn = PeerProcess::value(p.cmd("lcreate 0"));
	ASSERT_NE(qpn, ~0u);
	EXPECT_EQ(p.cmd("lclose 0"), err(EBUSY));
	EXPECT_EQ(p.cmd("lunreg 0 %u", qpn), "ok");
	ASSERT_NE(PeerProcess::value(p.cmd("lsrq 0 0")), ~0u);
	EXPECT_EQ(p.cmd("lclose 0"), err(EBUSY));
	EXPECT_EQ(p.cmd("destroysrq 0"), "ok");
	EXPECT_EQ(p.cmd("lclose 0"), "ok");
	EXPECT_EQ(p.cmd("lclose 0"), err(EINVAL)); // closed already
}

// ------------------------------------------------------------------ receive-QP events reach every holder

// A fatal error of an XRC receive QP (a message longer than the receive
// buffer puts it in error) is reported to every process that holds the QP,
// each with its own handle, as the kernel does for XRC target QPs; and still
// after the creator died and another holder took the QP over.
// The next QP event of a peer (events of other kinds are skipped): "ok TYPE
// QPN", or "ok none" after ms.
std::string next_qp_event(Peer &p, int ms)
{
	for (;;) {
		std::string r = p.cmd("event %d", ms);
		if (r.rfind("ok ", 0) != 0 || r == "ok none" ||
		    std::count(r.begin(), r.end(), ' ') == 2)
			return r;
	}
}

TEST(XrcdProcesses, ReceiveQpFatalEventReachesEveryHolder)
{
	TempDir tmp;
	const std::string f = tmp.file("domain");
	Peer sender, creator, holder;
	ASSERT_PEER(sender);
	ASSERT_PEER(creator);
	ASSERT_PEER(holder);
	unsigned sqpn = PeerProcess::value(sender.cmd("sender 0"));
	ASSERT_NE(sqpn, ~0u);
	ASSERT_EQ(creator.cmd("xrcd 0 %s %d", f.c_str(), O_CREAT), "ok");
	unsigned rqpn = PeerProcess::value(creator.cmd("rqp 0 0"));
	ASSERT_NE(rqpn, ~0u);
	ASSERT_EQ(creator.cmd("rconnect 0 %u", sqpn), "ok");
	ASSERT_EQ(holder.cmd("xrcd 0 %s 0", f.c_str()), "ok");
	ASSERT_EQ(PeerProcess::value(holder.cmd("openqp 0 0 %u", rqpn)), rqpn);
	unsigned srqn = PeerProcess::value(holder.cmd("xsrq 1 0"));
	ASSERT_NE(srqn, ~0u);
	ASSERT_EQ(holder.cmd("post 1 8"), "ok");
	ASSERT_EQ(sender.cmd("sconnect 0 %u", rqpn), "ok");
	EXPECT_EQ(sender.cmd("send 0 %u hello", srqn), "ok 0");
	EXPECT_EQ(holder.cmd("poll 1 5000"), "ok 1 0:hello");
	EXPECT_EQ(next_qp_event(creator, 100), "ok none");
	EXPECT_EQ(next_qp_event(holder, 100), "ok none");

	const std::string fatal =
		"ok " + std::to_string(IBV_EVENT_QP_FATAL) + " " + std::to_string(rqpn);
	std::string r = sender.cmd("bigsend 0 %u 200", srqn);
	EXPECT_EQ(r.rfind("ok ", 0), 0u) << r;
	EXPECT_NE(r, "ok 0") << "a message longer than the receive must fail";
	EXPECT_EQ(holder.cmd("poll 1 5000"), "ok 1 " + std::to_string(IBV_WC_LOC_LEN_ERR) + ":-");
	EXPECT_EQ(next_qp_event(creator, 5000), fatal);
	EXPECT_EQ(next_qp_event(holder, 5000), fatal);
	EXPECT_EQ(next_qp_event(creator, 200), "ok none") << "one event per error";
	EXPECT_EQ(next_qp_event(holder, 200), "ok none") << "one event per error";

	// The creator dies: the holder keeps the QP, resets it and connects it
	// to a new sender QP; the QP's next error is reported to the holder.
	creator.kill_now();
	unsigned sqpn2 = PeerProcess::value(sender.cmd("sender 1"));
	ASSERT_NE(sqpn2, ~0u);
	ASSERT_EQ(holder.cmd("rreset 0"), "ok");
	ASSERT_EQ(holder.cmd("rconnect 0 %u", sqpn2), "ok");
	ASSERT_EQ(sender.cmd("sconnect 1 %u", rqpn), "ok");
	EXPECT_EQ(sender.cmd("send 1 %u again", srqn), "ok 0");
	EXPECT_EQ(holder.cmd("poll 1 5000"), "ok 1 0:again");
	r = sender.cmd("bigsend 1 %u 300", srqn);
	EXPECT_NE(r, "ok 0") << r;
	EXPECT_EQ(next_qp_event(holder, 5000), fatal);
	EXPECT_EQ(next_qp_event(holder, 200), "ok none");
}

// ------------------------------------------------------------------ legacy receive QPs, three processes

TEST(LegacyXrcProcesses, ThreeProcessesShareOneReceiveQp)
{
	TempDir tmp;
	const std::string f = tmp.file("domain");
	Peer sender, creator, holder, third;
	ASSERT_PEER(sender);
	ASSERT_PEER(creator);
	ASSERT_PEER(holder);
	ASSERT_PEER(third);
	unsigned sqpn = PeerProcess::value(sender.cmd("sender 0"));
	ASSERT_NE(sqpn, ~0u);

	ASSERT_EQ(creator.cmd("ldom 0 %s %d", f.c_str(), O_CREAT), "ok");
	unsigned rqpn = PeerProcess::value(creator.cmd("lcreate 0"));
	ASSERT_NE(rqpn, ~0u);
	ASSERT_EQ(creator.cmd("lconnect 0 %u %u", rqpn, sqpn), "ok");
	// The holder owns the XRC SRQ the messages land in.
	ASSERT_EQ(holder.cmd("ldom 0 %s 0", f.c_str()), "ok");
	ASSERT_EQ(holder.cmd("lreg 0 %u", rqpn), "ok");
	unsigned srqn = PeerProcess::value(holder.cmd("lsrq 0 0"));
	ASSERT_NE(srqn, ~0u);
	ASSERT_EQ(holder.cmd("post 0 8"), "ok");
	ASSERT_EQ(third.cmd("ldom 0 %s 0", f.c_str()), "ok");
	ASSERT_EQ(third.cmd("lreg 0 %u", rqpn), "ok");
	ASSERT_EQ(sender.cmd("sconnect 0 %u", rqpn), "ok");

	EXPECT_EQ(sender.cmd("send 0 %u m1", srqn), "ok 0");
	EXPECT_EQ(holder.cmd("poll 1 5000"), "ok 1 0:m1");

	// The creator leaves: the QP stays (two processes are registered).
	EXPECT_EQ(creator.cmd("lunreg 0 %u", rqpn), "ok");
	EXPECT_EQ(creator.cmd("lunreg 0 %u", rqpn), err(EINVAL)); // not registered now
	EXPECT_EQ(sender.cmd("send 0 %u m2", srqn), "ok 0");
	EXPECT_EQ(holder.cmd("poll 1 5000"), "ok 1 0:m2");

	// The holder unregisters too (its SRQ stays): the third keeps the QP.
	EXPECT_EQ(holder.cmd("lunreg 0 %u", rqpn), "ok");
	EXPECT_EQ(sender.cmd("send 0 %u m3", srqn), "ok 0");
	EXPECT_EQ(holder.cmd("poll 1 5000"), "ok 1 0:m3");

	// The last registered process unregisters: the QP is gone.
	EXPECT_EQ(third.cmd("lunreg 0 %u", rqpn), "ok");
	std::string r = sender.cmd("send 0 %u m4", srqn);
	EXPECT_EQ(r.rfind("ok ", 0), 0u) << r;
	EXPECT_NE(r, "ok 0") << "a send to a destroyed receive QP must complete in error";
	EXPECT_EQ(holder.cmd("poll 1 300"), "ok 0");
	EXPECT_EQ(holder.cmd("lreg 0 %u", rqpn), err(EINVAL));
	EXPECT_EQ(creator.cmd("lreg 0 %u", rqpn), err(EINVAL));
}

TEST(LegacyXrcProcesses, KilledRegisteredProcessCountsAsUnregistered)
{
	TempDir tmp;
	const std::string f = tmp.file("domain");
	Peer sender, creator, holder, victim;
	ASSERT_PEER(sender);
	ASSERT_PEER(creator);
	ASSERT_PEER(holder);
	ASSERT_PEER(victim);
	unsigned sqpn = PeerProcess::value(sender.cmd("sender 0"));
	ASSERT_EQ(creator.cmd("ldom 0 %s %d", f.c_str(), O_CREAT), "ok");
	unsigned rqpn = PeerProcess::value(creator.cmd("lcreate 0"));
	ASSERT_NE(rqpn, ~0u);
	ASSERT_EQ(creator.cmd("lconnect 0 %u %u", rqpn, sqpn), "ok");
	ASSERT_EQ(holder.cmd("ldom 0 %s 0", f.c_str()), "ok");
	unsigned srqn = PeerProcess::value(holder.cmd("lsrq 0 0"));
	ASSERT_NE(srqn, ~0u);
	ASSERT_EQ(holder.cmd("post 0 8"), "ok");
	ASSERT_EQ(victim.cmd("ldom 0 %s 0", f.c_str()), "ok");
	ASSERT_EQ(victim.cmd("lreg 0 %u", rqpn), "ok");
	ASSERT_EQ(sender.cmd("sconnect 0 %u", rqpn), "ok");

	// The creator dies without unregistering: the victim still holds it.
	creator.kill_now();
	EXPECT_EQ(sender.cmd("send 0 %u alive", srqn), "ok 0");
	EXPECT_EQ(holder.cmd("poll 1 5000"), "ok 1 0:alive");

	// The last registered process dies: nobody is registered any more.
	victim.kill_now();
	usleep(200 * 1000);
	EXPECT_EQ(holder.cmd("lreg 0 %u", rqpn), err(EINVAL));
	std::string r = sender.cmd("send 0 %u late", srqn);
	EXPECT_EQ(r.rfind("ok ", 0), 0u) << r;
	EXPECT_NE(r, "ok 0");
	EXPECT_EQ(holder.cmd("poll 1 300"), "ok 0");
}

TEST(LegacyXrcProcesses, SecondRegistrationChangesNothing)
{
	TempDir tmp;
	const std::string f = tmp.file("domain");
	Peer p, q;
	ASSERT_PEER(p);
	ASSERT_PEER(q);
	ASSERT_EQ(p.cmd("ldom 0 %s %d", f.c_str(), O_CREAT), "ok");
	unsigned qpn = PeerProcess::value(p.cmd("lcreate 0"));
	ASSERT_NE(qpn, ~0u);
	EXPECT_EQ(p.cmd("lreg 0 %u", qpn), "ok"); // the creator is registered already
	EXPECT_EQ(p.cmd("lunreg 0 %u", qpn), "ok");
	EXPECT_EQ(p.cmd("lunreg 0 %u", qpn), err(EINVAL));
	ASSERT_EQ(q.cmd("ldom 0 %s 0", f.c_str()), "ok");
	EXPECT_EQ(q.cmd("lreg 0 %u", qpn), err(EINVAL)); // one unreg destroyed it
}

// ------------------------------------------------------------------ bad input, in process

using ov_test::open_soft;

class XrcBadInput : public ::testing::Test {
protected:
	void SetUp() override
	{
		ctx = open_soft(0);
		ctx1 = open_soft(1);
		ASSERT_NE(ctx, nullptr);
		ASSERT_NE(ctx1, nullptr);
		pd = ibv_alloc_pd(ctx);
		pd1 = ibv_alloc_pd(ctx1);
		cq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
		ASSERT_TRUE(pd && pd1 && cq);
		char tmpl[] = "/tmp/ov-xrc-bad-XXXXXX";
		fd = mkstemp(tmpl);
		ASSERT_GE(fd, 0);
		path = tmpl;
	}
	void TearDown() override
	{
		if (cq) {
			EXPECT_EQ(ibv_destroy_cq(cq), 0);
		}
		if (pd) {
			EXPECT_EQ(ibv_dealloc_pd(pd), 0);
		}
		if (pd1) {
			EXPECT_EQ(ibv_dealloc_pd(pd1), 0);
		}
		if (ctx) {
			EXPECT_EQ(ibv_close_device(ctx), 0);
		}
		if (ctx1) {
			EXPECT_EQ(ibv_close_device(ctx1), 0);
		}
		if (fd >= 0)
			close(fd);
		if (!path.empty())
			unlink(path.c_str());
	}
	ibv_context *ctx = nullptr, *ctx1 = nullptr;
	ibv_pd *pd = nullptr, *pd1 = nullptr;
	ibv_cq *cq = nullptr;
	int fd = -1;
	std::string path;
};

TEST_F(XrcBadInput, OpenXrcDomain)
{
	errno = 0;
	EXPECT_EQ(ibv_open_xrc_domain(nullptr, fd, O_CREAT), nullptr);
	EXPECT_EQ(errno, EINVAL);
	int closed = dup(fd);
	close(closed);
	errno = 0;
	EXPECT_EQ(ibv_open_xrc_domain(ctx, closed, O_CREAT), nullptr);
	EXPECT_EQ(errno, EBADF);
	errno = 0;
	EXPECT_EQ(ibv_open_xrc_domain(ctx, fd, 0), nullptr);
	EXPECT_EQ(errno, EAGAIN);
	errno = 0;
	ibv_xrc_domain *bad = ibv_open_xrc_domain(ctx, fd, O_CREAT | O_TRUNC);
	EXPECT_EQ(bad, nullptr);
	EXPECT_EQ(errno, EINVAL);
	if (bad) {
		EXPECT_EQ(ibv_close_xrc_domain(bad), 0);
	}
	ibv_xrc_domain *d = ibv_open_xrc_domain(ctx, fd, O_CREAT);
	ASSERT_NE(d, nullptr);
	errno = 0;
	EXPECT_EQ(ibv_open_xrc_domain(ctx, fd, O_CREAT | O_EXCL), nullptr);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(ibv_close_xrc_domain(d), 0);
}

TEST_F(XrcBadInput, CloseXrcDomain)
{
	EXPECT_EQ(ibv_close_xrc_domain(nullptr), EINVAL);
	ibv_xrc_domain fake = {ctx, 7};
	EXPECT_EQ(ibv_close_xrc_domain(&fake), EINVAL); // never opened here
	ibv_xrc_domain *d = ibv_open_xrc_domain(ctx, fd, O_CREAT);
	ASSERT_NE(d, nullptr);
	EXPECT_EQ(ibv_close_xrc_domain(d), 0);
	errno = 0;
	EXPECT_EQ(ibv_close_xrc_domain(d), EINVAL); // double close
	EXPECT_EQ(errno, EINVAL);
}

TEST_F(XrcBadInput, ReceiveQpVerbs)
{
	uint32_t qpn = 0;
	EXPECT_EQ(ibv_create_xrc_rcv_qp(nullptr, &qpn), EINVAL);
	ibv_xrc_rcv_qp_init_attr ia = {};
	EXPECT_EQ(ibv_create_xrc_rcv_qp(&ia, &qpn), EINVAL); // no domain
	ibv_xrc_domain *d = ibv_open_xrc_domain(ctx, fd, O_CREAT);
	ASSERT_NE(d, nullptr);
	ia.xrc_domain = d;
	EXPECT_EQ(ibv_create_xrc_rcv_qp(&ia, nullptr), EINVAL);
	ibv_xrc_domain fake = {ctx, 1};
	ia.xrc_domain = &fake;
	EXPECT_EQ(ibv_create_xrc_rcv_qp(&ia, &qpn), EINVAL); // foreign domain
	ia.xrc_domain = d;
	ASSERT_EQ(ibv_create_xrc_rcv_qp(&ia, &qpn), 0);

	EXPECT_EQ(ibv_reg_xrc_rcv_qp(nullptr, qpn), EINVAL);
	EXPECT_EQ(ibv_reg_xrc_rcv_qp(&fake, qpn), EINVAL);
	EXPECT_EQ(ibv_unreg_xrc_rcv_qp(nullptr, qpn), EINVAL);
	EXPECT_EQ(ibv_unreg_xrc_rcv_qp(d, qpn + 1000), EINVAL); // unreg without reg
	EXPECT_EQ(ibv_reg_xrc_rcv_qp(d, 0xfffff0), EINVAL);     // no such QP

	// A QP of another type is not a receive QP.
	ibv_qp_init_attr rc = {};
	rc.send_cq = rc.recv_cq = cq;
	rc.qp_type = IBV_QPT_RC;
	rc.cap.max_send_wr = rc.cap.max_recv_wr = 1;
	rc.cap.max_send_sge = rc.cap.max_recv_sge = 1;
	ibv_qp *rcqp = ibv_create_qp(pd, &rc);
	ASSERT_NE(rcqp, nullptr);
	EXPECT_EQ(ibv_reg_xrc_rcv_qp(d, rcqp->qp_num), EINVAL);
	EXPECT_EQ(ibv_destroy_qp(rcqp), 0);

	// A receive QP of another domain (a second file).
	char tmpl[] = "/tmp/ov-xrc-bad2-XXXXXX";
	int fd2 = mkstemp(tmpl);
	ASSERT_GE(fd2, 0);
	ibv_xrc_domain *d2 = ibv_open_xrc_domain(ctx, fd2, O_CREAT);
	ASSERT_NE(d2, nullptr);
	EXPECT_EQ(ibv_reg_xrc_rcv_qp(d2, qpn), EINVAL);
	EXPECT_EQ(ibv_unreg_xrc_rcv_qp(d2, qpn), EINVAL);

	ibv_qp_attr attr = {};
	ibv_xrc_rcv_qp_init_attr qattr = {};
	EXPECT_EQ(ibv_modify_xrc_rcv_qp(d2, qpn, &attr, IBV_QP_STATE), EINVAL);
	EXPECT_EQ(ibv_query_xrc_rcv_qp(d2, qpn, &attr, IBV_QP_STATE, &qattr), EINVAL);
	EXPECT_EQ(ibv_modify_xrc_rcv_qp(d, qpn, nullptr, IBV_QP_STATE), EINVAL);
	EXPECT_EQ(ibv_query_xrc_rcv_qp(d, qpn, &attr, IBV_QP_STATE, nullptr), EINVAL);
	EXPECT_EQ(ibv_query_xrc_rcv_qp(d, qpn, &attr, IBV_QP_STATE, &qattr), 0);
	EXPECT_EQ(qattr.qp_type, IBV_QPT_XRC_RECV);
	EXPECT_EQ(qattr.xrc_domain, d);

	EXPECT_EQ(ibv_close_xrc_domain(d), EBUSY); // still registered
	EXPECT_EQ(ibv_unreg_xrc_rcv_qp(d, qpn), 0);
	EXPECT_EQ(ibv_unreg_xrc_rcv_qp(d, qpn), EINVAL);
	EXPECT_EQ(ibv_close_xrc_domain(d), 0);
	EXPECT_EQ(ibv_close_xrc_domain(d2), 0);
	close(fd2);
	unlink(tmpl);
}

TEST_F(XrcBadInput, XrcSrq)
{
	ibv_srq_init_attr sa = {};
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	ibv_xrc_domain *d = ibv_open_xrc_domain(ctx, fd, O_CREAT);
	ASSERT_NE(d, nullptr);
	errno = 0;
	EXPECT_EQ(ibv_create_xrc_srq(nullptr, d, cq, &sa), nullptr);
	EXPECT_EQ(errno, EINVAL);
	errno = 0;
	EXPECT_EQ(ibv_create_xrc_srq(pd, nullptr, cq, &sa), nullptr);
	EXPECT_EQ(errno, EINVAL);
	errno = 0;
	EXPECT_EQ(ibv_create_xrc_srq(pd, d, nullptr, &sa), nullptr);
	EXPECT_EQ(errno, EINVAL);
	errno = 0;
	EXPECT_EQ(ibv_create_xrc_srq(pd, d, cq, nullptr), nullptr);
	EXPECT_EQ(errno, EINVAL);
	errno = 0;
	EXPECT_EQ(ibv_create_xrc_srq(pd1, d, cq, &sa), nullptr); // PD of another device
	EXPECT_EQ(errno, EINVAL);
	errno = 0;
	EXPECT_EQ(ibv_xrc_srq_num(nullptr), 0u);
	EXPECT_EQ(errno, EINVAL);
	ibv_srq *srq = ibv_create_xrc_srq(pd, d, cq, &sa);
	ASSERT_NE(srq, nullptr);
	EXPECT_NE(ibv_xrc_srq_num(srq), 0u);
	int busy = ibv_close_xrc_domain(d); // the SRQ uses it
	EXPECT_EQ(busy, EBUSY);
	EXPECT_EQ(ibv_destroy_srq(srq), 0);
	if (busy == EBUSY) {
		EXPECT_EQ(ibv_close_xrc_domain(d), 0);
	}
}

TEST_F(XrcBadInput, OpenXrcdAttributes)
{
	ibv_xrcd_init_attr xa = {};
	xa.fd = fd;
	xa.oflags = O_CREAT;
	xa.comp_mask = IBV_XRCD_INIT_ATTR_FD;
	errno = 0;
	EXPECT_EQ(ibv_open_xrcd(ctx, &xa), nullptr);
	EXPECT_EQ(errno, EINVAL);
	xa.comp_mask = IBV_XRCD_INIT_ATTR_OFLAGS;
	errno = 0;
	EXPECT_EQ(ibv_open_xrcd(ctx, &xa), nullptr);
	EXPECT_EQ(errno, EINVAL);
	xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS | IBV_XRCD_INIT_ATTR_RESERVED;
	errno = 0;
	EXPECT_EQ(ibv_open_xrcd(ctx, &xa), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP);
	// An XRCD of another device cannot carry this device's SRQ.
	xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	ibv_xrcd *x1 = ibv_open_xrcd(ctx1, &xa);
	ASSERT_NE(x1, nullptr);
	ibv_srq_init_attr_ex sa = {};
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
		       IBV_SRQ_INIT_ATTR_CQ;
	sa.srq_type = IBV_SRQT_XRC;
	sa.pd = pd;
	sa.xrcd = x1;
	sa.cq = cq;
	errno = 0;
	ibv_srq *foreign = ibv_create_srq_ex(ctx, &sa);
	EXPECT_EQ(foreign, nullptr);
	EXPECT_EQ(errno, EINVAL);
	if (foreign) {
		EXPECT_EQ(ibv_destroy_srq(foreign), 0);
	}
	// The same file on another device is another domain.
	ibv_xrcd *x0 = ibv_open_xrcd(ctx, &xa);
	ASSERT_NE(x0, nullptr);
	xa.oflags = O_CREAT | O_EXCL;
	ibv_xrcd *again = ibv_open_xrcd(ctx, &xa);
	EXPECT_EQ(again, nullptr);
	EXPECT_EQ(ibv_close_xrcd(x0), 0);
	EXPECT_EQ(ibv_close_xrcd(x1), 0);
}

} // namespace

int main(int argc, char **argv)
{
	setenv("RDMAV_SOFT_DEVICES", "2", 0);
	::testing::InitGoogleTest(&argc, argv);
	return RUN_ALL_TESTS();
}
