/*
 * src/pg/clock.cpp
 *
 * The limiter never uses the application's clock nor now() (fixed at
 * transaction start): it reads GetCurrentTimestamp() after the row lock is
 * granted.  ratelimit.fixed_clock replaces that reading with a fixed instant,
 * in seconds since the Unix epoch, so tests can step time exactly.  It is
 * PGC_SUSET: only a superuser may move the clock.
 */
#include "pg/clock.hpp"

#include <cmath>

namespace ratelimit::pg {

namespace {

/* Seconds since the Unix epoch; 0 means "use the server's clock". */
double fixed_clock_seconds = 0.0;

constexpr double kUnixToPostgresEpochSeconds =
    static_cast<double>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY;

} /* namespace */

void
DefineClockSettings()
{
	DefineCustomRealVariable("ratelimit.fixed_clock",
	                         "Fixes the limiter's clock at this many seconds since the Unix epoch.",
	                         "0, the default, uses the database server's clock.  For tests only.",
	                         &fixed_clock_seconds, 0.0, 0.0, 1.0e11, PGC_SUSET, 0, NULL, NULL,
	                         NULL);
}

TimestampTz
ClockNow()
{
	if (fixed_clock_seconds > 0.0)
		return static_cast<TimestampTz>(
		    std::llround((fixed_clock_seconds - kUnixToPostgresEpochSeconds) * 1.0e6));
	return GetCurrentTimestamp();
}

} /* namespace ratelimit::pg */
