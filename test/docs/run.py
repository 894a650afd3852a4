#!/usr/bin/env python3
"""test/docs/run.py: the documentation's SQL blocks and links, checked.

    run.py [--links-only] [FILE.md ...]

Without FILEs it checks README.md and every docs/**/*.md of the checkout
(docs/recipes/ included), in that order.  For each file:

- Links.  Every relative link ([text](path), [text](path#anchor),
  [text](#anchor), and reference definitions "[x]: path") must name a file
  or directory that exists, and its #anchor a heading of the target
  Markdown file by GitHub's rules (lower case; every character that is not a
  letter, a digit, a space, "-" or "_" removed; spaces become "-"; a repeated
  heading gets "-1", "-2", ...) or an <a id="..."> / <a name="..."> in it.
  Links inside code (fenced blocks, `inline`) are not links.

- SQL.  Every ```sql block runs, in file order, on the cluster that PGHOST
  and PGPORT name (test/cluster/docs.sh starts it).  A comment on the line
  before a block (blank lines between allowed) chooses how:

      <!-- docs-test: portable -->        on the portable limiter
      <!-- docs-test: memory -->          every policy in the memory engine
      <!-- docs-test: native -->          the extension (the default)
      <!-- docs-test: error 42501 -->     the block must raise this SQLSTATE
      <!-- docs-test: portable, error 0A000 -->   both
      <!-- docs-test: skip: <reason> -->  not run (the reason is required)

  Each file has, per way, a fresh database of its own and one psql session
  for all its blocks of that way, so a block sees what the blocks before it
  did (policies, SET ratelimit.fixed_clock, an open transaction).  The
  limiter is installed before the first block: the extension ratelimit
  (native; unless a block of the file creates it itself: CREATE EXTENSION
  ratelimit), the same with a trigger that stores every policy it can with
  storage 'memory' (memory), or the psql script portable/ratelimit.sql into
  the schema "limits", on the database's search_path (portable).
  An unmarked block must raise no error; an "error" block must raise the
  SQLSTATE given as its first error (a later 25P02, the aborted transaction
  it leaves, is allowed).  Output is not compared: blocks whose output
  matters are written with ratelimit.fixed_clock and checked in
  test/sql/contract/examples.sql.  Roles a file creates are dropped, with
  its databases, when the file is done, so every file starts afresh.

Prints one line per failure and a summary; exits 1 if anything failed.
"""

import bisect
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MARKER = re.compile(r'^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$')
FENCE = re.compile(r'^(\s*)(`{3,}|~{3,})\s*([^`\s]*)[^`]*$')
HEADING = re.compile(r'^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$')
HTML_ANCHOR = re.compile(r'<a\s+(?:[^>]*\s)?(?:id|name)\s*=\s*"([^"]+)"', re.I)
INLINE_LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)')
REF_DEF = re.compile(r'^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$')
CODE_SPAN = re.compile(r'(`+)(.+?)\1')
CREATES_EXTENSION = re.compile(r'\bCREATE\s+EXTENSION\s+(IF\s+NOT\s+EXISTS\s+)?"?ratelimit"?(\s|;|$)', re.I)
ERROR_LINE = re.compile(r'^(?:psql:[^\n]*?:\d+: )?(ERROR|FATAL|PANIC):  ([0-9A-Z]{5}): (.*)$')
PSQL_ERROR = re.compile(r'^psql:[^\n]*?:\d+: error: (.*)$')

failures = []


def fail(where, message):
    failures.append(f'{where}: {message}')
    print(f'FAILED: {where}: {message}', flush=True)


# --- Markdown -------------------------------------------------------------

def parse(path):
    """Blocks of a Markdown file: a list of (kind, ...) and the prose lines.

    Returns (blocks, prose) where blocks is a list of dicts for fenced code
    (line, lang, text, marker) and prose a list of (line number, text) of the
    lines outside fenced code."""
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')
    blocks, prose = [], []
    marker = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = FENCE.match(line)
        if m:
            fence, lang = m.group(2), m.group(3).lower()
            start = i
            body = []
            i += 1
            while i < len(lines) and not re.match(r'^\s*' + re.escape(fence[0]) + '{' + str(len(fence)) + r',}\s*$', lines[i]):
                body.append(lines[i])
                i += 1
            blocks.append({'line': start + 1, 'lang': lang, 'text': '\n'.join(body), 'marker': marker})
            marker = None
            i += 1
            continue
        mm = MARKER.match(line)
        if mm:
            marker = (i + 1, mm.group(1))
        elif line.strip():
            marker = None
        prose.append((i + 1, line))
        i += 1
    return blocks, prose


def github_slug(text):
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', text)      # links: their text
    text = re.sub(r'<[^>]+>', '', text)                         # inline HTML
    text = text.strip().lower()
    return ''.join(c for c in text if c.isalnum() or c in ' -_').replace(' ', '-')


anchor_cache = {}


def anchors(path):
    if path not in anchor_cache:
        _, prose = parse(path)
        seen, found = {}, set()
        for _, line in prose:
            for a in HTML_ANCHOR.findall(line):
                found.add(a)
            m = HEADING.match(line)
            if not m:
                continue
            slug = github_slug(m.group(2))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else f'{slug}-{n}')
        anchor_cache[path] = found
    return anchor_cache[path]


def check_links(path):
    _, prose = parse(path)
    rel = os.path.relpath(path, ROOT)
    # The prose as one text (a link's text may span lines), code spans blanked
    # out with their length kept, and where each line starts.
    starts, offset = [], 0
    for _, line in prose:
        starts.append(offset)
        offset += len(line) + 1
    text = CODE_SPAN.sub(lambda m: ' ' * len(m.group(0)), '\n'.join(line for _, line in prose))
    found = [(m.start(), m.group(1)) for m in INLINE_LINK.finditer(text)]
    for n, (_, line) in enumerate(prose):
        m = REF_DEF.match(text[starts[n]:starts[n] + len(line)])
        if m:
            found.append((starts[n], m.group(1)))
    count = 0
    for at, target in sorted(found):
        if not target or re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I):
            continue                                        # http:, mailto:, ...
        count += 1
        where = f'{rel}:{prose[bisect.bisect_right(starts, at) - 1][0]}'
        file_part, _, anchor = target.partition('#')
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.exists(dest):
            fail(where, f'link to {target}: {os.path.relpath(dest, ROOT)} does not exist')
            continue
        if anchor:
            if not dest.endswith('.md') or os.path.isdir(dest):
                fail(where, f'link to {target}: an anchor into a file that is not Markdown')
            elif anchor not in anchors(dest):
                fail(where, f'link to {target}: no heading of {os.path.relpath(dest, ROOT)} has the anchor #{anchor}')
    return count


# --- SQL ------------------------------------------------------------------

def marker_of(block, where):
    """(way, sqlstate, skip reason) of a block, from its marker."""
    way, state, skip = 'native', None, None
    if not block['marker']:
        return way, state, skip
    text = block['marker'][1]
    m = re.search(r'(?:^|,)\s*skip:\s*(\S.*)$', text)
    if m:
        return way, state, m.group(1).strip()
    for item in [s.strip() for s in text.split(',')]:
        if item in ('native', 'portable', 'memory'):
            way = item
        elif re.fullmatch(r'error [0-9A-Z]{5}', item):
            state = item.split()[1]
        else:
            fail(where, f'unknown docs-test marker item "{item}"')
            skip = 'bad marker'
    return way, state, skip


def psql(*args, db='postgres', stdin=None):
    return subprocess.run(['psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', db, *args],
                          input=stdin, capture_output=True, text=True)


def must(result, what):
    if result.returncode != 0:
        raise SystemExit(f'error: {what} failed:\n{result.stdout}{result.stderr}')
    return result.stdout


def setup(db, way, creates_extension):
    must(psql('-c', f'CREATE DATABASE "{db}"'), f'creating database {db}')
    if way == 'portable':
        must(psql('-c', 'CREATE SCHEMA limits', '-c', 'SET search_path = limits',
                  '-f', os.path.join(ROOT, 'portable', 'ratelimit.sql'), db=db), 'installing the portable limiter')
        must(psql('-c', f'ALTER DATABASE "{db}" SET search_path = limits, public'), 'setting search_path')
    elif way == 'memory':
        must(psql('-c', 'CREATE EXTENSION ratelimit', db=db), 'CREATE EXTENSION ratelimit')
        must(psql(db=db, stdin='''
CREATE SCHEMA docs_test;
CREATE FUNCTION docs_test.to_memory() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.shards = 1 THEN NEW.storage := 'memory'; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER to_memory BEFORE INSERT OR UPDATE ON ratelimit.policies
    FOR EACH ROW EXECUTE FUNCTION docs_test.to_memory();
'''), 'the memory trigger')
    elif not creates_extension:
        must(psql('-c', 'CREATE EXTENSION ratelimit', db=db), 'CREATE EXTENSION ratelimit')


def run_way(rel, db, way, blocks):
    """Runs the blocks [(where, block, sqlstate)] in one psql session; returns how many passed."""
    with tempfile.NamedTemporaryFile('w', suffix='.sql', delete=False) as f:
        for n, (where, block, _) in enumerate(blocks):
            f.write(f"\\warn '@@docs-test begin {n}'\n{block['text']}\n;\n\\warn '@@docs-test end {n}'\n")
        script = f.name
    try:
        r = subprocess.run(['psql', '-X', '-q', '-v', 'ON_ERROR_STOP=0', '-v', 'VERBOSITY=verbose',
                            '-v', 'SHOW_CONTEXT=never', '-d', db, '-f', script],
                           capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(script)
    errors = {n: [] for n in range(len(blocks))}
    ended = set()
    current = None
    for line in r.stderr.split('\n'):
        m = re.search(r'@@docs-test (begin|end) (\d+)$', line)
        if m:
            current = int(m.group(2)) if m.group(1) == 'begin' else None
            if m.group(1) == 'end':
                ended.add(int(m.group(2)))
            continue
        m = ERROR_LINE.match(line)
        e = (m.group(2), f'{m.group(1)} {m.group(2)}: {m.group(3)}') if m else None
        if not e:
            m = PSQL_ERROR.match(line)
            e = ('psql', f'psql: {m.group(1)}') if m else None
        if e:
            errors.setdefault(current, []).append(e)
    passed = 0
    for n, (where, block, state) in enumerate(blocks):
        got = errors[n]
        if n not in ended:
            fail(where, f'{way}: the session ended before the block did: {r.stderr.strip()[-400:]}')
        elif state is None and got:
            fail(where, f'{way}: ' + '; '.join(msg for _, msg in got))
        elif state is not None and not got:
            fail(where, f'{way}: expected an error {state}, got none')
        elif state is not None and (got[0][0] != state or any(s != '25P02' for s, _ in got[1:])):
            fail(where, f'{way}: expected an error {state}, got ' + '; '.join(msg for _, msg in got))
        else:
            passed += 1
            print(f'ok: {where}: {way}' + (f', error {state}' if state else ''))
    for msg in errors.get(None, []):
        fail(rel, f'{way}: an error outside any block: {msg[1]}')
    return passed


def roles():
    return set(must(psql('-c', 'SELECT rolname FROM pg_roles'), 'listing roles').split())


def run_file(path, index):
    rel = os.path.relpath(path, ROOT)
    blocks, _ = parse(path)
    ways = {}
    skipped = 0
    for b in blocks:
        if b['lang'] != 'sql':
            if b['marker']:
                fail(f'{rel}:{b["line"]}', 'a docs-test marker before a block that is not ```sql')
            continue
        where = f'{rel}:{b["line"]}'
        way, state, skip = marker_of(b, where)
        if skip is not None:
            skipped += 1
            print(f'skipped: {where}: {skip}')
            continue
        ways.setdefault(way, []).append((where, b, state))
    before = roles()
    passed = 0
    dbs = []
    for way, wblocks in ways.items():
        db = f'docs_{index}_{way}'
        dbs.append(db)
        creates = any(CREATES_EXTENSION.search(b['text']) for _, b, _ in wblocks)
        setup(db, way, creates)
        passed += run_way(rel, db, way, wblocks)
    for db in dbs:
        must(psql('-c', f'DROP DATABASE "{db}" WITH (FORCE)'), f'dropping {db}')
    for role in sorted(roles() - before):
        must(psql('-c', f'DROP OWNED BY "{role}"', '-c', f'DROP ROLE "{role}"'), f'dropping role {role}')
    return passed, skipped


def main(argv):
    links_only = '--links-only' in argv
    files = [os.path.abspath(a) for a in argv if a != '--links-only']
    if not files:
        files = [os.path.join(ROOT, 'README.md')]
        for d, subdirs, names in os.walk(os.path.join(ROOT, 'docs')):
            subdirs.sort()
            files += [os.path.join(d, n) for n in sorted(names) if n.endswith('.md')]
    links = passed = skipped = 0
    for i, path in enumerate(files):
        links += check_links(path)
        if not links_only:
            p, s = run_file(path, i)
            passed += p
            skipped += s
    print(f'{len(files)} files, {links} relative links checked, {passed} SQL blocks ran as marked, '
          f'{skipped} skipped, {len(failures)} failures')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
