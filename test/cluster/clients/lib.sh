# shellcheck shell=bash
# The client packages built and installed from the checkout as users install
# them, for test/cluster/clients.sh and test/cluster/app_examples.sh (source
# it after scripts/lib.sh, from the checkout's root):
#
#   clients_packages [PKG...]  the Debian packages these need (and PKG...),
#                              installed if missing; node and npm too
#   npm_quiet DIR ARGS...      npm in DIR, its output shown only if it fails
#   clients_node_copy DIR      clients/node copied into DIR, npm ci there
#   clients_node_install DIR APP   npm pack in DIR, the tarball installed
#                              into APP (after npm ci there): a copy, no link
#   clients_python_venv DIR    a wheel of clients/python built offline and
#                              installed with pip --no-index into the venv
#                              DIR/venv over Debian's packages; sets CLIENTS_PY
#                              to its python

clients_packages() {
    # Debian's python3 (/usr/bin/python3), the one its psycopg and FastAPI are for.
    rl_install_packages python3 python3-venv python3-pip python3-setuptools python3-wheel \
        python3-psycopg python3-psycopg-pool python3-fastapi python3-starlette python3-uvicorn curl "$@"
    command -v node >/dev/null && command -v npm >/dev/null || rl_install_packages nodejs npm
}

npm_quiet() {
    local dir=$1 log
    shift
    log=$(mktemp)
    if ! (cd "$dir" && npm --no-audit --no-fund --loglevel=error "$@") >"$log" 2>&1; then
        cat "$log"
        rm -f "$log"
        rl_die "npm $* failed in $dir"
    fi
    rm -f "$log"
}

clients_node_copy() {
    mkdir -p "$1"
    cp -r clients/node/package.json clients/node/package-lock.json clients/node/tsconfig.json \
        clients/node/tsconfig.build.json clients/node/README.md clients/node/src clients/node/test "$1/"
    npm_quiet "$1" ci
}

clients_node_install() {
    local pkg=$1 app=$2 tarball
    npm_quiet "$pkg" pack --pack-destination "$pkg"
    tarball=$(ls "$pkg"/pg-ratelimit-*.tgz)
    npm_quiet "$app" ci
    npm_quiet "$app" install --no-save "$tarball"
    rl_expect "pg-ratelimit is installed from its tarball, not linked" \
        test -f "$app/node_modules/pg-ratelimit/dist/index.d.ts" -a ! -L "$app/node_modules/pg-ratelimit"
}

clients_python_venv() {
    local dir=$1
    rm -rf "$dir/py-src"
    cp -r clients/python "$dir/py-src"
    /usr/bin/python3 -m pip wheel --no-deps --no-build-isolation --no-index -q -w "$dir/wheel" "$dir/py-src" \
        >"$dir/wheel.log" 2>&1 || { cat "$dir/wheel.log"; rl_die "the wheel of clients/python did not build"; }
    /usr/bin/python3 -m venv --system-site-packages "$dir/venv"
    "$dir/venv/bin/pip" install -q --no-index --no-deps "$dir"/wheel/pg_ratelimit-*.whl ||
        rl_die "the wheel of clients/python did not install"
    CLIENTS_PY=$dir/venv/bin/python
    rl_expect "pg_ratelimit is imported from the venv" \
        "$CLIENTS_PY" -c "import pg_ratelimit, sys; sys.exit(not pg_ratelimit.__file__.startswith('$dir/venv/'))"
}

# The apps under test, one at a time, and requests to them (they use $work):
#
#   app_start NAME CMD...      CMD in the background, its output in
#                              $work/NAME.log, where it must print "listening
#                              on http://127.0.0.1:PORT"; sets APP_PID, APP_PORT
#   app_stop                   stops it (registered to run at exit)
#   request METHOD PATH [CURL ARGS...]   prints
#                              "STATUS|RateLimit-Policy|RateLimit|Retry-After|BODY"
#   expect WHAT GOT WANTED     counts a failure unless GOT matches the extended
#                              regular expression WANTED, whole

APP_PID=
app_stop() {
    if [ -n "$APP_PID" ]; then
        kill "$APP_PID" 2>/dev/null || true
        wait "$APP_PID" 2>/dev/null || true
        APP_PID=
    fi
}
rl_at_exit app_stop

app_start() {
    local name=$1 tries=0
    shift
    : >"$work/$name.log"
    "$@" >"$work/$name.log" 2>&1 &
    APP_PID=$!
    APP_PORT=
    until [ -n "$APP_PORT" ]; do
        APP_PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$work/$name.log" || true)
        tries=$((tries + 1))
        if [ "$tries" -gt 200 ] || ! kill -0 "$APP_PID" 2>/dev/null; then
            cat "$work/$name.log"
            rl_die "$name did not start"
        fi
        [ -n "$APP_PORT" ] || sleep 0.1
    done
}

request() {
    local method=$1 path=$2 out
    shift 2
    out=$(mktemp "$work/reply.XXXXXX")
    curl -s --max-time 30 -o "$out.body" -D "$out" -X "$method" "$@" \
        "http://127.0.0.1:$APP_PORT$path" >/dev/null || true
    awk -F': ' -v body="$(head -c 200 "$out.body" 2>/dev/null | tr -d '\n')" '
        NR == 1 { split($0, s, " "); status = s[2] }
        { sub(/\r$/, "", $2); h[tolower($1)] = $2 }
        END { printf "%s|%s|%s|%s|%s\n", status, h["ratelimit-policy"], h["ratelimit"], h["retry-after"], body }
    ' "$out"
    rm -f "$out" "$out.body"
}

expect() {
    printf '%-64s %s\n' "$1" "$2"
    rl_expect "$1: got '$2', expected /$3/" grep -qxE -- "$3" <<<"$2"
}
