#!/usr/bin/env bash
# CI's check of `make release-sdk`: in a scratch clone of this repository
# (HEAD with the tracked files' uncommitted changes), it releases a test
# version after the last sdk/v* tag and checks that the annotated tag
# exists at HEAD and the tree is clean; and that a bad VERSION, a dirty
# tree and an existing tag are refused. Nothing leaves the clone. TOOLBIN
# is where make built the tools, which the clone's make uses.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
toolbin=${TOOLBIN:-$root/.bin}
fail() {
	echo "release-check: $*" >&2
	exit 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rev=$(git stash create)
git clone -q --shared --no-checkout "$root" "$tmp/repo"
cd "$tmp/repo"
git checkout -q --detach "${rev:-HEAD}"
git config user.name "release check"
git config user.email "release-check@localhost"
# The tools were built from these sources (make built them before this):
# dated older than the tools, the clone's make uses them as they are.
git ls-files -z tools | xargs -0 touch -d @0

# The next patch after the last tag, as a prerelease; v0.1.0-ci before any.
last=$(scripts/sdk-last-tag.sh)
base=${last#sdk/}
base=${base%%-*}
IFS=. read -r major minor patch <<<"${base#v}"
version=v0.1.0-ci
if [ -n "$last" ]; then
	version=v$major.$minor.$((patch + 1))-ci
fi

# release runs make release-sdk in the clone, its output in $tmp/out.
release() {
	make --no-print-directory release-sdk TOOLBIN="$toolbin" "$@" >"$tmp/out" 2>&1
}
refused() { # want, VERSION
	if release VERSION="$2"; then
		cat "$tmp/out"
		fail "make release-sdk VERSION=$2 succeeded, want it refused ($1)"
	fi
	grep -q "$1" "$tmp/out" || { cat "$tmp/out"; fail "VERSION=$2: want a refusal saying \"$1\""; }
}

refused "want a semantic version vX.Y.Z" 1.2.3
echo "scratch" >>README.md
refused "the tree has changes" "$version"
git checkout -q -- README.md

release VERSION="$version" || { cat "$tmp/out"; fail "make release-sdk VERSION=$version failed"; }
tag=sdk/$version
[ "$(git cat-file -t "$tag")" = tag ] || fail "$tag is not an annotated tag"
[ "$(git rev-parse "$tag^{commit}")" = "$(git rev-parse HEAD)" ] || fail "$tag is not at HEAD"
[ -z "$(git status --porcelain)" ] || { git status --short; fail "the tree has changes after the release"; }
refused "tag $tag exists" "$version"
echo "release-check: make release-sdk VERSION=$version tagged $tag in a scratch clone (after ${last:-no tag}); refusals hold"
