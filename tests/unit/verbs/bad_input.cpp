// The bad-input table: every verb of this layer called with NULL or invalid
// arguments, through the exported symbols of a libibverbs.so.1 loaded with
// dlopen. Each case runs in its own forked child so a crash is observed, not
// suffered. Our library must answer every case with the verb's documented
// error convention (EINVAL); the same table runs against Debian's library,
// whose outcomes must match the committed record debian-bad-input.txt.
#include "dl_env.h"

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace verbs_dl;

namespace {

// How a verb reports EINVAL.
enum class Expect {
	Errno,      // returns EINVAL
	Null,       // returns NULL, errno EINVAL
	MinusOne,   // returns -1, errno EINVAL
	NegErrno,   // returns -EINVAL
	ReregInput, // returns IBV_REREG_MR_ERR_INPUT, errno EINVAL
	NoCrash,    // void or total functions: must merely return
};

struct Env {
	const Lib *lib;
	struct ibv_context *ctx; // a valid context on the fake device
};

struct Case {
	const char *name;
	Expect expect;
	long (*call)(const Env &);
};

template <typename F> F fn(const Env &e, const char *name)
{
	F f = e.lib->sym<F>(name);
	if (!f) {
		fprintf(stderr, "missing symbol %s\n", name);
		_exit(3);
	}
	return f;
}
template <typename F> F fn10(const Env &e, const char *name)
{
	F f = e.lib->vsym<F>(name, "IBVERBS_1.0");
	if (!f) {
		fprintf(stderr, "missing symbol %s@IBVERBS_1.0\n", name);
		_exit(3);
	}
	return f;
}
long P(const void *p)
{
	return static_cast<long>(reinterpret_cast<intptr_t>(p));
}

char g_buf[4096];
struct ibv_device_attr g_dattr;
struct ibv_port_attr g_pattr;
union ibv_gid g_gid;
__be16 g_pkey;
struct ibv_gid_entry g_entries[4];
struct ibv_srq_init_attr g_srq_init;
struct ibv_srq_attr g_srq_attr;
struct ibv_qp_init_attr g_qp_init;
struct ibv_qp_attr g_qp_attr;
struct ibv_ah_attr g_ah_attr;
struct ibv_wc g_wc;
struct ibv_grh g_grh;
struct ibv_ece g_ece;
struct ibv_cq *g_cq_out;
void *g_ctx_out;
uint8_t g_mac[6];
uint16_t g_vid;

#define C(name_, expect_, body_) {name_, Expect::expect_, [](const Env &e) -> long { body_; }}

const Case kCases[] = {
	C("ibv_query_device(NULL ctx)", Errno,
	  return fn<int (*)(void *, void *)>(e, "ibv_query_device")(nullptr, &g_dattr)),
	C("ibv_query_device(NULL attr)", Errno,
	  return fn<int (*)(void *, void *)>(e, "ibv_query_device")(e.ctx, nullptr)),
	C("ibv_query_port(NULL ctx)", Errno,
	  return fn<int (*)(void *, uint8_t, void *)>(e, "ibv_query_port")(nullptr, 1, &g_pattr)),
	C("ibv_query_port(NULL attr)", Errno,
	  return fn<int (*)(void *, uint8_t, void *)>(e, "ibv_query_port")(e.ctx, 1, nullptr)),
	C("ibv_query_gid(NULL ctx)", MinusOne,
	  return fn<int (*)(void *, uint8_t, int, void *)>(e, "ibv_query_gid")(nullptr, 1, 0, &g_gid)),
	C("ibv_query_gid(NULL gid)", MinusOne,
	  return fn<int (*)(void *, uint8_t, int, void *)>(e, "ibv_query_gid")(e.ctx, 1, 0, nullptr)),
	C("ibv_query_gid(index -1)", MinusOne,
	  return fn<int (*)(void *, uint8_t, int, void *)>(e, "ibv_query_gid")(e.ctx, 1, -1, &g_gid)),
	C("ibv_query_pkey(NULL ctx)", MinusOne,
	  return fn<int (*)(void *, uint8_t, int, void *)>(e, "ibv_query_pkey")(nullptr, 1, 0, &g_pkey)),
	C("ibv_query_pkey(NULL pkey)", MinusOne,
	  return fn<int (*)(void *, uint8_t, int, void *)>(e, "ibv_query_pkey")(e.ctx, 1, 0, nullptr)),
	C("ibv_query_pkey(index -1)", MinusOne,
	  return fn<int (*)(void *, uint8_t, int, void *)>(e, "ibv_query_pkey")(e.ctx, 1, -1, &g_pkey)),
	C("ibv_get_pkey_index(NULL ctx)", MinusOne,
	  return fn<int (*)(void *, uint8_t, __be16)>(e, "ibv_get_pkey_index")(nullptr, 1, 0xffff)),
	C("_ibv_query_gid_ex(NULL ctx)", Errno,
	  return fn<int (*)(void *, uint32_t, uint32_t, void *, uint32_t, size_t)>(e, "_ibv_query_gid_ex")(
		  nullptr, 1, 0, g_entries, 0, sizeof(g_entries[0]))),
	C("_ibv_query_gid_ex(NULL entry)", Errno,
	  return fn<int (*)(void *, uint32_t, uint32_t, void *, uint32_t, size_t)>(e, "_ibv_query_gid_ex")(
		  e.ctx, 1, 0, nullptr, 0, sizeof(g_entries[0]))),
	C("_ibv_query_gid_ex(entry_size 4)", Errno,
	  return fn<int (*)(void *, uint32_t, uint32_t, void *, uint32_t, size_t)>(e, "_ibv_query_gid_ex")(
		  e.ctx, 1, 0, g_entries, 0, 4)),
	C("_ibv_query_gid_table(NULL ctx)", NegErrno,
	  return fn<ssize_t (*)(void *, void *, size_t, uint32_t, size_t)>(e, "_ibv_query_gid_table")(
		  nullptr, g_entries, 4, 0, sizeof(g_entries[0]))),
	C("_ibv_query_gid_table(NULL entries)", NegErrno,
	  return fn<ssize_t (*)(void *, void *, size_t, uint32_t, size_t)>(e, "_ibv_query_gid_table")(
		  e.ctx, nullptr, 4, 0, sizeof(g_entries[0]))),
	C("_ibv_query_gid_table(entry_size 4)", NegErrno,
	  return fn<ssize_t (*)(void *, void *, size_t, uint32_t, size_t)>(e, "_ibv_query_gid_table")(
		  e.ctx, g_entries, 4, 0, 4)),
	C("ibv_query_gid_type(NULL ctx)", MinusOne,
	  return fn<int (*)(void *, uint8_t, unsigned, void *)>(e, "ibv_query_gid_type")(nullptr, 1, 0, g_buf)),
	C("ibv_query_gid_type(NULL type)", MinusOne,
	  return fn<int (*)(void *, uint8_t, unsigned, void *)>(e, "ibv_query_gid_type")(e.ctx, 1, 0, nullptr)),
	C("ibv_alloc_pd(NULL)", Null, return P(fn<void *(*)(void *)>(e, "ibv_alloc_pd")(nullptr))),
	C("ibv_dealloc_pd(NULL)", Errno, return fn<int (*)(void *)>(e, "ibv_dealloc_pd")(nullptr)),
	C("ibv_reg_mr(NULL pd)", Null,
	  return P(fn<void *(*)(void *, void *, size_t, int)>(e, "ibv_reg_mr")(nullptr, g_buf, 64, 0))),
	C("ibv_reg_mr_iova(NULL pd)", Null,
	  return P(fn<void *(*)(void *, void *, size_t, uint64_t, int)>(e, "ibv_reg_mr_iova")(nullptr, g_buf, 64, 0, 0))),
	C("ibv_reg_mr_iova2(NULL pd)", Null,
	  return P(fn<void *(*)(void *, void *, size_t, uint64_t, unsigned)>(e, "ibv_reg_mr_iova2")(nullptr, g_buf, 64, 0, 0))),
	C("ibv_reg_dmabuf_mr(NULL pd)", Null,
	  return P(fn<void *(*)(void *, uint64_t, size_t, uint64_t, int, int)>(e, "ibv_reg_dmabuf_mr")(nullptr, 0, 64, 0, 0, 0))),
	C("ibv_rereg_mr(NULL mr)", ReregInput,
	  return fn<int (*)(void *, int, void *, void *, size_t, int)>(e, "ibv_rereg_mr")(nullptr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, 0)),
	C("ibv_dereg_mr(NULL)", Errno, return fn<int (*)(void *)>(e, "ibv_dereg_mr")(nullptr)),
	C("ibv_import_pd(NULL ctx)", Null, return P(fn<void *(*)(void *, uint32_t)>(e, "ibv_import_pd")(nullptr, 1))),
	C("ibv_unimport_pd(NULL)", NoCrash, fn<void (*)(void *)>(e, "ibv_unimport_pd")(nullptr); return 0),
	C("ibv_import_mr(NULL pd)", Null, return P(fn<void *(*)(void *, uint32_t)>(e, "ibv_import_mr")(nullptr, 1))),
	C("ibv_unimport_mr(NULL)", NoCrash, fn<void (*)(void *)>(e, "ibv_unimport_mr")(nullptr); return 0),
	C("ibv_import_dm(NULL ctx)", Null, return P(fn<void *(*)(void *, uint32_t)>(e, "ibv_import_dm")(nullptr, 1))),
	C("ibv_unimport_dm(NULL)", NoCrash, fn<void (*)(void *)>(e, "ibv_unimport_dm")(nullptr); return 0),
	C("ibv_create_comp_channel(NULL)", Null, return P(fn<void *(*)(void *)>(e, "ibv_create_comp_channel")(nullptr))),
	C("ibv_destroy_comp_channel(NULL)", Errno, return fn<int (*)(void *)>(e, "ibv_destroy_comp_channel")(nullptr)),
	C("ibv_create_cq(NULL ctx)", Null,
	  return P(fn<void *(*)(void *, int, void *, void *, int)>(e, "ibv_create_cq")(nullptr, 1, nullptr, nullptr, 0))),
	C("ibv_resize_cq(NULL)", Errno, return fn<int (*)(void *, int)>(e, "ibv_resize_cq")(nullptr, 4)),
	C("ibv_destroy_cq(NULL)", Errno, return fn<int (*)(void *)>(e, "ibv_destroy_cq")(nullptr)),
	C("ibv_get_cq_event(NULL channel)", MinusOne,
	  return fn<int (*)(void *, void *, void *)>(e, "ibv_get_cq_event")(nullptr, &g_cq_out, &g_ctx_out)),
	C("ibv_ack_cq_events(NULL)", NoCrash, fn<void (*)(void *, unsigned)>(e, "ibv_ack_cq_events")(nullptr, 1); return 0),
	C("verbs_init_cq(NULL cq)", NoCrash,
	  fn<void (*)(void *, void *, void *, void *)>(e, "verbs_init_cq")(nullptr, e.ctx, nullptr, nullptr); return 0),
	C("ibv_create_srq(NULL pd)", Null,
	  return P(fn<void *(*)(void *, void *)>(e, "ibv_create_srq")(nullptr, &g_srq_init))),
	C("ibv_modify_srq(NULL)", Errno,
	  return fn<int (*)(void *, void *, int)>(e, "ibv_modify_srq")(nullptr, &g_srq_attr, IBV_SRQ_LIMIT)),
	C("ibv_query_srq(NULL)", Errno, return fn<int (*)(void *, void *)>(e, "ibv_query_srq")(nullptr, &g_srq_attr)),
	C("ibv_destroy_srq(NULL)", Errno, return fn<int (*)(void *)>(e, "ibv_destroy_srq")(nullptr)),
	C("ibv_create_qp(NULL pd)", Null, return P(fn<void *(*)(void *, void *)>(e, "ibv_create_qp")(nullptr, &g_qp_init))),
	C("ibv_query_qp(NULL)", Errno,
	  return fn<int (*)(void *, void *, int, void *)>(e, "ibv_query_qp")(nullptr, &g_qp_attr, 0, &g_qp_init)),
	C("ibv_modify_qp(NULL)", Errno,
	  return fn<int (*)(void *, void *, int)>(e, "ibv_modify_qp")(nullptr, &g_qp_attr, IBV_QP_STATE)),
	C("ibv_destroy_qp(NULL)", Errno, return fn<int (*)(void *)>(e, "ibv_destroy_qp")(nullptr)),
	C("ibv_qp_to_qp_ex(NULL)", Null, return P(fn<void *(*)(void *)>(e, "ibv_qp_to_qp_ex")(nullptr))),
	C("ibv_query_ece(NULL)", Errno, return fn<int (*)(void *, void *)>(e, "ibv_query_ece")(nullptr, &g_ece)),
	C("ibv_set_ece(NULL)", Errno, return fn<int (*)(void *, void *)>(e, "ibv_set_ece")(nullptr, &g_ece)),
	C("ibv_query_qp_data_in_order(NULL)", NoCrash,
	  return fn<int (*)(void *, int, uint32_t)>(e, "ibv_query_qp_data_in_order")(nullptr, IBV_WR_SEND, 0)),
	C("ibv_create_ah(NULL pd)", Null, return P(fn<void *(*)(void *, void *)>(e, "ibv_create_ah")(nullptr, &g_ah_attr))),
	C("ibv_destroy_ah(NULL)", Errno, return fn<int (*)(void *)>(e, "ibv_destroy_ah")(nullptr)),
	C("ibv_init_ah_from_wc(NULL ctx)", MinusOne,
	  return fn<int (*)(void *, uint8_t, void *, void *, void *)>(e, "ibv_init_ah_from_wc")(nullptr, 1, &g_wc, &g_grh, &g_ah_attr)),
	C("ibv_init_ah_from_wc(NULL wc)", MinusOne,
	  return fn<int (*)(void *, uint8_t, void *, void *, void *)>(e, "ibv_init_ah_from_wc")(e.ctx, 1, nullptr, &g_grh, &g_ah_attr)),
	C("ibv_init_ah_from_wc(NULL ah_attr)", MinusOne,
	  return fn<int (*)(void *, uint8_t, void *, void *, void *)>(e, "ibv_init_ah_from_wc")(e.ctx, 1, &g_wc, &g_grh, nullptr)),
	C("ibv_create_ah_from_wc(NULL pd)", Null,
	  return P(fn<void *(*)(void *, void *, void *, uint8_t)>(e, "ibv_create_ah_from_wc")(nullptr, &g_wc, &g_grh, 1))),
	C("ibv_resolve_eth_l2_from_gid(NULL ctx)", NegErrno,
	  return fn<int (*)(void *, void *, void *, void *)>(e, "ibv_resolve_eth_l2_from_gid")(nullptr, &g_ah_attr, g_mac, &g_vid)),
	C("ibv_resolve_eth_l2_from_gid(NULL attr)", NegErrno,
	  return fn<int (*)(void *, void *, void *, void *)>(e, "ibv_resolve_eth_l2_from_gid")(e.ctx, nullptr, g_mac, &g_vid)),
	C("ibv_attach_mcast(NULL qp)", Errno,
	  return fn<int (*)(void *, void *, uint16_t)>(e, "ibv_attach_mcast")(nullptr, &g_gid, 0)),
	C("ibv_detach_mcast(NULL qp)", Errno,
	  return fn<int (*)(void *, void *, uint16_t)>(e, "ibv_detach_mcast")(nullptr, &g_gid, 0)),
	C("ibv_node_type_str(-7)", NoCrash, return P(fn<const char *(*)(int)>(e, "ibv_node_type_str")(-7))),
	C("ibv_port_state_str(1000)", NoCrash, return P(fn<const char *(*)(int)>(e, "ibv_port_state_str")(1000))),
	C("ibv_event_type_str(-1)", NoCrash, return P(fn<const char *(*)(int)>(e, "ibv_event_type_str")(-1))),
	C("ibv_wc_status_str(1000)", NoCrash, return P(fn<const char *(*)(int)>(e, "ibv_wc_status_str")(1000))),
	C("ibv_rate_to_mult(-3)", NoCrash, return fn<int (*)(int)>(e, "ibv_rate_to_mult")(-3)),
	C("mbps_to_ibv_rate(-3)", NoCrash, return fn<int (*)(int)>(e, "mbps_to_ibv_rate")(-3)),
	C("ibv_copy_qp_attr_from_kern(NULL, NULL)", NoCrash,
	  fn<void (*)(void *, void *)>(e, "ibv_copy_qp_attr_from_kern")(nullptr, nullptr); return 0),
	C("ibv_copy_ah_attr_from_kern(NULL, NULL)", NoCrash,
	  fn<void (*)(void *, void *)>(e, "ibv_copy_ah_attr_from_kern")(nullptr, nullptr); return 0),
	C("ibv_copy_path_rec_from_kern(NULL, NULL)", NoCrash,
	  fn<void (*)(void *, void *)>(e, "ibv_copy_path_rec_from_kern")(nullptr, nullptr); return 0),
	C("ibv_copy_path_rec_to_kern(NULL, NULL)", NoCrash,
	  fn<void (*)(void *, void *)>(e, "ibv_copy_path_rec_to_kern")(nullptr, nullptr); return 0),
	C("ibv_dontfork_range(NULL, 0)", NoCrash, return fn<int (*)(void *, size_t)>(e, "ibv_dontfork_range")(nullptr, 0)),
	C("ibv_query_device@1.0(NULL)", Errno,
	  return fn10<int (*)(void *, void *)>(e, "ibv_query_device")(nullptr, &g_dattr)),
	C("ibv_query_port@1.0(NULL)", Errno,
	  return fn10<int (*)(void *, uint8_t, void *)>(e, "ibv_query_port")(nullptr, 1, &g_pattr)),
	C("ibv_open_device@1.0(NULL)", Null, return P(fn10<void *(*)(void *)>(e, "ibv_open_device")(nullptr))),
	C("ibv_close_device@1.0(NULL)", Errno, return fn10<int (*)(void *)>(e, "ibv_close_device")(nullptr)),
	C("ibv_alloc_pd@1.0(NULL)", Null, return P(fn10<void *(*)(void *)>(e, "ibv_alloc_pd")(nullptr))),
	C("ibv_dealloc_pd@1.0(NULL)", Errno, return fn10<int (*)(void *)>(e, "ibv_dealloc_pd")(nullptr)),
	C("ibv_reg_mr@1.0(NULL pd)", Null,
	  return P(fn10<void *(*)(void *, void *, size_t, int)>(e, "ibv_reg_mr")(nullptr, g_buf, 64, 0))),
	C("ibv_create_cq@1.0(NULL ctx)", Null,
	  return P(fn10<void *(*)(void *, int, void *, void *, int)>(e, "ibv_create_cq")(nullptr, 1, nullptr, nullptr, 0))),
	C("ibv_destroy_cq@1.0(NULL)", Errno, return fn10<int (*)(void *)>(e, "ibv_destroy_cq")(nullptr)),
	C("ibv_create_qp@1.0(NULL, NULL)", Null,
	  return P(fn10<void *(*)(void *, void *)>(e, "ibv_create_qp")(nullptr, nullptr))),
	C("ibv_destroy_qp@1.0(NULL)", Errno, return fn10<int (*)(void *)>(e, "ibv_destroy_qp")(nullptr)),
	C("ibv_create_ah@1.0(NULL pd)", Null,
	  return P(fn10<void *(*)(void *, void *)>(e, "ibv_create_ah")(nullptr, &g_ah_attr))),
	C("ibv_get_cq_event@1.0(NULL)", MinusOne,
	  return fn10<int (*)(void *, void *, void *)>(e, "ibv_get_cq_event")(nullptr, &g_cq_out, &g_ctx_out)),
	C("ibv_free_device_list@1.0(NULL)", NoCrash, fn10<void (*)(void *)>(e, "ibv_free_device_list")(nullptr); return 0),
};

#undef C

struct Outcome {
	bool crashed = false;
	int signal = 0;
	long ret = 0;
	int err = 0;
	bool setup_failed = false;
};

// Runs one case in a child process against the library at path.
Outcome run_case(const char *path, const Case &c)
{
	int pipefd[2];
	Outcome out;
	if (pipe(pipefd))
		return out;
	pid_t pid = fork();
	if (pid == 0) {
		close(pipefd[0]);
		// A crash must end the child by its signal, also under ASan, which
		// otherwise turns SIGSEGV into a report and exit(1).
		struct sigaction dfl = {};
		dfl.sa_handler = SIG_DFL;
		for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
			sigaction(sig, &dfl, nullptr);
		Lib lib;
		struct verbs_device *vdev = nullptr;
		struct ibv_context *ctx = nullptr;
		if (lib.load(path)) {
			vdev = fake_device(nullptr);
			ctx = lib.open_device(&vdev->device);
		}
		if (!ctx)
			_exit(2);
		Env env{&lib, ctx};
		errno = 0;
		long ret = c.call(env);
		int err = errno;
		long msg[2] = {ret, err};
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
		out.setup_failed = true;
	} else if (n == sizeof(msg)) {
		out.ret = msg[0];
		out.err = static_cast<int>(msg[1]);
	} else {
		// Died without answering: a sanitizer report ending in exit().
		out.crashed = true;
	}
	return out;
}

bool meets(Expect x, const Outcome &o)
{
	switch (x) {
	case Expect::Errno:
		return o.ret == EINVAL;
	case Expect::Null:
		return o.ret == 0 && o.err == EINVAL;
	case Expect::MinusOne:
		return o.ret == -1 && o.err == EINVAL;
	case Expect::NegErrno:
		return o.ret == -EINVAL;
	case Expect::ReregInput:
		return o.ret == IBV_REREG_MR_ERR_INPUT && o.err == EINVAL;
	case Expect::NoCrash:
		return true;
	}
	return false;
}

} // namespace

TEST(BadInput, OursAnswersEveryCaseWithItsErrorConvention)
{
	for (const Case &c : kCases) {
		Outcome o = run_case(OPENVERBS_LIB, c);
		ASSERT_FALSE(o.setup_failed) << "could not open a context on the fake device";
		EXPECT_FALSE(o.crashed) << c.name << ": crashed with signal " << o.signal;
		if (!o.crashed) {
			EXPECT_TRUE(meets(c.expect, o)) << c.name << ": ret " << o.ret << " errno " << o.err;
		}
	}
}

// Debian's library on the same table: every case's outcome ("crash",
// "einval" as documented, or "other") must equal the committed record
// debian-bad-input.txt, the source of the README's figures. A change in
// Debian's library or in the table shows here as a diff to review; the
// record is remade by running this test with BAD_INPUT_RECORD=PATH.
TEST(BadInput, DebianOutcomesMatchTheRecord)
{
	if (access(DEBIAN_LIB, R_OK))
		GTEST_SKIP() << DEBIAN_LIB << " not installed";
	std::string seen;
	int crashes = 0;
	for (const Case &c : kCases) {
		Outcome o = run_case(DEBIAN_LIB, c);
		ASSERT_FALSE(o.setup_failed) << "could not open a context on Debian's library";
		const char *what = o.crashed ? "crash" : meets(c.expect, o) ? "einval" : "other";
		crashes += o.crashed;
		seen += std::string(what) + " " + c.name + "\n";
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
	const int total = static_cast<int>(sizeof(kCases) / sizeof(kCases[0]));
	RecordProperty("debian_crashes", crashes);
	RecordProperty("cases", total);
}
