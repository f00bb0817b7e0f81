// libFuzzer target: MADs as libibumad receives them. The input is what the
// kernel's umad device returns on read (struct ib_user_mad, then the MAD;
// here the 56-byte header of the old ABI, as umad_init was not called);
// it is delivered through a SOCK_SEQPACKET pair (one read = one message, as
// from /dev/infiniband/umadN) to umad_recv with a 256-byte MAD buffer, and
// the received header and MAD common header (IBTA 1.4 vol. 1, 13.4.2:
// class at byte 1, method at 3, status at 4, attribute id at 16) are then
// read by umad_status, umad_get_mad_addr, umad_get_mad, umad_dump and the
// string helpers (umad_class_str(3)). Checked beyond "no crash": umad_recv
// never reports more bytes than the buffer holds, and the helpers always
// return a string.
#include <infiniband/umad.h>
#include <infiniband/umad_str.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {
int g_pair[2] = {-1, -1};
int g_null = -1;
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, g_pair))
		abort();
	g_null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	umad_debug(2); // umad_dump prints every field
	return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	constexpr int kMad = 256;
	if (size == 0 || size > 4096)
		return 0; // a zero-length datagram is not a read result of umad
	if (send(g_pair[0], data, size, 0) != static_cast<ssize_t>(size))
		abort();
	alignas(8) uint8_t buf[64 + kMad + 8];
	memset(buf, 0xa5, sizeof(buf));
	void *umad = buf; // umad_size(): 64, or 56 before umad_init found a new kernel ABI
	int len = kMad;
	int agent = umad_recv(g_pair[1], umad, &len, 0);
	if (agent < 0)
		return 0;
	if (len < 0 || len > kMad)
		abort();
	umad_status(umad);
	if (umad_get_mad_addr(umad) == nullptr || umad_get_mad(umad) == nullptr)
		abort();
	int saved = dup(2);
	dup2(g_null, 2);
	umad_dump(umad);
	dup2(saved, 2);
	close(saved);

	const uint8_t *mad = static_cast<const uint8_t *>(umad_get_mad(umad));
	uint8_t mgmt_class = mad[1], method = mad[3];
	__be16 status, attr;
	memcpy(&status, mad + 4, 2);
	memcpy(&attr, mad + 16, 2);
	if (!umad_class_str(mgmt_class) || !umad_method_str(mgmt_class, method) ||
	    !umad_attribute_str(mgmt_class, attr) || !umad_common_mad_status_str(status) ||
	    !umad_sa_mad_status_str(status))
		abort();
	return 0;
}
