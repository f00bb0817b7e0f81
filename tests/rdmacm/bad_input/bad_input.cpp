// librdmacm's bad-input table: every entry point called with NULL or invalid
// ids, channels, events, addresses and lengths, through the exported symbols
// of a librdmacm.so.1 loaded with dlopen, each case in its own forked child
// so a crash is observed, not suffered. Ours must answer each case with the
// errno Debian's library gives or EINVAL, and never crash; the same table
// runs against Debian's library, whose outcomes must equal the committed
// record debian-bad-input.txt.
//
// Cases marked "setup" need a valid event channel and id; on a machine
// without kernel RDMA CM Debian's library cannot make them ("n/a" in the
// record), ours makes them on the software CM (soft0).
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

struct Env {
	void *lib;
	rdma_event_channel *ch; // valid (setup cases only)
	rdma_cm_id *id;	        // valid, idle, RDMA_PS_TCP (setup cases only)
};

// What the case must give with our library.
enum class Expect {
	MinusOne, // -1 with errno `err`
	Null,	  // NULL with errno `err`
	NoCrash,  // void or total functions: must merely return
};

struct Case {
	const char *name;
	bool setup;
	Expect expect;
	int err;
	long (*call)(const Env &);
};

template <typename F> F fn(const Env &e, const char *name)
{
	auto f = reinterpret_cast<F>(dlsym(e.lib, name));
	if (!f) {
		fprintf(stderr, "missing symbol %s\n", name);
		_exit(3);
	}
	return f;
}
#define CALL(name) fn<decltype(&name)>(e, #name)

long P(const void *p) { return static_cast<long>(reinterpret_cast<intptr_t>(p)); }

sockaddr_in g_dst = [] {
	sockaddr_in s = {};
	s.sin_family = AF_INET;
	s.sin_port = htons(7471);
	s.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return s;
}();
sockaddr_un g_unix = {AF_UNIX, "x"};
sockaddr *dst() { return reinterpret_cast<sockaddr *>(&g_dst); }
sockaddr *unix_addr() { return reinterpret_cast<sockaddr *>(&g_unix); }
rdma_cm_event *g_ev;
rdma_cm_id *g_out;
ibv_qp_attr g_qp_attr;
int g_mask;
ibv_qp_init_attr g_qp_init;
ibv_srq_init_attr g_srq_init;
ibv_ece g_ece;
rdma_addrinfo g_rai;
rdma_addrinfo *g_res;
rdma_conn_param g_param;

const Case kCases[] = {
    // NULL ids, channels and events
    {"rdma_create_id(NULL id pointer)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_create_id)(nullptr, nullptr, nullptr, RDMA_PS_TCP); }},
    {"rdma_destroy_id(NULL)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_destroy_id)(nullptr); }},
    {"rdma_bind_addr(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_bind_addr)(nullptr, dst()); }},
    {"rdma_resolve_addr(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_resolve_addr)(nullptr, nullptr, dst(), 100); }},
    {"rdma_resolve_route(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_resolve_route)(nullptr, 100); }},
    {"rdma_listen(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_listen)(nullptr, 1); }},
    {"rdma_connect(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_connect)(nullptr, &g_param); }},
    {"rdma_establish(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_establish)(nullptr); }},
    {"rdma_accept(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_accept)(nullptr, &g_param); }},
    {"rdma_reject(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_reject)(nullptr, nullptr, 0); }},
    {"rdma_reject_ece(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_reject_ece)(nullptr, nullptr, 0); }},
    {"rdma_notify(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_notify)(nullptr, IBV_EVENT_COMM_EST); }},
    {"rdma_disconnect(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_disconnect)(nullptr); }},
    {"rdma_get_request(NULL listen id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_get_request)(nullptr, &g_out); }},
    {"rdma_join_multicast(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_join_multicast)(nullptr, dst(), nullptr); }},
    {"rdma_join_multicast_ex(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_join_multicast_ex)(nullptr, nullptr, nullptr); }},
    {"rdma_leave_multicast(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_leave_multicast)(nullptr, dst()); }},
    {"rdma_set_option(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long {
	     int v = 1;
	     return CALL(rdma_set_option)(nullptr, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof(v));
     }},
    {"rdma_migrate_id(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_migrate_id)(nullptr, nullptr); }},
    {"rdma_init_qp_attr(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_init_qp_attr)(nullptr, &g_qp_attr, &g_mask); }},
    {"rdma_create_qp(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_create_qp)(nullptr, nullptr, &g_qp_init); }},
    {"rdma_create_srq(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_create_srq)(nullptr, nullptr, &g_srq_init); }},
    {"rdma_destroy_qp(NULL id)", false, Expect::NoCrash, 0,
     [](const Env &e) -> long { CALL(rdma_destroy_qp)(nullptr); return 0; }},
    {"rdma_destroy_srq(NULL id)", false, Expect::NoCrash, 0,
     [](const Env &e) -> long { CALL(rdma_destroy_srq)(nullptr); return 0; }},
    {"rdma_destroy_ep(NULL id)", false, Expect::NoCrash, 0,
     [](const Env &e) -> long { CALL(rdma_destroy_ep)(nullptr); return 0; }},
    {"rdma_get_cm_event(NULL channel)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_get_cm_event)(nullptr, &g_ev); }},
    {"rdma_ack_cm_event(NULL)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_ack_cm_event)(nullptr); }},
    {"rdma_destroy_event_channel(NULL)", false, Expect::NoCrash, 0,
     [](const Env &e) -> long { CALL(rdma_destroy_event_channel)(nullptr); return 0; }},
    {"rdma_get_src_port(NULL id)", false, Expect::NoCrash, 0,
     [](const Env &e) -> long { return CALL(rdma_get_src_port)(nullptr); }},
    {"rdma_get_dst_port(NULL id)", false, Expect::NoCrash, 0,
     [](const Env &e) -> long { return CALL(rdma_get_dst_port)(nullptr); }},
    {"rdma_set_local_ece(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_set_local_ece)(nullptr, &g_ece); }},
    {"rdma_get_remote_ece(NULL id)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_get_remote_ece)(nullptr, &g_ece); }},
    {"rdma_event_str(out of range)", false, Expect::NoCrash, 0,
     [](const Env &e) -> long { return P(CALL(rdma_event_str)(static_cast<rdma_cm_event_type>(999))); }},
    {"rdma_free_devices(NULL)", false, Expect::NoCrash, 0,
     [](const Env &e) -> long { CALL(rdma_free_devices)(nullptr); return 0; }},
    {"rdma_freeaddrinfo(NULL)", false, Expect::NoCrash, 0,
     [](const Env &e) -> long { CALL(rdma_freeaddrinfo)(nullptr); return 0; }},
    {"rdma_getaddrinfo(no node, service or hints)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_getaddrinfo)(nullptr, nullptr, nullptr, &g_res); }},
    {"rdma_getaddrinfo(NULL result pointer)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_getaddrinfo)("127.0.0.1", "7471", nullptr, nullptr); }},
    {"rdma_create_ep(NULL id pointer)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_create_ep)(nullptr, &g_rai, nullptr, nullptr); }},
    {"rdma_create_ep(NULL addrinfo)", false, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_create_ep)(&g_out, nullptr, nullptr, nullptr); }},

    // invalid addresses, lengths and attributes on a valid id
    {"rdma_bind_addr(NULL address)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_bind_addr)(e.id, nullptr); }},
    {"rdma_bind_addr(AF_UNIX address)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_bind_addr)(e.id, unix_addr()); }},
    {"rdma_resolve_addr(NULL destination)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_resolve_addr)(e.id, nullptr, nullptr, 100); }},
    {"rdma_resolve_addr(AF_UNIX source)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_resolve_addr)(e.id, unix_addr(), dst(), 100); }},
    {"rdma_resolve_route(before address resolution)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_resolve_route)(e.id, 100); }},
    {"rdma_join_multicast(NULL address)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_join_multicast)(e.id, nullptr, nullptr); }},
    {"rdma_join_multicast_ex(reserved comp_mask)", true, Expect::MinusOne, ENOTSUP,
     [](const Env &e) -> long {
	     rdma_cm_join_mc_attr_ex a = {};
	     a.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
	     a.addr = dst();
	     return CALL(rdma_join_multicast_ex)(e.id, &a, nullptr);
     }},
    {"rdma_join_multicast_ex(no address bit)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long {
	     rdma_cm_join_mc_attr_ex a = {};
	     a.comp_mask = RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	     return CALL(rdma_join_multicast_ex)(e.id, &a, nullptr);
     }},
    {"rdma_leave_multicast(group never joined)", true, Expect::MinusOne, EADDRNOTAVAIL,
     [](const Env &e) -> long { return CALL(rdma_leave_multicast)(e.id, dst()); }},
    {"rdma_leave_multicast(AF_UNIX group)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_leave_multicast)(e.id, unix_addr()); }},
    {"rdma_init_qp_attr(NULL attributes)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_init_qp_attr)(e.id, nullptr, nullptr); }},
    {"rdma_create_qp(NULL init attributes)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_create_qp)(e.id, nullptr, nullptr); }},
    {"rdma_create_qp(no device yet)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_create_qp)(e.id, nullptr, &g_qp_init); }},
    {"rdma_create_srq_ex(NULL attributes)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_create_srq_ex)(e.id, nullptr); }},
    {"rdma_connect(no QP, no parameters)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_connect)(e.id, nullptr); }},
    {"rdma_accept(no QP, no parameters)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_accept)(e.id, nullptr); }},
    {"rdma_disconnect(never connected)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_disconnect)(e.id); }},
    {"rdma_get_request(not an endpoint)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_get_request)(e.id, &g_out); }},
    {"rdma_get_request(NULL id pointer)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_get_request)(e.id, nullptr); }},
    {"rdma_get_cm_event(NULL event pointer)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_get_cm_event)(e.ch, nullptr); }},
    {"rdma_set_local_ece(unknown comp_mask)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long {
	     ibv_ece ece = {};
	     ece.comp_mask = 1;
	     return CALL(rdma_set_local_ece)(e.id, &ece);
     }},
    {"rdma_get_remote_ece(NULL ece)", true, Expect::MinusOne, EINVAL,
     [](const Env &e) -> long { return CALL(rdma_get_remote_ece)(e.id, nullptr); }},
};

struct Outcome {
	bool crashed = false;
	int signal = 0;
	bool no_setup = false;
	long ret = 0;
	int err = 0;
};

Outcome run_case(const char *path, const Case &c)
{
	int pipefd[2];
	Outcome out;
	if (pipe(pipefd))
		return out;
	pid_t pid = fork();
	if (pid == 0) {
		close(pipefd[0]);
		struct sigaction dfl = {};
		dfl.sa_handler = SIG_DFL;
		for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
			sigaction(sig, &dfl, nullptr);
		Env e{dlopen(path, RTLD_NOW | RTLD_LOCAL), nullptr, nullptr};
		if (!e.lib) {
			fprintf(stderr, "%s\n", dlerror());
			_exit(3);
		}
		if (c.setup) {
			e.ch = CALL(rdma_create_event_channel)();
			if (!e.ch || CALL(rdma_create_id)(e.ch, &e.id, nullptr, RDMA_PS_TCP))
				_exit(2);
		}
		errno = 0;
		long ret = c.call(e);
		long msg[2] = {ret, errno};
		if (write(pipefd[1], msg, sizeof(msg)) != sizeof(msg))
			_exit(4);
		_exit(0);
	}
	close(pipefd[1]);
	long msg[2] = {0, 0};
	ssize_t n = read(pipefd[0], msg, sizeof(msg));
	close(pipefd[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status)) {
		out.crashed = true;
		out.signal = WTERMSIG(status);
	} else if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
		out.no_setup = true;
	} else if (n == sizeof(msg)) {
		out.ret = msg[0];
		out.err = static_cast<int>(msg[1]);
	} else {
		out.crashed = true;
	}
	return out;
}

bool meets(const Case &c, const Outcome &o)
{
	switch (c.expect) {
	case Expect::MinusOne:
		return o.ret == -1 && o.err == c.err;
	case Expect::Null:
		return o.ret == 0 && o.err == c.err;
	case Expect::NoCrash:
		return true;
	}
	return false;
}

} // namespace

TEST(RdmacmBadInput, OursAnswersEveryCase)
{
	for (const Case &c : kCases) {
		Outcome o = run_case(OPENVERBS_RDMACM, c);
		ASSERT_FALSE(o.no_setup) << c.name << ": no event channel or id (soft devices on?)";
		EXPECT_FALSE(o.crashed) << c.name << ": crashed with signal " << o.signal;
		if (!o.crashed) {
			EXPECT_TRUE(meets(c, o)) << c.name << ": ret " << o.ret << " errno " << o.err << " ("
						  << strerror(o.err) << "), expected errno " << c.err;
		}
	}
}

// Debian's library on the same table: "crash", "same" (the errno ours
// gives), "other: <errno name>" or "n/a" (no channel or id could be made)
// must equal the committed record; remade with BAD_INPUT_RECORD=PATH.
TEST(RdmacmBadInput, DebianOutcomesMatchTheRecord)
{
	if (access(DEBIAN_RDMACM, R_OK))
		GTEST_SKIP() << DEBIAN_RDMACM << " not installed";
	std::string seen;
	for (const Case &c : kCases) {
		Outcome o = run_case(DEBIAN_RDMACM, c);
		std::string what = o.crashed ? "crash" : o.no_setup ? "n/a" : meets(c, o) ? "same"
			: "other:" + std::string(strerrorname_np(o.err) ? strerrorname_np(o.err) : "0") + "/ret=" + std::to_string(o.ret);
		seen += what + " " + c.name + "\n";
	}
	if (const char *out = getenv("BAD_INPUT_RECORD")) {
		FILE *f = fopen(out, "w");
		ASSERT_NE(f, nullptr) << out;
		fputs(seen.c_str(), f);
		fclose(f);
	}
	FILE *f = fopen(BAD_INPUT_RECORD, "r");
	ASSERT_NE(f, nullptr) << BAD_INPUT_RECORD;
	std::string recorded;
	char line[256];
	while (fgets(line, sizeof(line), f))
		if (line[0] != '#')
			recorded += line;
	fclose(f);
	EXPECT_EQ(seen, recorded) << "Debian's outcomes differ from " << BAD_INPUT_RECORD;
}
