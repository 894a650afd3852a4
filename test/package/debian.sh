#!/usr/bin/env bash
# The Debian package, as Debian builds extension packages: dpkg-buildpackage
# with pg_buildext (debian/rules) from the release archive that "make dist"
# makes.  The .deb must hold the library, the control file and every script,
# under PostgreSQL 15's paths and nothing else; installed into a clean copy of
# the PostgreSQL tree (no ratelimit in it but the package's), it must work:
# CREATE EXTENSION (refused to a database owner who is not a superuser), a
# policy, takes granted and denied.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

ensure_packages
rl_install_packages debhelper dpkg-dev postgresql-server-dev-all

work=$(mktemp -d /tmp/ratelimit-deb.XXXXXX)
rl_at_exit "rm -rf '$work'"
version=$(rl_version)
major=$RL_SYSTEM_PG_MAJOR
package=postgresql-$major-ratelimit

# --- build the package from the release archive -----------------------------

archive=$(rl_dist "$work") || rl_die "make dist failed"
tar -C "$work" -xzf "$archive"
rl_log "dpkg-buildpackage -b in $work/ratelimit-$version"
if ! (cd "$work/ratelimit-$version" && dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1; then
    tail -n 40 "$work/build.log"
    rl_die "dpkg-buildpackage failed"
fi
deb=$(find "$work" -maxdepth 1 -name "${package}_*.deb" | head -n 1)
[ -n "$deb" ] || rl_die "dpkg-buildpackage made no ${package}_*.deb: $(ls "$work")"
echo "built $(basename "$deb") ($(stat -c %s "$deb") bytes)"

# --- what the package says and holds ----------------------------------------

rl_expect "the package is not named $package" test "$(dpkg-deb -f "$deb" Package)" = "$package"
deb_version=$(dpkg-deb -f "$deb" Version)
rl_expect "the package's version $deb_version is not $version-N (debian/changelog)" \
    test "${deb_version%-*}" = "$version"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
rl_expect "the package does not depend on postgresql-$major" \
    grep -qE "(^|, )postgresql-$major( |,|$)" <<<"$depends"

# Installable here: apt resolves its dependencies (a simulation: nothing is
# installed into the system).
simulate() {
    apt-get install --simulate -q "$deb" >"$work/simulate.log" 2>&1 || { cat "$work/simulate.log"; return 1; }
}
rl_expect "apt-get cannot install the package's dependencies" simulate

dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|' | grep -v '/$' >"$work/files"
pkglib=/usr/lib/postgresql/$major/lib
extdir=/usr/share/postgresql/$major/extension
# Every script: those of released versions, and the current version's,
# which the build makes (sql/ratelimit.sql, sql/update--*.sql).
scripts=$({ (cd sql && ls ratelimit--*.sql)
            printf 'ratelimit--%s.sql\n' "$version"
            for t in sql/update--*.sql; do [ ! -e "$t" ] || printf 'ratelimit--%s\n' "${t##*/update--}"; done
          } | sort -u)
for f in "$pkglib/ratelimit.so" "$extdir/ratelimit.control" \
         $(printf "$extdir/%s\n" $scripts); do
    rl_expect "the package does not hold $f" grep -qxF "$f" "$work/files"
done
# The README links into docs/: the pages go with it (dh_compress may gzip them).
for f in README.md $(cd "$work/ratelimit-$version" && find docs -name '*.md' | sort); do
    rl_expect "the package's documentation lacks $f" \
        grep -qx -e "/usr/share/doc/$package/$f" -e "/usr/share/doc/$package/$f.gz" "$work/files"
done
stray=$(grep -v -e "^$pkglib/" -e "^$extdir/" -e "^/usr/share/doc/$package/" "$work/files" || true)
rl_expect "the package holds files outside the extension's directories: $stray" test -z "$stray"

# --- installed into a clean tree, it works ------------------------------------

rl_private_tree
private_lib=$("$PG_CONFIG" --pkglibdir)
private_ext=$("$PG_CONFIG" --sharedir)/extension
# Whatever another "make install" left in the system's tree is not tested.
rm -f "$private_lib"/ratelimit.so "$private_ext"/ratelimit.control "$private_ext"/ratelimit--*.sql
dpkg-deb -x "$deb" "$work/root"
cp "$work/root$pkglib"/* "$private_lib/"
cp "$work/root$extdir"/* "$private_ext/"

cluster_start
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE ROLE app LOGIN" -c "CREATE DATABASE app OWNER app"

# Not trusted: the owner of a database who is not a superuser cannot create it.
refusal=$(psql -X -q -U app -d app -c "CREATE EXTENSION ratelimit" 2>&1 || true)
echo "as the database owner: $refusal"
rl_expect "CREATE EXTENSION by a database owner who is not a superuser was not refused" \
    grep -qF 'permission denied to create extension "ratelimit"' <<<"$refusal"

psql -X -q -v ON_ERROR_STOP=1 -d app \
    -c "CREATE EXTENSION ratelimit" \
    -c "SELECT rate_limit_define('api', 2, '1 minute')" >/dev/null
installed=$(psql -X -A -t -d app -c "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")
rl_expect "CREATE EXTENSION installed version '$installed', not $version" test "$installed" = "$version"
take="SELECT allowed FROM rate_limit_take('api', 'user:1')"
takes=$(psql -X -A -t -U app -d app -c "$take" -c "$take" -c "$take" | paste -sd, -)
echo "three takes of a limit of 2 by the application's role: $takes"
rl_expect "the takes were $takes, not t,t,f" test "$takes" = "t,t,f"

maps=$(psql -X -A -t -d app -c "LOAD 'ratelimit'" \
    -c "SELECT pg_read_file('/proc/' || pg_backend_pid() || '/maps')" | grep ratelimit || true)
rl_expect "the server did not load the library from $private_lib" \
    grep -qF "$private_lib/ratelimit.so" <<<"$maps"
rl_expect "the library in $private_lib is not the packaged one" \
    cmp -s "$work/root$pkglib/ratelimit.so" "$private_lib/ratelimit.so"

rl_verdict debian
