// libFuzzer target over the RoCE v2 packet parser (providers/soft/roce/wire.*):
// any datagram is either refused with a reason or decoded into fields that
// re-encode to the same header bytes (reserved bits aside), and the ICRC check
// (with the IPv4 identification solved for) never reads outside the datagram.
#include "../../providers/soft/roce/wire.h"

#include <cstdlib>
#include <cstring>

using namespace ovroce;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Packet k;
	Drop d = decode(data, size, &k);
	if (d == D_OK) {
		size_t hdr = kBthBytes + ext_header_bytes(k.flags);
		if (hdr + k.bth.pad + k.payload_len + kIcrcBytes != size)
			abort();
		if (k.payload != data + hdr)
			abort();
		uint8_t out[kMaxHeaderBytes];
		if (encode_headers(k, out) != hdr)
			abort();
		uint8_t in[kMaxHeaderBytes];
		memcpy(in, data, hdr);
		in[4] &= 0xc0; // reserved bits are not kept
		in[8] &= 0x80;
		if (k.flags & F_DETH)
			in[kBthBytes + 4] = 0;
		if (k.flags & F_XRCETH)
			in[kBthBytes] = 0; // the XRCETH's reserved byte
		if (memcmp(in, out, hdr) != 0)
			abort();
	}
	IpMeta ip;
	ip.src[0] = 10;
	ip.dst[0] = 10;
	ip.dst[3] = 2;
	icrc_check(ip, data, size);
	ip.v6 = true;
	icrc_check(ip, data, size);
	return 0;
}
