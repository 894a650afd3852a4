-- router/route_hash.sql
--
-- Which partition a bucket lives on: the first 32 bits of the MD5 of the
-- UTF-8 form of the limit name's length in characters, a colon, the name and
-- the key, as a signed integer.  PL/Proxy sends a call to partition
-- hash & (partitions - 1).  Defined here rather than taken from hashtext(),
-- whose values are PostgreSQL's own and may change between major versions;
-- md5() does not.  The bytes hashed are UTF-8 whatever the database's
-- encoding, so that a router and a partition route (name, key) alike even
-- when their encodings differ; in a UTF-8 database they are the text's own,
-- as md5(text) hashes them.  A name or key without a UTF-8 form (bytes that
-- are not UTF-8 in a SQL_ASCII database) is refused, as is a NULL one.
-- Included by ratelimit_router.sql; run it alone on a partition to find the
-- buckets of one logical partition when moving it (README, "More than one
-- server").
CREATE FUNCTION rate_limit_route_hash(name text, key text) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    missing text;
    name_utf8 bytea;
    key_utf8 bytea;
BEGIN
    IF name IS NULL OR key IS NULL THEN
        missing := CASE WHEN name IS NULL THEN 'name' ELSE 'key' END;
        RAISE EXCEPTION '% must not be null', missing
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = pg_catalog.format('A bucket is routed by a hash of its name and key; a NULL %s names no bucket.', missing),
                  HINT = CASE WHEN name IS NULL THEN 'Pass the name of the limit, such as ''api''.'
                              ELSE 'Use key '''' for a limit shared by every caller.' END;
    END IF;
    IF pg_catalog.getdatabaseencoding() OPERATOR(pg_catalog.=) 'UTF8' THEN
        -- The text's own bytes, checked already: no conversion can fail.
        name_utf8 := pg_catalog.convert_to(name, 'UTF8');
        key_utf8 := pg_catalog.convert_to(key, 'UTF8');
    ELSE
        BEGIN
            name_utf8 := pg_catalog.convert_to(name, 'UTF8');
            key_utf8 := pg_catalog.convert_to(key, 'UTF8');
        EXCEPTION WHEN character_not_in_repertoire OR untranslatable_character THEN
            RAISE EXCEPTION '% has no UTF-8 form', CASE WHEN name_utf8 IS NULL THEN 'name' ELSE 'key' END
                USING ERRCODE = SQLSTATE,
                      DETAIL = pg_catalog.format('Converting it to UTF-8 failed: %s. A bucket is routed by a hash of the UTF-8 form of its name and key, the same in a database of any encoding.', SQLERRM),
                      HINT = 'Pass a name and key that UTF-8 can represent, for example the md5() of the value.';
        END;
    END IF;
    RETURN ('x' OPERATOR(pg_catalog.||)
            pg_catalog.substr(pg_catalog.md5(pg_catalog.convert_to(pg_catalog.length(name_utf8, 'UTF8')::text
                                                                   OPERATOR(pg_catalog.||) ':', 'UTF8')
                                             OPERATOR(pg_catalog.||) name_utf8
                                             OPERATOR(pg_catalog.||) key_utf8), 1, 8))::bit(32)::integer;
END
$$;
COMMENT ON FUNCTION rate_limit_route_hash(text, text) IS
    'the 32-bit hash of the UTF-8 form of (name, key) that routes bucket (name, key) to partition hash & (partitions - 1)';
