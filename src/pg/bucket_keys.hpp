/*
 * src/pg/bucket_keys.hpp
 *
 * What identifies a bucket beyond its (name, key) text: the hash every use
 * derives from it, each with its own seed, and the one canonical order in
 * which rows are locked.
 */
#ifndef RATELIMIT_PG_BUCKET_KEYS_HPP
#define RATELIMIT_PG_BUCKET_KEYS_HPP

#include "pg/pg_includes.hpp"

namespace ratelimit::pg {

struct BucketTake; /* storage.hpp */

/* Seeds of BucketHash, one per use, so that the uses stay independent. */
constexpr uint64 kNewKeySeed = 0;                 /* the new-key lock and the latest versions */
constexpr uint64 kJitterSeed = 0x6A6974746572ULL; /* a key's share of its policy's jitter */
constexpr uint64 kWindowSeed = 0x77696E646F77ULL; /* where a key's fixed windows start */
constexpr uint64 kMemorySeed = 0x6D656D6F7279ULL; /* a key's set in the memory engine */

/* A 64-bit hash of `name` alone under `seed`. */
uint64 NameHash(text *name, uint64 seed);

/* A 64-bit hash of bucket (name, key) under `seed`: the key's, seeded with
 * NameHash(name, seed). */
uint64 BucketHash(text *name, text *key, uint64 seed);

/* Bytewise order of two texts (the "C" collation of the key columns). */
int CompareText(text *a, text *b);

/* A copy of `value` in the current memory context. */
text *CopyText(text *value);

/* The canonical order of buckets, in which rows are locked: name, then key,
 * bytewise.  Negative, zero or positive, as a before, is, or follows b. */
int CompareBuckets(const BucketTake &a, const BucketTake &b);

} /* namespace ratelimit::pg */

#endif
