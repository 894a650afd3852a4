/*
 * src/pg/module.cpp
 *
 * Module registration: the magic block and _PG_init, which defines the
 * extension's settings, its relcache and transaction callbacks and its
 * shared memory.
 */
#include "pg/pg_includes.hpp"

#include "pg/clock.hpp"
#include "pg/memory_engine.hpp"
#include "pg/policies.hpp"
#include "pg/stats.hpp"
#include "pg/storage.hpp"

extern "C" {
RlModuleMagic();

PGDLLEXPORT void _PG_init(void);
}

void
_PG_init(void)
{
	ratelimit::pg::DefineClockSettings();
	ratelimit::pg::DefineStatsSettings();
	ratelimit::pg::DefineMemorySettings();
	RlReserveGucPrefix("ratelimit");
	ratelimit::pg::RegisterStorageCallbacks();
	ratelimit::pg::RegisterPolicyCallbacks();
}
