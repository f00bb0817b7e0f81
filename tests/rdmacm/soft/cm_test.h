// Helpers shared by the software CM's GoogleTest programs.
#pragma once

#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>

namespace cmtest {

// An RC QP on id (rdma_create_qp with the id's default PD and CQs made for
// it): 4 send and 4 receive work requests of one scatter/gather entry.
inline void make_qp(rdma_cm_id *id)
{
	ibv_qp_init_attr a{};
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	ASSERT_EQ(rdma_create_qp(id, nullptr, &a), 0);
}

} // namespace cmtest
