// openverbs RoCE v2 software device: the CRC-32 behind the invariant CRC.
//
// The ICRC is the reflected CRC-32 of the Ethernet polynomial, zlib's crc32.
// Intel's ISA-L computes the same CRC with carry-less multiplication (about
// ten times zlib's rate on this project's machines), so it is used when the
// system has it and it is the faster of the two here: libisal.so.2 is loaded
// at run time, not linked, so that the provider runs (with zlib) on systems
// without it. Under an emulator that translates vector instructions one by
// one (qemu's TCG, the test bed's guest) ISA-L is the slower one (3.0 against
// 2.0 us per KiB), and its fallback for a CPU without carry-less
// multiplication may be too, hence the race below. Chosen once per process; the device reports the
// choice at open (VERBS_LOG_LEVEL 4).
#include "wire.h"

#include <dlfcn.h>
#include <time.h>
#include <algorithm>
#include <cstdint>
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

uint64_t mono_ns()
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
}

// True when `fn` computes the CRC of a packet-sized buffer no slower than
// zlib here. Three interleaved rounds over 16 KiB (a few packets: large
// beside a clock read, which an emulated clock makes dear), the best of
// each, so that a preemption in one round does not decide.
// Without memory for the buffer, ISA-L (what was used before the race).
bool at_least_as_fast(CrcFn fn)
{
	constexpr size_t kBytes = 16384;
	auto *buf = static_cast<uint8_t *>(malloc(kBytes));
	if (!buf)
		return true;
	for (size_t i = 0; i < kBytes; i++)
		buf[i] = uint8_t(i * 131u + 7u);
	uint64_t best_fn = UINT64_MAX, best_zlib = UINT64_MAX;
	volatile uint32_t sink = 0;
	for (int round = 0; round < 3; round++) {
		uint64_t t0 = mono_ns();
		sink = sink + fn(0, buf, kBytes);
		uint64_t t1 = mono_ns();
		sink = sink + zlib_more(0, buf, kBytes);
		uint64_t t2 = mono_ns();
		best_fn = std::min(best_fn, t1 - t0);
		best_zlib = std::min(best_zlib, t2 - t1);
	}
	free(buf);
	return best_fn <= best_zlib;
}

// ISA-L's function, and the form the device calls. ISA-L's vector code for
// long buffers returns with the upper halves of the vector registers in use
// (no VZEROUPPER), and the thread that called it then pays for every
// legacy-SSE instruction it runs (libc's, zlib's, ours) for as long as it
// lives. Measured on the host: ib_write_bw 64 KiB (1 KiB packets) 16-17.6
// Gbit/s without the clearing, 26-27 with it; a process that once ran the
// race below without it, ib_write_lat 4.2 us against 3.0. Clearing them
// after each call costs a cycle.
CrcFn g_isal = nullptr;

uint32_t isal_clean(uint32_t c, const uint8_t *p, uint64_t n)
{
	uint32_t r = g_isal(c, p, n);
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("vzeroupper" ::: "memory");
#endif
	return r;
}

// ISA-L's crc32_gzip_refl(init, buf, len): init 0 starts a CRC, and a
// result passed back as init continues it, as zlib's crc32 chains
// (ISA-L's crc.h). OPENVERBS_SOFT_ROCE_CRC=zlib keeps zlib, =isa-l takes
// ISA-L whenever it loads and agrees, without the race (both read with
// secure_getenv: ignored in setuid programs).
Choice choose()
{
	Choice ch;
	const char *want = secure_getenv("OPENVERBS_SOFT_ROCE_CRC");
	if (want && strcmp(want, "zlib") == 0)
		return ch;
	bool forced = want && strcmp(want, "isa-l") == 0;
	void *lib = dlopen("libisal.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!lib)
		return ch;
	void *sym = dlsym(lib, "crc32_gzip_refl");
	if (!sym)
		return ch; // (RTLD_NODELETE: the library stays; it is small)
	auto fn = reinterpret_cast<CrcFn>(sym);
#if defined(__x86_64__) || defined(__i386__)
	// VZEROUPPER exists where AVX does; without AVX, ISA-L never touches
	// those registers and is called as it is.
	if (__builtin_cpu_supports("avx")) {
		g_isal = fn;
		fn = isal_clean;
	}
#endif
	// Never trust a library by its name alone: it must give zlib's answer.
	static const uint8_t probe[] = "openverbs ICRC probe: 123456789";
	if (fn(0, probe, sizeof probe) != zlib_more(0, probe, sizeof probe) ||
	    fn(fn(0, probe, 7), probe + 7, sizeof probe - 7) !=
		    zlib_more(0, probe, sizeof probe))
		return ch;
	if (!forced && !at_least_as_fast(fn))
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
