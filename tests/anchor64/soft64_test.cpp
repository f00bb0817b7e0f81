// The software device's answers to rdma-core 64's new verbs (64 target):
// ibv_query_port_speed, DMA handles, ibv_reg_mr_ex with and without one.
// Runs in a private /dev/shm (tests/rdmacm/soft/private_shm.sh) on soft0.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

struct Soft0 {
	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr;
	Soft0()
	{
		int n = 0;
		ibv_device **list = ibv_get_device_list(&n);
		for (int i = 0; list && i < n && !ctx; i++)
			if (std::string(ibv_get_device_name(list[i])) == "soft0")
				ctx = ibv_open_device(list[i]);
		if (list)
			ibv_free_device_list(list);
		if (ctx)
			pd = ibv_alloc_pd(ctx);
	}
	~Soft0()
	{
		if (pd)
			ibv_dealloc_pd(pd);
		if (ctx)
			ibv_close_device(ctx);
	}
};

TEST(Soft64, PortSpeedIsTheLinkQueryPortReports)
{
	Soft0 s;
	ASSERT_NE(s.ctx, nullptr);
	uint64_t speed = 0;
	ASSERT_EQ(0, ibv_query_port_speed(s.ctx, 1, &speed));
	EXPECT_EQ(2000u, speed); // 4x HDR: 4 lanes x 50 Gb/s in units of 100 Mb/s
	ibv_port_attr pa{};
	ASSERT_EQ(0, ibv_query_port(s.ctx, 1, &pa));
	EXPECT_EQ(2, pa.active_width);
	EXPECT_EQ(64, pa.active_speed);
	EXPECT_EQ(EINVAL, ibv_query_port_speed(s.ctx, 2, &speed));
	EXPECT_EQ(EINVAL, ibv_query_port_speed(s.ctx, 1, nullptr));
}

TEST(Soft64, DmaHandlesCheckTheirHints)
{
	Soft0 s;
	ASSERT_NE(s.ctx, nullptr);
	ibv_dmah_init_attr a{};
	a.comp_mask = IBV_DMAH_INIT_ATTR_MASK_CPU_ID | IBV_DMAH_INIT_ATTR_MASK_PH |
		      IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE;
	a.cpu_id = 0;
	a.ph = 3;
	a.tph_mem_type = IBV_TPH_MEM_TYPE_PM;
	ibv_dmah *d = ibv_alloc_dmah(s.ctx, &a);
	ASSERT_NE(d, nullptr) << strerror(errno);
	EXPECT_EQ(s.ctx, d->context);
	EXPECT_EQ(0, ibv_dealloc_dmah(d));

	auto refused = [&](ibv_dmah_init_attr bad, int err) {
		errno = 0;
		EXPECT_EQ(nullptr, ibv_alloc_dmah(s.ctx, &bad));
		EXPECT_EQ(err, errno);
	};
	ibv_dmah_init_attr b = a;
	b.ph = 4;
	refused(b, EINVAL);
	b = a;
	b.tph_mem_type = 0xfe;
	refused(b, EINVAL);
	b = a;
	b.cpu_id = static_cast<uint32_t>(sysconf(_SC_NPROCESSORS_CONF));
	refused(b, EINVAL);
	b = a;
	b.comp_mask |= 1u << 3;
	refused(b, EOPNOTSUPP);
	b = {}; // no hints at all is a valid handle
	d = ibv_alloc_dmah(s.ctx, &b);
	ASSERT_NE(d, nullptr);
	EXPECT_EQ(0, ibv_dealloc_dmah(d));
}

TEST(Soft64, RegMrExByAddressWithOrWithoutAHandle)
{
	Soft0 s, other;
	ASSERT_NE(s.pd, nullptr);
	ASSERT_NE(other.ctx, nullptr);
	std::vector<char> buf(8192);
	ibv_dmah_init_attr a{};
	ibv_dmah *d = ibv_alloc_dmah(s.ctx, &a);
	ibv_dmah *foreign = ibv_alloc_dmah(other.ctx, &a);
	ASSERT_NE(d, nullptr);
	ASSERT_NE(foreign, nullptr);

	ibv_mr_init_attr m{};
	m.length = buf.size();
	m.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	m.comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH | IBV_REG_MR_MASK_IOVA;
	m.addr = buf.data();
	m.iova = 0x10000;
	m.dmah = d;
	ibv_mr *mr = ibv_reg_mr_ex(s.pd, &m);
	ASSERT_NE(mr, nullptr) << strerror(errno);
	EXPECT_EQ(s.pd, mr->pd);
	EXPECT_EQ(buf.size(), mr->length);
	EXPECT_EQ(0, ibv_dereg_mr(mr));

	m.comp_mask = IBV_REG_MR_MASK_ADDR; // plain, iova = the address
	mr = ibv_reg_mr_ex(s.pd, &m);
	ASSERT_NE(mr, nullptr) << strerror(errno);
	EXPECT_EQ(buf.data(), mr->addr);
	EXPECT_EQ(0, ibv_dereg_mr(mr));

	m.comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH;
	m.dmah = foreign;
	errno = 0;
	EXPECT_EQ(nullptr, ibv_reg_mr_ex(s.pd, &m));
	EXPECT_EQ(EINVAL, errno);
	m.comp_mask = IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET | IBV_REG_MR_MASK_IOVA;
	m.fd = 0;
	errno = 0;
	EXPECT_EQ(nullptr, ibv_reg_mr_ex(s.pd, &m));
	EXPECT_EQ(EOPNOTSUPP, errno);

	EXPECT_EQ(0, ibv_dealloc_dmah(d));
	EXPECT_EQ(0, ibv_dealloc_dmah(foreign));
}

} // namespace
