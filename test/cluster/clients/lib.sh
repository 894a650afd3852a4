# shellcheck shell=bash
# The client packages built and installed from the checkout as users install
# them, for test/cluster/clients.sh and test/cluster/app_examples.sh (source
# it after scripts/lib.sh, from the checkout's root):
#
#   npm_quiet DIR ARGS...      npm in DIR, its output shown only if it fails
#   clients_node_copy DIR      clients/node copied into DIR, npm ci there
#   clients_node_install DIR APP   npm pack in DIR, the tarball installed
#                              into APP (after npm ci there): a copy, no link
#   clients_python_venv DIR    a wheel of clients/python built offline and
#                              installed with pip --no-index into the venv
#                              DIR/venv over Debian's packages; sets CLIENTS_PY
#                              to its python

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
