// Opening a libibverbs.so.1 (ours or Debian's) with dlopen and making a
// context on a fake device through that library's own private ABI
// (_verbs_init_and_alloc_context, verbs_set_ops, verbs_uninit_context), so
// black-box tests can call any exported verb on a real context without
// RDMA hardware. Shared by dl_test.cpp and bad_input.cpp.
#pragma once

#include <infiniband/driver.h>

#include <dlfcn.h>

namespace verbs_dl {

struct Lib {
	void *handle = nullptr;
	void *(*init_and_alloc)(struct ibv_device *, int, size_t, struct verbs_context *, uint32_t) = nullptr;
	void (*set_ops)(struct verbs_context *, const struct verbs_context_ops *) = nullptr;
	void (*uninit)(struct verbs_context *) = nullptr;
	struct ibv_context *(*open_device)(struct ibv_device *) = nullptr;
	int (*close_device)(struct ibv_context *) = nullptr;

	bool load(const char *path);
	template <typename F> F sym(const char *name) const
	{
		return reinterpret_cast<F>(dlsym(handle, name));
	}
	template <typename F> F vsym(const char *name, const char *version) const
	{
		return reinterpret_cast<F>(dlvsym(handle, name, version));
	}
};

// The library the fake provider allocates its contexts with.
Lib &current_lib();

// A fake device whose alloc_context builds a context with `ops` (plus
// free_context) on the current library.
struct verbs_device *fake_device(const struct verbs_context_ops *ops);

} // namespace verbs_dl
