# The rdma-core ABI the build reproduces, chosen at configure time:
#
#   cmake -S . -B build                       # 44: rdma-core 44, Debian 12
#   cmake -S . -B build56 -DOPENVERBS_ABI=56  # 56: rdma-core 56.1, Debian 13
#   cmake -S . -B build64 -DOPENVERBS_ABI=64  # 64: rdma-core 64.0 (upstream)
#
# One source tree serves every target (src/DESIGN.md, "ABI targets"):
#  * symbol tables (src/facade/libibverbs.symbols, src/umad/libibumad.symbols)
#    mark lines that exist only for some targets ("abi>=56");
#  * the public headers include <infiniband/openverbs_abi.h>, generated here,
#    which defines _OPENVERBS_ABI; layouts that differ between releases are
#    chosen with `#if _OPENVERBS_ABI >= 56`. The generated header is
#    installed with the others, so a program compiled against an installed
#    tree gets that release's layouts.
# A new target is one more entry in OPENVERBS_ABIS and its facts below.
set(OPENVERBS_ABIS 44 56 64)
set(OPENVERBS_ABI 44 CACHE STRING
    "rdma-core ABI to build: 44 (Debian 12), 56 (Debian 13) or 64 (rdma-core 64.0)")
set_property(CACHE OPENVERBS_ABI PROPERTY STRINGS ${OPENVERBS_ABIS})
if(NOT OPENVERBS_ABI IN_LIST OPENVERBS_ABIS)
  message(FATAL_ERROR "OPENVERBS_ABI=${OPENVERBS_ABI}: supported targets are ${OPENVERBS_ABIS}")
endif()

# Per-target facts: the release's library file versions (the SONAMEs never
# change), and the Debian release whose packages carry it.
if(OPENVERBS_ABI EQUAL 44)
  set(OPENVERBS_RDMA_CORE_VERSION 44.0)
  set(OPENVERBS_IBVERBS_FILE_VERSION 1.14.44.0)
  set(OPENVERBS_IBUMAD_FILE_VERSION 3.2.44.0)
  set(OPENVERBS_RDMACM_FILE_VERSION 1.3.44.0)
  set(OPENVERBS_DEBIAN_SUITE bookworm)
elseif(OPENVERBS_ABI EQUAL 56)
  set(OPENVERBS_RDMA_CORE_VERSION 56.1)
  set(OPENVERBS_IBVERBS_FILE_VERSION 1.14.56.1)
  set(OPENVERBS_IBUMAD_FILE_VERSION 3.4.56.1)
  set(OPENVERBS_RDMACM_FILE_VERSION 1.3.56.1)
  set(OPENVERBS_DEBIAN_SUITE trixie)
elseif(OPENVERBS_ABI EQUAL 64)
  # No Debian release carries 64: its reference is rdma-core 64.0 built from
  # the release tarball (tests/anchor64).
  set(OPENVERBS_RDMA_CORE_VERSION 64.0)
  set(OPENVERBS_IBVERBS_FILE_VERSION 1.17.64.0)
  set(OPENVERBS_IBUMAD_FILE_VERSION 3.4.64.0)
  set(OPENVERBS_RDMACM_FILE_VERSION 1.4.64.0)
  set(OPENVERBS_DEBIAN_SUITE "")
endif()
# The provider ABI: the number in IBVERBS_PRIVATE_N, verbs_register_driver_N
# and the plugin names lib<name>-rdmavN.so.
if(OPENVERBS_ABI GREATER_EQUAL 64)
  set(OPENVERBS_PABI 64)
else()
  set(OPENVERBS_PABI 34)
endif()

# Where the tests find the release's own -dev headers and libraries: Debian
# 12's are installed on the machine (tests/deps.sh); Debian 13's are fetched
# into the cache by tests/trixie/fetch-dev.sh (ctest fixture abi_trixie_dev).
# Called after project() (the library architecture is known then).
macro(openverbs_abi_release_dirs)
if(OPENVERBS_ABI EQUAL 44)
  set(OPENVERBS_RELEASE_INCLUDE /usr/include)
  set(OPENVERBS_RELEASE_LIBDIR /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
  set(OPENVERBS_RELEASE_FIXTURE "")
elseif(OPENVERBS_ABI EQUAL 64)
  # The anchor's installed tree (tests/anchor64/build.sh keeps the link
  # "current" to the build of its key; the fixture anchor64 builds it).
  if(DEFINED ENV{OPENVERBS_CACHE})
    set(ov_cache $ENV{OPENVERBS_CACHE})
  else()
    set(ov_cache /var/cache/openverbs)
  endif()
  set(OPENVERBS_ANCHOR64 ${ov_cache}/anchor64/current)
  set(OPENVERBS_RELEASE_INCLUDE ${OPENVERBS_ANCHOR64}/usr/include)
  set(OPENVERBS_RELEASE_LIBDIR ${OPENVERBS_ANCHOR64}/usr/lib)
  set(OPENVERBS_RELEASE_FIXTURE anchor64)
else()
  if(DEFINED ENV{OPENVERBS_CACHE})
    set(ov_cache $ENV{OPENVERBS_CACHE})
  else()
    set(ov_cache /var/cache/openverbs)
  endif()
  set(OPENVERBS_RELEASE_INCLUDE ${ov_cache}/${OPENVERBS_DEBIAN_SUITE}-dev/root)
  set(OPENVERBS_RELEASE_LIBDIR ${ov_cache}/${OPENVERBS_DEBIAN_SUITE}-dev/lib)
  set(OPENVERBS_RELEASE_FIXTURE abi_trixie_dev)
endif()
endmacro()
