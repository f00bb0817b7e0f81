#include "core/ops.h"
#include "core/verbs/verbs.h"

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace ov::core {
namespace {

// One generic stub per op signature: the convention follows the return type.
template <typename F> struct Stub;
template <typename R, typename... A> struct Stub<R (*)(A...)> {
	static R fn(A...) noexcept
	{
		if constexpr (std::is_void_v<R>) {
			return;
		} else if constexpr (std::is_pointer_v<R>) {
			errno = EOPNOTSUPP;
			return nullptr;
		} else {
			return EOPNOTSUPP;
		}
	}
};

template <typename Wr> int post_stub(Wr *wr, Wr **bad) noexcept
{
	if (bad)
		*bad = wr;
	return EOPNOTSUPP;
}

int dummy_post_send(ibv_qp *, ibv_send_wr *wr, ibv_send_wr **bad) noexcept { return post_stub(wr, bad); }
int dummy_post_recv(ibv_qp *, ibv_recv_wr *wr, ibv_recv_wr **bad) noexcept { return post_stub(wr, bad); }
int dummy_post_srq_recv(ibv_srq *, ibv_recv_wr *wr, ibv_recv_wr **bad) noexcept { return post_stub(wr, bad); }
int dummy_post_srq_ops(ibv_srq *, ibv_ops_wr *op, ibv_ops_wr **bad) noexcept { return post_stub(op, bad); }

int dummy_rereg_mr(verbs_mr *, int, ibv_pd *, void *, size_t, int) noexcept
{
	errno = EOPNOTSUPP;
	return IBV_REREG_MR_ERR_INPUT;
}

int dummy_query_qp_data_in_order(ibv_qp *, ibv_wr_opcode, uint32_t) noexcept { return 0; }

#if _OPENVERBS_ABI >= 64
int dummy_dm_export_dmabuf_fd(ibv_dm *) noexcept
{
	errno = EOPNOTSUPP;
	return -1;
}
#endif

constexpr verbs_context_ops make_dummy_ops()
{
	verbs_context_ops ops{};
#define OV_STUB(name, kind) ops.name = Stub<decltype(ops.name)>::fn;
	OV_VERBS_OPS(OV_STUB)
#undef OV_STUB
	ops.post_send = dummy_post_send;
	ops.post_recv = dummy_post_recv;
	ops.post_srq_recv = dummy_post_srq_recv;
	ops.post_srq_ops = dummy_post_srq_ops;
	ops.rereg_mr = dummy_rereg_mr;
	ops.query_qp_data_in_order = dummy_query_qp_data_in_order;
#if _OPENVERBS_ABI >= 64
	ops.dm_export_dmabuf_fd = dummy_dm_export_dmabuf_fd;
	ops.alloc_buf = ov::verbs::default_alloc_buf;
	ops.free_buf = ov::verbs::default_free_buf;
	ops.reg_mr_ex = ov::verbs::default_reg_mr_ex;
#endif
	return ops;
}

// Every slot is listed exactly once (the table and the struct agree).
#define OV_COUNT(name, kind) +1
static_assert(0 OV_VERBS_OPS(OV_COUNT) == kVerbsOpsCount, "OV_VERBS_OPS must list every op");
#undef OV_COUNT

#define OV_MIRROR_VCTX(name) vctx->name = ops->name;
#define OV_MIRROR_LIVE(name) lops->name = ops->name;
#define OV_MIRROR_COMPAT(name) \
	lops->_compat_##name = reinterpret_cast<decltype(lops->_compat_##name)>(reinterpret_cast<void (*)(void)>(ops->name));
#define OV_MIRROR_PRIV(name)
#define OV_MIRROR_FLOW(name) vctx->ibv_##name = ops->name;

// Every slot of `ops` (which has no NULL slot) into its public mirror.
void mirror_all(verbs_context *vctx, const verbs_context_ops *ops) noexcept
{
	ibv_context_ops *lops = &vctx->context.ops;
#define OV_SET(name, kind) OV_MIRROR_##kind(name)
	OV_VERBS_OPS(OV_SET)
#undef OV_SET
}

} // namespace

constinit const verbs_context_ops dummy_ops = make_dummy_ops();

namespace {
// Where the mirrors of set_ops write, known at compile time: one flag per
// pointer-sized word of verbs_context (ibv_context::ops lies inside it).
constexpr size_t kOpsAt = offsetof(verbs_context, context) + offsetof(ibv_context, ops);
constexpr size_t kWords = sizeof(verbs_context) / sizeof(void *);
#define OV_WORD_VCTX(name) offsetof(verbs_context, name)
#define OV_WORD_LIVE(name) kOpsAt + offsetof(ibv_context_ops, name)
#define OV_WORD_COMPAT(name) kOpsAt + offsetof(ibv_context_ops, _compat_##name)
#define OV_WORD_PRIV(name) SIZE_MAX
#define OV_WORD_FLOW(name) offsetof(verbs_context, ibv_##name)
struct Written {
	bool word[kWords] = {};
};
constexpr Written written_words()
{
	Written w;
	constexpr size_t at[] = {
#define OV_AT(name, kind) OV_WORD_##kind(name),
		OV_VERBS_OPS(OV_AT)
#undef OV_AT
	};
	for (size_t o : at)
		if (o != SIZE_MAX)
			w.word[o / sizeof(void *)] = true;
	return w;
}
#undef OV_WORD_VCTX
#undef OV_WORD_LIVE
#undef OV_WORD_COMPAT
#undef OV_WORD_PRIV
#undef OV_WORD_FLOW
constexpr Written kWritten = written_words();

// The runs of consecutive written words (byte offset and length).
struct Run {
	size_t off, len;
};
constexpr size_t count_runs()
{
	size_t n = 0;
	for (size_t i = 0; i < kWords; i++)
		n += kWritten.word[i] && (i == 0 || !kWritten.word[i - 1]);
	return n;
}
constexpr size_t kNumRuns = count_runs();
struct Runs {
	Run r[kNumRuns] = {};
};
constexpr Runs make_runs()
{
	Runs out;
	size_t n = 0;
	for (size_t i = 0; i < kWords; i++) {
		if (!kWritten.word[i])
			continue;
		if (i == 0 || !kWritten.word[i - 1])
			out.r[n++] = Run{i * sizeof(void *), 0};
		out.r[n - 1].len += sizeof(void *);
	}
	return out;
}
constexpr Runs kRuns = make_runs();

// The public slots of a context holding the dummy table, laid out once when
// the library loads; set_dummy_ops copies its runs of written words (each a
// copy of a size known here) instead of storing some hundred mirrors one by
// one at every open. The words between the runs (priv, the ABI placeholders,
// slots the library fills itself) are not touched, as with the mirrors.
const verbs_context g_dummy_vctx = [] {
	verbs_context v{};
	mirror_all(&v, &dummy_ops);
	return v;
}();

template <size_t... I>
inline void copy_runs(char *dst, const char *src, std::index_sequence<I...>) noexcept
{
	(memcpy(dst + kRuns.r[I].off, src + kRuns.r[I].off, kRuns.r[I].len), ...);
}
} // namespace

void set_ops(verbs_context *vctx, const verbs_context_ops *ops) noexcept
{
	verbs_ex_private *priv = vctx->priv;
	ibv_context_ops *lops = &vctx->context.ops;
#define OV_SET(name, kind)                         \
	if (ops->name) {                           \
		priv->ops.name = ops->name;        \
		OV_MIRROR_##kind(name)             \
	}
	OV_VERBS_OPS(OV_SET)
#undef OV_SET
}

void set_dummy_ops(verbs_context *vctx) noexcept
{
	// set_ops(vctx, &dummy_ops) without the per-slot NULL tests (the table
	// has no NULL slot): one block copy into priv, then the mirrors as
	// the runs of g_dummy_vctx.
	vctx->priv->ops = dummy_ops;
	copy_runs(reinterpret_cast<char *>(vctx), reinterpret_cast<const char *>(&g_dummy_vctx),
		  std::make_index_sequence<kNumRuns>{});
}
#undef OV_MIRROR_VCTX
#undef OV_MIRROR_LIVE
#undef OV_MIRROR_COMPAT
#undef OV_MIRROR_PRIV
#undef OV_MIRROR_FLOW

} // namespace ov::core
