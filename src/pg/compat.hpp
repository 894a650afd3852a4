/*
 * src/pg/compat.hpp
 *
 * Every PostgreSQL-version difference the boundary depends on, behind
 * PG_VERSION_NUM guards.  Supported: 13 to 18.  Nothing outside this file
 * tests PG_VERSION_NUM.
 */
#ifndef RATELIMIT_PG_COMPAT_HPP
#define RATELIMIT_PG_COMPAT_HPP

#if PG_VERSION_NUM < 130000 || PG_VERSION_NUM >= 190000
#error "ratelimit supports PostgreSQL 13 to 18"
#endif

/* 18 added an instrumentation argument to index_beginscan. */
#if PG_VERSION_NUM >= 180000
#define RlIndexBeginScan(heap, index, snapshot, nkeys)                                             \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), 0)
#else
#define RlIndexBeginScan(heap, index, snapshot, nkeys)                                             \
	index_beginscan((heap), (index), (snapshot), (nkeys), 0)
#endif

/* 14 added the indexUnchanged hint (enables bottom-up deletion in btree). */
#if PG_VERSION_NUM >= 140000
#define RlIndexInsert(index, values, isnull, tid, heap, check, unchanged, info)                    \
	index_insert((index), (values), (isnull), (tid), (heap), (check), (unchanged), (info))
#else
#define RlIndexInsert(index, values, isnull, tid, heap, check, unchanged, info)                    \
	index_insert((index), (values), (isnull), (tid), (heap), (check), (info))
#endif

/* Before 14, fmgroids named functions by their C symbol: timestamptz_gt is
 * timestamp_gt there (the same C function, comparing int64 microseconds). */
#if PG_VERSION_NUM >= 140000
#define RL_F_TIMESTAMPTZ_GT F_TIMESTAMPTZ_GT
#else
#define RL_F_TIMESTAMPTZ_GT F_TIMESTAMP_GT
#endif

/* 17 asks callers to release per-statement index-insert state. */
#if PG_VERSION_NUM >= 170000
#define RlIndexInsertCleanup(index, info) index_insert_cleanup((index), (info))
#else
#define RlIndexInsertCleanup(index, info) ((void)0)
#endif

/*
 * heap_update: 16 replaced "is the new tuple heap-only" with a TU_UpdateIndexes
 * result.  RlHeapUpdate returns the TM_Result and, on success, sets
 * *needs_index to whether the new version needs an index entry.
 */
static inline TM_Result
RlHeapUpdate(Relation rel, ItemPointer otid, HeapTuple newtup, CommandId cid, bool wait,
             TM_FailureData *tmfd, bool *needs_index)
{
	LockTupleMode lockmode;
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update_indexes = TU_None;
	TM_Result result = heap_update(rel, otid, newtup, cid, InvalidSnapshot, wait, tmfd, &lockmode,
	                               &update_indexes);
	*needs_index = (update_indexes == TU_All); /* btree is never summarizing */
#else
	TM_Result result = heap_update(rel, otid, newtup, cid, InvalidSnapshot, wait, tmfd, &lockmode);
	*needs_index = !HeapTupleIsHeapOnly(newtup);
#endif
	return result;
}

/* 14 made callers say how string keys are hashed; 13 did so by default. */
#ifndef HASH_STRINGS
#define HASH_STRINGS 0
#endif

/* 15 added the pg_prng generator; before it, random(). */
#if PG_VERSION_NUM >= 150000
extern "C" {
#include "common/pg_prng.h"
}
#define RlRandomBelow(n)                                                                           \
	(static_cast<int>(pg_prng_uint64_range(&pg_global_prng_state, 0, static_cast<uint64>(n) - 1)))
#else
#define RlRandomBelow(n) (static_cast<int>(random() % (n)))
#endif

/* 15 replaced EmitWarningsOnPlaceholders with MarkGUCPrefixReserved. */
#if PG_VERSION_NUM >= 150000
#define RlReserveGucPrefix(prefix) MarkGUCPrefixReserved(prefix)
#else
#define RlReserveGucPrefix(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/* Before 15 a procedure's SPI_commit left no transaction open: the next one
 * had to be started by hand. */
#if PG_VERSION_NUM >= 150000
#define RlStartNextTransaction() ((void)0)
#else
#define RlStartNextTransaction() SPI_start_transaction()
#endif

/*
 * Shared memory for an extension loaded by shared_preload_libraries: since 15
 * asked for from shmem_request_hook, before from _PG_init itself
 * (kRlShmemFromHook says which).  RlHookShmemRequest(prev, request) installs
 * `request` as the hook, keeping the hook it replaces in `prev` (an
 * RlShmemRequestHook), and does nothing before 15; `request` begins with
 * RlChainShmemRequest(prev).
 */
#if PG_VERSION_NUM >= 150000
using RlShmemRequestHook = shmem_request_hook_type;
constexpr bool kRlShmemFromHook = true;
#define RlHookShmemRequest(prev, request)                                                          \
	do {                                                                                           \
		(prev) = shmem_request_hook;                                                               \
		shmem_request_hook = (request);                                                            \
	} while (0)
#define RlChainShmemRequest(prev)                                                                  \
	do {                                                                                           \
		if ((prev) != NULL)                                                                        \
			(prev)();                                                                              \
	} while (0)
#else
using RlShmemRequestHook = void (*)(void);
constexpr bool kRlShmemFromHook = false;
#define RlHookShmemRequest(prev, request) ((void)(prev), (void)(request))
#define RlChainShmemRequest(prev)         ((void)(prev))
#endif

/*
 * 17 gave LockHeldByMe a third argument, orstronger: RlLockHeldByMe asks
 * whether this transaction holds exactly `mode` on `tag`.
 */
static inline bool
RlLockHeldByMe(const LOCKTAG *tag, LOCKMODE mode)
{
#if PG_VERSION_NUM >= 170000
	return LockHeldByMe(tag, mode, false);
#else
	return LockHeldByMe(tag, mode);
#endif
}

/*
 * 17 added named DSM segments, which a library loaded after server start may
 * create: RlNamedSegment(name, size, init) attaches to (or creates) one, and
 * is NULL before 17.
 */
#if PG_VERSION_NUM >= 170000
extern "C" {
#include "storage/dsm_registry.h"
}
static inline void *
RlNamedSegment(const char *name, Size size, void (*init)(void *))
{
	bool found;
	return GetNamedDSMSegment(name, size, init, &found);
}
#else
static inline void *
RlNamedSegment(const char *, Size, void (*)(void *))
{
	return NULL;
}
#endif

/* The extension's version, from ratelimit.control (the Makefile passes it). */
#ifndef RATELIMIT_VERSION
#error "RATELIMIT_VERSION must be defined: build with the project's Makefile"
#endif

/* 18 records the module's name and version in its magic block. */
#if PG_VERSION_NUM >= 180000
#define RlModuleMagic() PG_MODULE_MAGIC_EXT(.name = "ratelimit", .version = RATELIMIT_VERSION)
#else
#define RlModuleMagic() PG_MODULE_MAGIC
#endif

#endif
