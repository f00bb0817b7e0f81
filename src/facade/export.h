// Marking of the exported C surface of libibverbs.so.1.
//
// The library is built with hidden visibility; only functions marked
// OV_EXPORT (and listed in libibverbs.symbols, which generates the version
// script) are exported. Old ABI twins are bound to their version node with
// OV_SYMVER, e.g.
//   OV_EXPORT ibv_device_1_0 **ov_get_device_list_1_0(int *num) noexcept;
//   OV_SYMVER(ov_get_device_list_1_0, "ibv_get_device_list@IBVERBS_1.0");
#pragma once

#ifdef __cplusplus
#define OV_EXTERN_C extern "C"
#else
#define OV_EXTERN_C
#endif

#define OV_EXPORT OV_EXTERN_C __attribute__((visibility("default")))

// Binds symbol `impl` to the versioned name `versioned` ("name@NODE").
#define OV_SYMVER(impl, versioned) __asm__(".symver " #impl "," versioned)

// The 33 verbs that also have an @IBVERBS_1.0 twin (libibverbs.symbols) are
// defined with OV_EXPORT_V11 instead of OV_EXPORT: their plain name stays
// inside the library, and OV_DEFAULT_VERSION_1_1(name), in the same file,
// exports the definition as name@@IBVERBS_1.1. (A plain exported name would
// be claimed by the first version node that lists it, IBVERBS_1.0, which
// must list it for the twin.)
#ifdef OV_STATIC_ARCHIVE
// The unit tests' static archive: plain names, no version bindings.
#define OV_EXPORT_V11 OV_EXPORT
#define OV_DEFAULT_VERSION_1_1(name) static_assert(true, #name)
#else
#define OV_EXPORT_V11 OV_EXTERN_C __attribute__((visibility("hidden")))
#define OV_DEFAULT_VERSION_1_1(name)                                            \
	OV_EXTERN_C __typeof__(name) ov_v11_##name                              \
		__attribute__((alias(#name), copy(name), visibility("default"))); \
	OV_SYMVER(ov_v11_##name, #name "@@IBVERBS_1.1")
#endif
