/*
 * src/pg/clock.hpp
 *
 * The limiter's clock: the database server's clock in microseconds, or a
 * fixed instant set by a superuser through ratelimit.fixed_clock for
 * deterministic tests.
 */
#ifndef RATELIMIT_PG_CLOCK_HPP
#define RATELIMIT_PG_CLOCK_HPP

#include "pg/pg_includes.hpp"

namespace ratelimit::pg {

/* Registers ratelimit.fixed_clock; called from _PG_init. */
void DefineClockSettings();

/* Now, as a TimestampTz (µs since 2000-01-01).  Read it after any lock wait. */
TimestampTz ClockNow();

} /* namespace ratelimit::pg */

#endif
