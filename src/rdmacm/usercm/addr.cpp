// Address model of the software devices' connection manager (addr.h).
#include "addr.h"

#include "common/env.h"
#include "core/config.h"

#include <infiniband/openverbs.h>
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <ifaddrs.h>
#include <mutex>
#include <string>
#include <unordered_map>
#include <net/if.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

namespace ov::usercm {

namespace {

bool parse_one(const std::string &item, int device, AddrBinding &b)
{
	b = AddrBinding{};
	b.device = device;
	if (item == "*") {
		b.family = AF_UNSPEC;
		return true;
	}
	std::string a = item;
	int prefix = -1;
	auto slash = item.find('/');
	if (slash != std::string::npos) {
		a = item.substr(0, slash);
		std::string p = item.substr(slash + 1);
		unsigned long v;
		if (!ov::parse_uint(p.c_str(), 128, &v))
			return false;
		prefix = int(v);
	}
	if (inet_pton(AF_INET, a.c_str(), b.addr) == 1) {
		b.family = AF_INET;
		if (prefix > 32)
			return false;
		b.prefix = prefix < 0 ? 32 : prefix;
		return true;
	}
	if (inet_pton(AF_INET6, a.c_str(), b.addr) == 1) {
		b.family = AF_INET6;
		b.prefix = prefix < 0 ? 128 : prefix;
		return true;
	}
	return false;
}

bool parse_device(const std::string &name, int &device)
{
	unsigned long v;
	if (name.compare(0, 4, "soft") != 0 || !ov::parse_uint(name.c_str() + 4, 255, &v))
		return false;
	device = int(v);
	return true;
}

bool prefix_match(const uint8_t *a, const uint8_t *b, int bits)
{
	int whole = bits / 8;
	if (memcmp(a, b, whole))
		return false;
	if (bits % 8) {
		uint8_t mask = uint8_t(0xff << (8 - bits % 8));
		return (a[whole] & mask) == (b[whole] & mask);
	}
	return true;
}

// Family and raw address bytes of `sa`; IPv4-mapped IPv6 counts as IPv4.
bool raw(const sockaddr *sa, int &family, uint8_t out[16])
{
	memset(out, 0, 16);
	if (!sa)
		return false;
	if (sa->sa_family == AF_INET) {
		family = AF_INET;
		memcpy(out, &reinterpret_cast<const sockaddr_in *>(sa)->sin_addr, 4);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		auto *a6 = &reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			family = AF_INET;
			memcpy(out, a6->s6_addr + 12, 4);
		} else {
			family = AF_INET6;
			memcpy(out, a6->s6_addr, 16);
		}
		return true;
	}
	return false;
}

void read_config_dir(const char *dir, std::vector<AddrBinding> &out)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	while (dirent *e = readdir(d)) {
		if (e->d_name[0] == '.')
			continue;
		std::string path = std::string(dir) + "/" + e->d_name;
		FILE *f = fopen(path.c_str(), "re");
		if (!f)
			continue;
		char line[512];
		while (fgets(line, sizeof(line), f)) {
			char key[64], dev[64], addr[128];
			if (sscanf(line, " %63s %63s %127s", key, dev, addr) != 3 ||
			    strcmp(key, "cm_soft_address") != 0)
				continue;
			int device;
			AddrBinding b;
			if (parse_device(dev, device) && parse_one(addr, device, b))
				out.push_back(b);
		}
		fclose(f);
	}
	closedir(d);
}

// Prefix length of a netmask (contiguous ones; anything else counts its ones).
int mask_bits(const uint8_t *m, int n)
{
	int bits = 0;
	for (int i = 0; i < n; i++)
		bits += __builtin_popcount(m[i]);
	return bits;
}

// An interface's ioctl answer (SIOCGIFMTU, SIOCGIFHWADDR) in this network
// namespace.
bool if_ioctl(const std::string &ifname, unsigned long req, ifreq &ifr)
{
	if (ifname.empty() || ifname.size() >= IFNAMSIZ)
		return false;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, ifname.c_str(), ifname.size());
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	bool ok = ioctl(fd, req, &ifr) == 0;
	close(fd);
	return ok;
}

} // namespace

bool parse_bindings(const char *text, std::vector<AddrBinding> &out)
{
	if (!text)
		return false;
	std::vector<AddrBinding> got;
	std::string s(text);
	size_t pos = 0;
	while (pos <= s.size()) {
		size_t end = s.find(';', pos);
		if (end == std::string::npos)
			end = s.size();
		std::string group = s.substr(pos, end - pos);
		pos = end + 1;
		if (group.empty())
			continue;
		auto eq = group.find('=');
		int device;
		if (eq == std::string::npos || !parse_device(group.substr(0, eq), device))
			return false;
		std::string list = group.substr(eq + 1);
		size_t p = 0;
		while (p <= list.size()) {
			size_t c = list.find(',', p);
			if (c == std::string::npos)
				c = list.size();
			AddrBinding b;
			if (!parse_one(list.substr(p, c - p), device, b))
				return false;
			got.push_back(b);
			p = c + 1;
		}
	}
	out.insert(out.end(), got.begin(), got.end());
	return true;
}

const std::vector<AddrBinding> &bindings()
{
	static std::vector<AddrBinding> table;
	static std::once_flag once;
	std::call_once(once, [] {
		const char *env = ov::secure_env("OPENVERBS_CM_SOFT_ADDRS");
		if (env && parse_bindings(env, table))
			return;
		if (const char *dir = ov::secure_env("OPENVERBS_CONFIG_DIR"))
			read_config_dir(dir, table);
		read_config_dir("/etc/libibverbs.d", table);
	});
	return table;
}

int bound_device(const sockaddr *sa)
{
	int family;
	uint8_t a[16];
	if (!raw(sa, family, a))
		return -1;
	int best = -1, best_prefix = -1;
	for (auto &b : bindings()) {
		if (b.family == AF_UNSPEC) {
			if (best_prefix < 0)
				best = b.device, best_prefix = 0;
			continue;
		}
		if (b.family == family && b.prefix > best_prefix &&
		    prefix_match(a, b.addr, b.prefix))
			best = b.device, best_prefix = b.prefix;
	}
	return best;
}

bool is_wildcard(const sockaddr *sa)
{
	int family;
	uint8_t a[16], zero[16] = {};
	if (!raw(sa, family, a))
		return false;
	if (sa->sa_family == AF_INET6 && family == AF_INET)
		return false; // ::ffff:0.0.0.0 is not the wildcard
	return memcmp(a, zero, 16) == 0;
}

bool is_local_address(const sockaddr *sa)
{
	int family;
	uint8_t a[16];
	if (!raw(sa, family, a))
		return false;
	if (is_wildcard(sa))
		return true;
	if (family == AF_INET && a[0] == 127)
		return true;
	static const uint8_t loop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	if (family == AF_INET6 && !memcmp(a, loop6, 16))
		return true;
	ifaddrs *list = nullptr;
	if (getifaddrs(&list) != 0)
		return false;
	bool found = false;
	for (ifaddrs *i = list; i && !found; i = i->ifa_next) {
		int f;
		uint8_t b[16];
		if (i->ifa_addr && raw(i->ifa_addr, f, b) && f == family && !memcmp(a, b, 16))
			found = true;
	}
	freeifaddrs(list);
	return found;
}

int soft_device_for(const sockaddr *sa)
{
	int d = bound_device(sa);
	if (d >= 0)
		return d;
	return is_local_address(sa) ? 0 : -1;
}

std::vector<std::string> roce_interfaces_from_env()
{
	std::vector<std::string> names;
	if (const char *v = ov::secure_env(OPENVERBS_SOFT_ROCE_ENV))
		ov::core::parse_roce_interfaces(v, names);
	return names;
}

std::string interface_by_guid(uint64_t guid)
{
	std::string found;
	int matches = 0;
	struct if_nameindex *list = ::if_nameindex();
	for (struct if_nameindex *i = list; i && i->if_index; i++) {
		ifreq ifr;
		if (!if_ioctl(i->if_name, SIOCGIFHWADDR, ifr))
			continue;
		auto *m = reinterpret_cast<const uint8_t *>(ifr.ifr_hwaddr.sa_data);
		uint8_t eui[8] = {uint8_t(m[0] ^ 2), m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]};
		if (!memcmp(eui, &guid, 8)) {
			found = i->if_name;
			matches++;
		}
	}
	if (list)
		if_freenameindex(list);
	return matches == 1 ? found : std::string();
}

int roce_interface_for(const sockaddr *sa, const std::vector<std::string> &ifnames)
{
	int family;
	uint8_t a[16];
	if (!raw(sa, family, a) || is_wildcard(sa) || ifnames.empty())
		return -1;
	ifaddrs *list = nullptr;
	if (getifaddrs(&list) != 0)
		return -1;
	int owner = -1, best = -1, best_bits = -1;
	for (ifaddrs *i = list; i && owner < 0; i = i->ifa_next) {
		int f;
		uint8_t b[16], m[16];
		if (!i->ifa_addr || !i->ifa_name || !raw(i->ifa_addr, f, b) || f != family)
			continue;
		int n = -1;
		for (size_t k = 0; k < ifnames.size(); k++)
			if (ifnames[k] == i->ifa_name)
				n = int(k);
		if (n < 0)
			continue;
		if (!memcmp(a, b, 16)) {
			owner = n;
			break;
		}
		if (!i->ifa_netmask || !raw(i->ifa_netmask, f, m))
			continue;
		int bits = mask_bits(m, family == AF_INET ? 4 : 16);
		if (bits > best_bits && prefix_match(a, b, bits))
			best = n, best_bits = bits;
	}
	freeifaddrs(list);
	return owner >= 0 ? owner : best;
}

bool roce_source_for(const std::string &ifname, const sockaddr *dst, sockaddr_storage &out)
{
	int family;
	uint8_t a[16];
	if (!raw(dst, family, a))
		return false;
	bool dst_ll = family == AF_INET6 && a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
	ifaddrs *list = nullptr;
	if (getifaddrs(&list) != 0)
		return false;
	const ifaddrs *pick = nullptr, *first = nullptr;
	for (ifaddrs *i = list; i && !pick; i = i->ifa_next) {
		int f;
		uint8_t b[16], m[16];
		if (!i->ifa_addr || !i->ifa_name || ifname != i->ifa_name || !raw(i->ifa_addr, f, b) ||
		    f != family)
			continue;
		bool ll = family == AF_INET6 && b[0] == 0xfe && (b[1] & 0xc0) == 0x80;
		if (ll != dst_ll)
			continue;
		if (!first)
			first = i;
		if (i->ifa_netmask && raw(i->ifa_netmask, f, m) &&
		    prefix_match(a, b, mask_bits(m, family == AF_INET ? 4 : 16)))
			pick = i;
	}
	if (!pick)
		pick = first;
	bool ok = pick != nullptr;
	if (ok) {
		memset(&out, 0, sizeof(out));
		if (family == AF_INET) {
			auto *o = reinterpret_cast<sockaddr_in *>(&out);
			o->sin_family = AF_INET;
			o->sin_addr = reinterpret_cast<const sockaddr_in *>(pick->ifa_addr)->sin_addr;
		} else {
			auto *o = reinterpret_cast<sockaddr_in6 *>(&out);
			*o = *reinterpret_cast<const sockaddr_in6 *>(pick->ifa_addr);
			o->sin6_port = 0;
		}
	}
	freeifaddrs(list);
	return ok;
}

void roce_gid_of(const sockaddr *sa, uint8_t gid[16])
{
	int family;
	uint8_t a[16];
	memset(gid, 0, 16);
	if (!raw(sa, family, a))
		return;
	if (family == AF_INET) {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, a, 4);
	} else {
		memcpy(gid, a, 16);
	}
}

uint8_t roce_ib_mtu(const std::string &ifname)
{
	// The interface's MTU is read at most once a second per interface (the
	// sroce provider refreshes its GID table on the same terms): the CM
	// asks for the port of an id several times per connection, and each
	// read was a socket, an ioctl and a close.
	struct Known {
		uint8_t mtu;
		uint64_t at_ns;
	};
	static std::mutex mu;
	static std::unordered_map<std::string, Known> known;
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	uint64_t now = uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
	{
		std::lock_guard<std::mutex> g(mu);
		auto it = known.find(ifname);
		if (it != known.end() && now - it->second.at_ns < 1000000000ull)
			return it->second.mtu;
	}
	ifreq ifr;
	if (!if_ioctl(ifname, SIOCGIFMTU, ifr))
		return 0;
	const uint32_t overhead = 40 + 8 + 12 + 16 + 4 + 4;
	uint8_t mtu = IBV_MTU_256; // as the provider: never below its smallest
	for (int e = IBV_MTU_4096; e >= IBV_MTU_256; e--)
		if ((128u << e) + overhead <= uint32_t(ifr.ifr_mtu)) {
			mtu = uint8_t(e);
			break;
		}
	try {
		std::lock_guard<std::mutex> g(mu);
		known[ifname] = Known{mtu, now};
	} catch (...) {
		// Not remembered: read again next time.
	}
	return mtu;
}

std::string addr_key(const sockaddr *sa)
{
	int family;
	uint8_t a[16];
	if (!raw(sa, family, a))
		return "none";
	if (is_wildcard(sa))
		return family == AF_INET ? "any4" : "any6";
	char buf[40];
	int n = family == AF_INET ? 4 : 16;
	for (int i = 0; i < n; i++)
		snprintf(buf + 2 * i, 3, "%02x", a[i]);
	return buf;
}

} // namespace ov::usercm
