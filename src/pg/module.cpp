/*
 * src/pg/module.cpp
 *
 * Module registration: the magic block and _PG_init, which defines the
 * extension's settings and callbacks and has each engine set up its own
 * (its settings, callbacks and shared memory).
 */
#include "pg/pg_includes.hpp"

#include "pg/clock.hpp"
#include "pg/engine.hpp"
#include "pg/policies.hpp"
#include "pg/stats.hpp"

extern "C" {
RlModuleMagic();

PGDLLEXPORT void _PG_init(void);
}

void
_PG_init(void)
{
	ratelimit::pg::DefineClockSettings();
	ratelimit::pg::DefineStatsSettings();
	for (const ratelimit::pg::BucketEngine *engine : ratelimit::pg::kEngines)
		engine->init();
	RlReserveGucPrefix("ratelimit");
	ratelimit::pg::RegisterPolicyCallbacks();
}
