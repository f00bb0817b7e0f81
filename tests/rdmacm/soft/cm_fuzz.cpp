// libFuzzer target over the user-space CM's message parser
// (src/rdmacm/usercm/wire.cpp). Property: the parser never crashes, never
// reads outside the record, and every record it accepts encodes back to
// exactly the same bytes (nothing accepted is ambiguous or partly ignored).
#include "rdmacm/usercm/wire.h"

#include <cstdlib>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ov::usercm::Message m;
	if (ov::usercm::parse(data, size, m) != ov::usercm::ParseError::ok)
		return 0;
	uint8_t out[ov::usercm::kMaxMessage];
	size_t n = ov::usercm::encode(m, out, sizeof(out));
	if (n != size || memcmp(out, data, size) != 0)
		abort();
	return 0;
}
