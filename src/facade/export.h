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
