// openverbs software RDMA device: the ibv_wr_* (struct ibv_qp_ex) send API.
//
// wr_start opens a batch, each ibv_wr_<opcode> call appends one work request
// (wr_id and flags from the qp_ex fields), the set_* calls complete the last
// one, and wr_complete submits the batch in order (ibv_wr_post(3)). Errors
// found while building (too many SGEs, inline data too long, a batch deeper
// than the send queue) make wr_complete fail with EINVAL/ENOMEM and post
// nothing; wr_abort drops the batch.
#include "soft.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ovsoft {

static inline SoftQp *from_ex(struct ibv_qp_ex *x) { return reinterpret_cast<SoftQp *>(x); }

static SoftWr *append(struct ibv_qp_ex *x, uint32_t opcode)
{
	SoftQp *qp = from_ex(x);
	if (qp->staged_err)
		return nullptr;
	if (!qp->staged) {
		qp->staged_cap = qp->sq_depth ? qp->sq_depth : 1;
		qp->staged = static_cast<SoftWr *>(calloc(qp->staged_cap, sizeof(SoftWr)));
		if (!qp->staged) {
			qp->staged_err = ENOMEM;
			return nullptr;
		}
	}
	if (qp->staged_count >= qp->staged_cap) {
		qp->staged_err = ENOMEM;
		return nullptr;
	}
	SoftWr *w = &qp->staged[qp->staged_count++];
	memset(w, 0, offsetof(SoftWr, sge));
	w->wr_id = x->wr_id;
	w->send_flags = x->wr_flags;
	w->opcode = opcode;
	return w;
}

static SoftWr *last(struct ibv_qp_ex *x)
{
	SoftQp *qp = from_ex(x);
	if (qp->staged_err || !qp->staged_count)
		return nullptr;
	return &qp->staged[qp->staged_count - 1];
}

static void wr_start(struct ibv_qp_ex *x)
{
	SoftQp *qp = from_ex(x);
	qp->staged_count = 0;
	qp->staged_err = 0;
}

static int wr_complete(struct ibv_qp_ex *x)
{
	SoftQp *qp = from_ex(x);
	int rc = qp->staged_err;
	if (!rc && qp->staged_count) {
		uint32_t st = qp->entry->state.load();
		if (st != IBV_QPS_RTS && st != IBV_QPS_ERR && st != IBV_QPS_SQD)
			rc = EINVAL;
		else
			rc = submit_wrs(qp, qp->staged, qp->staged_count);
	}
	qp->staged_count = 0;
	qp->staged_err = 0;
	return rc;
}

static void wr_abort(struct ibv_qp_ex *x)
{
	SoftQp *qp = from_ex(x);
	qp->staged_count = 0;
	qp->staged_err = 0;
}

static bool type_ok(SoftQp *qp, uint32_t op)
{
	enum ibv_qp_type t = qp->type;
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return true;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_LOCAL_INV:
	case IBV_WR_BIND_MW:
		return t != IBV_QPT_UD;
	default:
		return t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND;
	}
}

static SoftWr *op(struct ibv_qp_ex *x, uint32_t opcode)
{
	SoftQp *qp = from_ex(x);
	if (!type_ok(qp, opcode)) {
		qp->staged_err = EINVAL;
		return nullptr;
	}
	return append(x, opcode);
}

static void wr_send(struct ibv_qp_ex *x) { op(x, IBV_WR_SEND); }

static void wr_send_imm(struct ibv_qp_ex *x, __be32 imm)
{
	if (SoftWr *w = op(x, IBV_WR_SEND_WITH_IMM))
		w->imm = imm;
}

static void wr_send_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	if (SoftWr *w = op(x, IBV_WR_SEND_WITH_INV))
		w->imm = rkey;
}

static void wr_rdma_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr)
{
	if (SoftWr *w = op(x, IBV_WR_RDMA_WRITE)) {
		w->rkey = rkey;
		w->remote_addr = addr;
	}
}

static void wr_rdma_write_imm(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, __be32 imm)
{
	if (SoftWr *w = op(x, IBV_WR_RDMA_WRITE_WITH_IMM)) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->imm = imm;
	}
}

static void wr_rdma_read(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr)
{
	if (SoftWr *w = op(x, IBV_WR_RDMA_READ)) {
		w->rkey = rkey;
		w->remote_addr = addr;
	}
}

static void wr_cmp_swp(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t cmp,
		       uint64_t swap)
{
	if (SoftWr *w = op(x, IBV_WR_ATOMIC_CMP_AND_SWP)) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->compare_add = cmp;
		w->swap = swap;
	}
}

static void wr_fetch_add(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t add)
{
	if (SoftWr *w = op(x, IBV_WR_ATOMIC_FETCH_AND_ADD)) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->compare_add = add;
	}
}

static void wr_local_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	if (SoftWr *w = op(x, IBV_WR_LOCAL_INV))
		w->imm = rkey;
}

static void wr_bind_mw(struct ibv_qp_ex *x, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	SoftQp *qp = from_ex(x);
	if (!mw || !info || mw->type != IBV_MW_TYPE_2) {
		qp->staged_err = EINVAL;
		return;
	}
	if (SoftWr *w = op(x, IBV_WR_BIND_MW)) {
		w->mw = mw;
		w->bind_rkey = rkey;
		w->bind = *info;
	}
}

#if _OPENVERBS_ABI >= 56
// ibv_wr_flush(3): RC and XRC only (type_ok); `type` a non-empty set of
// IBV_FLUSH_GLOBAL / IBV_FLUSH_PERSISTENT, `level` IBV_FLUSH_RANGE (the
// `len` bytes at `addr`) or IBV_FLUSH_MR (the whole region of `rkey`;
// address and length are then not used). Anything else makes wr_complete
// fail with EINVAL. Executed by exec_wr (requester.cpp).
static void wr_flush(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, size_t len, uint8_t type,
		     uint8_t level)
{
	SoftQp *qp = from_ex(x);
	if (!type || (type & ~(IBV_FLUSH_GLOBAL | IBV_FLUSH_PERSISTENT)) ||
	    (level != IBV_FLUSH_RANGE && level != IBV_FLUSH_MR)) {
		qp->staged_err = EINVAL;
		return;
	}
	if (SoftWr *w = op(x, IBV_WR_FLUSH)) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->flush_len = len;
		w->flush_type = type;
		w->flush_level = level;
	}
}
#endif

static void wr_send_tso(struct ibv_qp_ex *x, void *, uint16_t, uint16_t)
{
	from_ex(x)->staged_err = EOPNOTSUPP;
}

// ibv_wr_atomic_write(3) (IBA 1.5 ATOMIC WRITE): RC and XRC only
// (type_ok); the 8 bytes at atomic_wr are copied now and written at
// remote_addr (8-byte aligned, a region with remote write) as one atomic
// store. A null atomic_wr makes wr_complete fail with EINVAL. Executed by
// exec_wr (engine.cpp).
static void wr_atomic_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t remote_addr,
			    const void *atomic_wr)
{
	if (!atomic_wr) {
		from_ex(x)->staged_err = EINVAL;
		return;
	}
	if (SoftWr *w = op(x, IBV_WR_ATOMIC_WRITE)) {
		w->rkey = rkey;
		w->remote_addr = remote_addr;
		memcpy(&w->swap, atomic_wr, 8);
	}
}

static void set_ud_addr(struct ibv_qp_ex *x, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	SoftWr *w = last(x);
	if (!w)
		return;
	if (!ah || from_ex(x)->type != IBV_QPT_UD) {
		from_ex(x)->staged_err = EINVAL;
		return;
	}
	w->ah = reinterpret_cast<SoftAh *>(ah)->attr;
	w->has_ah = true;
	w->remote_qpn = qpn & 0xffffff;
	w->remote_qkey = qkey;
}

static void set_xrc_srqn(struct ibv_qp_ex *x, uint32_t srqn)
{
	if (SoftWr *w = last(x))
		w->xrc_srqn = srqn;
}

static void set_sge_list(struct ibv_qp_ex *x, size_t n, const struct ibv_sge *sg)
{
	SoftWr *w = last(x);
	if (!w)
		return;
	SoftQp *qp = from_ex(x);
	if (n > qp->cap.max_send_sge || (n && !sg)) {
		qp->staged_err = EINVAL;
		return;
	}
	w->num_sge = uint32_t(n);
	w->inline_len = 0;
	if (n)
		memcpy(w->sge, sg, n * sizeof(*sg));
}

static void set_sge(struct ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge s = {addr, length, lkey};
	set_sge_list(x, 1, &s);
}

static void set_inline_list(struct ibv_qp_ex *x, size_t n, const struct ibv_data_buf *bufs)
{
	SoftWr *w = last(x);
	if (!w)
		return;
	SoftQp *qp = from_ex(x);
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += bufs[i].length;
	if (total > qp->cap.max_inline_data || (n && !bufs)) {
		qp->staged_err = EINVAL;
		return;
	}
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		if (bufs[i].length)
			memcpy(w->inline_data + off, bufs[i].addr, bufs[i].length);
		off += bufs[i].length;
	}
	w->inline_len = uint32_t(off);
	w->num_sge = 0;
	w->send_flags |= IBV_SEND_INLINE;
}

static void set_inline(struct ibv_qp_ex *x, void *addr, size_t length)
{
	struct ibv_data_buf b = {addr, length};
	set_inline_list(x, 1, &b);
}

void init_qp_ex_ops(SoftQp *qp)
{
	struct ibv_qp_ex &x = qp->vqp.qp_ex;
	x.comp_mask = 0;
	x.wr_atomic_cmp_swp = wr_cmp_swp;
	x.wr_atomic_fetch_add = wr_fetch_add;
	x.wr_bind_mw = wr_bind_mw;
	x.wr_local_inv = wr_local_inv;
	x.wr_rdma_read = wr_rdma_read;
	x.wr_rdma_write = wr_rdma_write;
	x.wr_rdma_write_imm = wr_rdma_write_imm;
	x.wr_send = wr_send;
	x.wr_send_imm = wr_send_imm;
	x.wr_send_inv = wr_send_inv;
	x.wr_send_tso = wr_send_tso;
	x.wr_set_ud_addr = set_ud_addr;
	x.wr_set_xrc_srqn = set_xrc_srqn;
	x.wr_set_inline_data = set_inline;
	x.wr_set_inline_data_list = set_inline_list;
	x.wr_set_sge = set_sge;
	x.wr_set_sge_list = set_sge_list;
	x.wr_start = wr_start;
	x.wr_complete = wr_complete;
	x.wr_abort = wr_abort;
	x.wr_atomic_write = wr_atomic_write;
#if _OPENVERBS_ABI >= 56
	x.wr_flush = wr_flush;
#endif
}

} // namespace ovsoft
