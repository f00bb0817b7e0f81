// The C test compiled as C++17: DECLARE_DRV_CMD in C++ providers.
#include "drv_cmd.c"
