/*
 * src/pg/memory_undo.hpp
 *
 * What open transactions did to the memory engine's table, finished or
 * undone when they end (memory_undo.cpp): each backend's undo records of
 * escrow steps, the kept marks of the policies it writes, and its entries
 * in the table's redefinitions.
 */
#ifndef RATELIMIT_PG_MEMORY_UNDO_HPP
#define RATELIMIT_PG_MEMORY_UNDO_HPP

#include "pg/memory_table.hpp"

namespace ratelimit::pg::memory {

/* Registers the transaction callbacks that end this backend's records and
 * marks: from _PG_init. */
void RegisterMemoryCallbacks();

/* Makes room for one more undo record (allocating: may raise an error),
 * before a set's spinlock is taken. */
void ReserveUndo();

/* Keeps `record` of way `way` of set `set`, decided under `limit`, as the
 * newest undo record of the current subtransaction: at its commit (or its
 * parent's) core::Finish commits it, at its abort undoes it.  Under the
 * set's spinlock, after ReserveUndo. */
void PushUndo(MemoryTable *table, int set, int way, const core::Limit &limit,
              const core::EscrowRecord &record);

/* Whether an open transaction is writing policy `name` of this database
 * with another limit: a bucket of it stored new, or judged by another
 * limit, is then kept with *mark, the mark of the oldest such write, which
 * ends last (0, for good, while writes overflow the entries).  Under a
 * set's spinlock. */
bool BeingRedefined(MemoryTable *table, const char *name, int name_bytes, uint64 *mark);

/* A write of policy `name` of this database with another limit, in the
 * current (sub)transaction: marks the policy's buckets kept until a call
 * under another limit judges them, with a mark an abort takes back, and
 * enters the write in the redefinitions until the transaction ends. */
void MarkBucketsKept(MemoryTable *table, const char *name, int name_bytes);

} /* namespace ratelimit::pg::memory */

#endif
