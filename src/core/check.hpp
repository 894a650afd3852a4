/*
 * src/core/check.hpp
 *
 * RL_CORE_ASSERT(condition): a check of what the core relies on, made when
 * the core is built with RATELIMIT_CORE_ASSERTS (the unit tests, and the
 * extension against a server built with assertions), and compiled away
 * otherwise: the condition is then not evaluated.  A failed check prints
 * where it failed and aborts.
 */
#ifndef RATELIMIT_CORE_CHECK_HPP
#define RATELIMIT_CORE_CHECK_HPP

#ifdef RATELIMIT_CORE_ASSERTS

#include <cstdio>
#include <cstdlib>

namespace ratelimit::core {

[[noreturn]] inline void
CheckFailed(const char *condition, const char *file, int line) noexcept
{
	std::fprintf(stderr, "ratelimit: core check failed: %s (%s:%d)\n", condition, file, line);
	std::abort();
}

} /* namespace ratelimit::core */

#define RL_CORE_ASSERT(condition)                                                                  \
	((condition) ? (void)0 : ::ratelimit::core::CheckFailed(#condition, __FILE__, __LINE__))

#else

#define RL_CORE_ASSERT(condition) ((void)sizeof(!(condition)))

#endif

#endif
