// openverbs RoCE v2 software device: the CRC-32 behind the invariant CRC.
//
// The ICRC is the reflected CRC-32 of the Ethernet polynomial, zlib's crc32.
// Intel's ISA-L computes the same CRC with carry-less multiplication (about
// ten times zlib's rate on this project's machines), so it is used when the
// system has it: libisal.so.2 is loaded at run time, not linked, so that the
// provider runs (with zlib) on systems without it. Chosen once per process;
// the device reports the choice at open (VERBS_LOG_LEVEL 4).
#include "wire.h"

#include <dlfcn.h>
#include <cstdlib>
#include <cstring>
#include <zlib.h>

namespace ovroce {

namespace {

uint32_t zlib_more(uint32_t c, const uint8_t *p, uint64_t n)
{
	// zlib takes uInt lengths; ICRC spans are far below 4 GiB, but stay exact.
	while (n > 0) {
		const uInt step = n > 0x40000000u ? 0x40000000u : uInt(n);
		c = uint32_t(crc32(c, p, step));
		p += step;
		n -= step;
	}
	return c;
}

struct Choice {
	CrcFn fn = zlib_more;
	const char *name = "zlib";
};

// ISA-L's crc32_gzip_refl(init, buf, len): init 0 starts a CRC, and a
// result passed back as init continues it, as zlib's crc32 chains
// (ISA-L's crc.h). OPENVERBS_SOFT_ROCE_CRC=zlib keeps zlib (read with
// secure_getenv: ignored in setuid programs).
Choice choose()
{
	Choice ch;
	const char *want = secure_getenv("OPENVERBS_SOFT_ROCE_CRC");
	if (want && strcmp(want, "zlib") == 0)
		return ch;
	void *lib = dlopen("libisal.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!lib)
		return ch;
	void *sym = dlsym(lib, "crc32_gzip_refl");
	if (!sym)
		return ch; // (RTLD_NODELETE: the library stays; it is small)
	auto fn = reinterpret_cast<CrcFn>(sym);
	// Never trust a library by its name alone: it must give zlib's answer.
	static const uint8_t probe[] = "openverbs ICRC probe: 123456789";
	if (fn(0, probe, sizeof probe) != zlib_more(0, probe, sizeof probe) ||
	    fn(fn(0, probe, 7), probe + 7, sizeof probe - 7) !=
		    zlib_more(0, probe, sizeof probe))
		return ch;
	ch.fn = fn;
	ch.name = "isa-l";
	return ch;
}

const Choice &choice()
{
	static const Choice ch = choose();
	return ch;
}

} // namespace

CrcFn crc_function() { return choice().fn; }
const char *crc_name() { return choice().name; }
CrcFn crc_zlib() { return zlib_more; }

} // namespace ovroce
