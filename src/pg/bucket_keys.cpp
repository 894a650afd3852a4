/*
 * src/pg/bucket_keys.cpp
 *
 * Bucket hashes and the canonical order of buckets.
 */
#include "pg/bucket_keys.hpp"

#include "pg/storage.hpp"

namespace ratelimit::pg {

int
CompareText(text *a, text *b)
{
	int a_len = VARSIZE_ANY_EXHDR(a);
	int b_len = VARSIZE_ANY_EXHDR(b);
	int cmp = memcmp(VARDATA_ANY(a), VARDATA_ANY(b), Min(a_len, b_len));
	return cmp != 0 ? cmp : (a_len > b_len) - (a_len < b_len);
}

uint64
NameHash(text *name, uint64 seed)
{
	return hash_bytes_extended(reinterpret_cast<const unsigned char *>(VARDATA_ANY(name)),
	                           VARSIZE_ANY_EXHDR(name), seed);
}

uint64
BucketHash(text *name, text *key, uint64 seed)
{
	return hash_bytes_extended(reinterpret_cast<const unsigned char *>(VARDATA_ANY(key)),
	                           VARSIZE_ANY_EXHDR(key), NameHash(name, seed));
}

int
CompareBuckets(const BucketTake &a, const BucketTake &b)
{
	int cmp = CompareText(a.name, b.name);
	return cmp != 0 ? cmp : CompareText(a.key, b.key);
}

text *
CopyText(text *value)
{
	return cstring_to_text_with_len(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
}

} /* namespace ratelimit::pg */
