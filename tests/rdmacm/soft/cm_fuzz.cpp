// libFuzzer target over the user-space CM's parsers: the message parser
// between our own processes (src/rdmacm/usercm/wire.cpp) and the InfiniBand
// CM MAD parser of sroce devices' QP1 (src/rdmacm/usercm/mad.cpp), with the
// rdma_cm header inside a REQ. Properties: the parsers never crash, never
// read outside the input, every record the message parser accepts encodes
// back to exactly the same bytes, and every MAD the MAD parser accepts
// encodes to one that parses to the same fields (its bytes again).
#include "rdmacm/usercm/mad.h"
#include "rdmacm/usercm/wire.h"

#include <cstdlib>
#include <cstring>

namespace {

void message(const uint8_t *data, size_t size)
{
	ov::usercm::Message m;
	if (ov::usercm::parse(data, size, m) != ov::usercm::ParseError::ok)
		return;
	uint8_t out[ov::usercm::kMaxMessage];
	size_t n = ov::usercm::encode(m, out, sizeof(out));
	if (n != size || memcmp(out, data, size) != 0)
		abort();
}

// A MAD: the first 256 bytes (shorter inputs are refused as such).
void mad(const uint8_t *data, size_t size)
{
	namespace mad = ov::usercm::mad;
	mad::Mad m;
	if (mad::parse(data, size < mad::kMadBytes ? size : mad::kMadBytes, m) != mad::MadError::ok)
		return;
	uint8_t once[mad::kMadBytes], twice[mad::kMadBytes];
	if (!mad::encode(m, once))
		abort(); // accepted but not encodable
	mad::Mad again;
	if (mad::parse(once, sizeof(once), again) != mad::MadError::ok || !mad::encode(again, twice) ||
	    memcmp(once, twice, sizeof(once)) != 0)
		abort();
	if (m.attr == mad::Attr::req) {
		mad::CmaHeader h;
		if (mad::parse_cma(m.private_data, h)) {
			uint8_t hdr[mad::kCmaHeaderBytes];
			mad::encode_cma(h, hdr);
			if (memcmp(hdr, m.private_data, sizeof(hdr)) != 0)
				abort();
		}
	}
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	message(data, size);
	mad(data, size);
	return 0;
}
