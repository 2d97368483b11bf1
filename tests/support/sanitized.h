// Whether this test binary is instrumented by ASan or TSan. Heavy tests do less work there:
// instrumented code runs 3-20x slower, and the Release pass runs them in full.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WCOMM_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define WCOMM_TEST_SANITIZED 1
#endif
#endif

namespace wcomm::testing {
#ifdef WCOMM_TEST_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
}  // namespace wcomm::testing
