#!/usr/bin/env bash
# The PGXN release: META.json follows the PGXN Meta Spec 1.0.0 and agrees
# with ratelimit.control, and "make dist" makes an archive that holds
# META.json, LICENSE, the control files and every file of sql/ and portable/
# (the released scripts and the sources of the current version's), and
# makes the current version's scripts from them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

work=$(mktemp -d /tmp/ratelimit-pgxn.XXXXXX)
rl_at_exit "rm -rf '$work'"

# --- META.json against the spec ---------------------------------------------

version=$(rl_version)
if perl - META.json "$version" <<'PERL'; then
use strict;
use warnings;
use JSON::PP;

my ($file, $control_version) = @ARGV;
my @errors;
sub err { push @errors, join('', @_) }

open(my $fh, '<:raw', $file) or die "$file: $!\n";
my $text = do { local $/; <$fh> };
my $meta = eval { JSON::PP->new->utf8->relaxed(0)->decode($text) };
if (!$meta) { print "FAILED: $file is not JSON: $@"; exit 1 }
ref $meta eq 'HASH' or do { print "FAILED: $file is not a JSON object\n"; exit 1 };

my $semver = qr/^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$/;
my $term = sub { my ($v) = @_; defined $v && !ref $v && length $v >= 2 && $v !~ m{[/\\\s[:cntrl:]]} };
my $string = sub { my ($v) = @_; defined $v && !ref $v && length $v >= 1 };
my %licenses = map { $_ => 1 } qw(agpl_3 apache_1_1 apache_2_0 artistic_1 artistic_2 bsd freebsd
    gfdl_1_2 gfdl_1_3 gpl_1 gpl_2 gpl_3 lgpl_2_1 lgpl_3_0 mit mozilla_1_0 mozilla_1_1 openssl
    perl_5 postgresql qpl_1_0 ssleay sun zlib open_source restricted unrestricted unknown);
my %known = map { $_ => 1 } qw(name abstract description version maintainer license provides
    prereqs resources release_status generated_by no_index tags meta-spec);

for my $key (qw(name abstract version maintainer license provides meta-spec)) {
    exists $meta->{$key} or err("missing mandatory field '$key'");
}
for my $key (sort keys %$meta) {
    $known{$key} or $key =~ /^[xX]_/ or err("unknown field '$key' (custom fields start with x_)");
}
$term->($meta->{name}) or err("name: at least two characters, no slash, backslash, space or control character");
$string->($meta->{abstract}) or err("abstract: a non-empty string");
!exists $meta->{description} || $string->($meta->{description}) or err("description: a non-empty string");
(defined $meta->{version} && $meta->{version} =~ $semver) or err("version: not a semantic version");
my $m = $meta->{maintainer};
(ref $m eq 'ARRAY' ? (@$m && !grep { !$string->($_) } @$m) : $string->($m))
    or err("maintainer: a string or a non-empty list of strings");
my $l = $meta->{license};
if (ref $l eq 'HASH') {
    (%$l && !grep { !$string->($l->{$_}) } keys %$l) or err("license: name => URL pairs");
} elsif (ref $l eq 'ARRAY') {
    (@$l && !grep { !$licenses{$_ // ''} } @$l) or err("license: unknown license in the list");
} else {
    $licenses{$l // ''} or err("license: '" . ($l // '') . "' is not a license the spec names");
}
my $p = $meta->{provides};
if (ref $p ne 'HASH' || !%$p) {
    err("provides: an object naming at least one extension");
} else {
    for my $ext (sort keys %$p) {
        $term->($ext) or err("provides: bad extension name '$ext'");
        my $e = $p->{$ext};
        ref $e eq 'HASH' or do { err("provides.$ext: an object"); next };
        for my $key (sort keys %$e) {
            $key =~ /^(file|version|abstract|docfile)$/ || $key =~ /^[xX]_/
                or err("provides.$ext: unknown field '$key'");
        }
        $string->($e->{file}) or err("provides.$ext.file is mandatory");
        (defined $e->{version} && $e->{version} =~ $semver) or err("provides.$ext.version: not a semantic version");
        for my $f (grep { defined } $e->{file}, $e->{docfile}) {
            -f $f or err("provides.$ext: no file '$f' in the distribution");
        }
        ($e->{version} // '') eq $control_version
            or err("provides.$ext.version is '" . ($e->{version} // '') . "', ratelimit.control says '$control_version'");
    }
}
($meta->{version} // '') eq $control_version
    or err("version is '" . ($meta->{version} // '') . "', ratelimit.control says '$control_version'");
my $ms = $meta->{'meta-spec'};
(ref $ms eq 'HASH' && ($ms->{version} // '') =~ /^1\.0\.\d+$/) or err("meta-spec: an object with version 1.0.x");
for my $key (qw(resources no_index)) {
    !exists $meta->{$key} || ref $meta->{$key} eq 'HASH' or err("$key: an object");
}
if (exists $meta->{prereqs}) {
    my $pr = $meta->{prereqs};
    if (ref $pr ne 'HASH') { err("prereqs: an object") }
    for my $phase (sort keys %{ ref $pr eq 'HASH' ? $pr : {} }) {
        $phase =~ /^(configure|build|runtime|test|develop)$/ or err("prereqs: unknown phase '$phase'");
        my $rels = $pr->{$phase};
        ref $rels eq 'HASH' or do { err("prereqs.$phase: an object"); next };
        for my $rel (sort keys %$rels) {
            $rel =~ /^(requires|recommends|suggests|conflicts)$/ or err("prereqs.$phase: unknown relationship '$rel'");
            my $reqs = $rels->{$rel};
            ref $reqs eq 'HASH' or do { err("prereqs.$phase.$rel: an object"); next };
            for my $name (sort keys %$reqs) {
                my $v = $reqs->{$name};
                (defined $v && !ref $v && ("$v" eq '0' || $v =~ /^\s*(?:(?:[<>]=?|==|!=)\s*)?\d+\.\d+\.\d+(?:\s*,\s*(?:[<>]=?|==|!=)\s*\d+\.\d+\.\d+)*\s*$/))
                    or err("prereqs.$phase.$rel.$name: not a version range");
            }
        }
    }
}
!exists $meta->{release_status} || ($meta->{release_status} // '') =~ /^(stable|testing|unstable)$/
    or err("release_status: stable, testing or unstable");
if (exists $meta->{tags}) {
    my $t = $meta->{tags};
    (ref $t eq 'ARRAY' && @$t && !grep { !$string->($_) || length $_ > 255 } @$t)
        or err("tags: a list of strings of 1 to 255 characters");
}
!exists $meta->{generated_by} || $string->($meta->{generated_by}) or err("generated_by: a string");

if (@errors) { print "FAILED: $file: $_\n" for @errors; exit 1 }
print "$file follows the PGXN Meta Spec $ms->{version}; version $control_version as in ratelimit.control\n";
PERL
    :
else
    RL_FAILURES=$((RL_FAILURES + 1))
fi

# --- the archive --------------------------------------------------------------

archive=$(rl_dist "$work" || true)
if [ -n "$archive" ] && [ -f "$archive" ]; then
    tar -tzf "$archive" >"$work/contents"
    for f in META.json LICENSE README.md Makefile ratelimit.control ratelimit_portable.control \
             $(git -C "$RL_ROOT" ls-files sql portable scripts/sql-script); do
        rl_check "$(grep -cxF "ratelimit-$version/$f" "$work/contents") == 1" \
            "the archive has no ratelimit-$version/$f"
    done
    rl_check "$(grep -cv "^ratelimit-$version/" "$work/contents") == 0" \
        "the archive holds files outside ratelimit-$version/"
    echo "$(wc -l <"$work/contents") entries in $(basename "$archive")"
    # The current version's scripts, which the build makes: made from the
    # archive alone.
    dir=$work/ratelimit-$version
    tar -xzf "$archive" -C "$work"
    built=("sql/ratelimit--$version.sql" "portable/ratelimit_portable--$version.sql")
    for t in "$dir"/sql/update--*.sql; do
        [ ! -e "$t" ] || built+=("sql/ratelimit--${t##*/update--}")
    done
    for t in "$dir"/portable/update--*.sql; do
        [ ! -e "$t" ] || built+=("portable/ratelimit_portable--${t##*/update--}")
    done
    if make -s -C "$dir" "${built[@]}" >"$work/make.log" 2>&1; then
        for f in "${built[@]}"; do
            rl_check "$(grep -c '^CREATE ' "$dir/$f" 2>/dev/null || echo 0) > 0" \
                "the archive's build made no $f"
        done
        printf 'ok: the archive makes %s\n' "${built[*]}"
    else
        cat "$work/make.log"
        rl_check "0" "the archive does not make ${built[*]}"
    fi
else
    rl_check "0" "make dist made no archive"
fi

rl_verdict pgxn
