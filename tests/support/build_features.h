// What this build of wcomm has: the optional features (CMake's WCOMM_WITH_UCX / _ZSTD / _TLS /
// _ZMQ; the library's targets define WCOMM_HAVE_* for whatever links them). A test of a feature
// the build lacks is skipped with the reason, never run to fail.
#pragma once

#include <gtest/gtest.h>

namespace wcomm::testing {

#ifdef WCOMM_HAVE_UCX
inline constexpr bool kHaveUcx = true;
#else
inline constexpr bool kHaveUcx = false;
#endif
#ifdef WCOMM_HAVE_ZSTD
inline constexpr bool kHaveZstd = true;
#else
inline constexpr bool kHaveZstd = false;
#endif
#ifdef WCOMM_HAVE_TLS
inline constexpr bool kHaveTls = true;
#else
inline constexpr bool kHaveTls = false;
#endif

}  // namespace wcomm::testing

#define WCOMM_SKIP_WITHOUT(have, option) \
  if (!(have)) GTEST_SKIP() << "this build has no " option " (configured with " option "=OFF)"
