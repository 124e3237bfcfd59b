#!/usr/bin/env bash
# Checks the sdk's Go API with gorelease against the last sdk/v* tag: a
# change that breaks an author's code fails, whatever gorelease allows a v0
# module (the sdk is compatible across releases from sdk/v0.1.0 on).
#
#   scripts/sdk-api.sh            the tree against the last tag; a note, and success, before the first
#   scripts/sdk-api.sh VERSION    also whether VERSION may be released (make release-sdk)
#
# The base is served from a file GOPROXY written from the tag (the go
# command fetches it as from the module proxy), and gorelease reads a copy
# of the sdk outside git, as it refuses a repository with uncommitted
# changes. TOOLBIN is where gorelease and sdkproxy were built.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-}
toolbin=${TOOLBIN:-$PWD/.bin}
sdk=github.com/vigilhq/vigil/sdk
last=$(scripts/sdk-last-tag.sh)
if [ -z "$last" ] && [ -z "$version" ]; then
	echo "sdk-api: no sdk/v* tag yet, so no released API to hold the sdk to: nothing checked (gorelease runs from the first release on)"
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/proxy"
base=none
if [ -n "$last" ]; then
	base=${last#sdk/}
	"$toolbin/sdkproxy" -out "$tmp/proxy" -repo . -tag "$last" >/dev/null
	# The go command takes a version from its module cache before any
	# proxy, and no checksum database knows the sdk: a copy cached from an
	# earlier tag of the same name (a test tag deleted and cut again) would
	# stand in for this tag's content. Drop it; the file proxy serves it.
	# The build cache's index of that copy's packages (keyed by its path,
	# taken as immutable) would outlive it: goindex=0 reads the files.
	cache=$(go env GOMODCACHE)
	chmod -R u+w "$cache/$sdk@$base" 2>/dev/null || true
	rm -rf "$cache/$sdk@$base" "$cache/cache/download/$sdk/@v/$base".*
	export GODEBUG="${GODEBUG:+$GODEBUG,}goindex=0"
fi
nosumdb=$(go env GONOSUMDB)
GOPROXY="file://$tmp/proxy,$(go env GOPROXY)" GONOSUMDB="${nosumdb:+$nosumdb,}$sdk"
export GOWORK=off GOPROXY GONOSUMDB
cp -R sdk "$tmp/sdk"
cd "$tmp/sdk"

echo "sdk-api: gorelease -base=$base${version:+ -version=$version}${last:+ ($last)}"
status=0
report=$("$toolbin/gorelease" -base="$base" ${version:+-version="$version"}) || status=$?
echo "$report"
if [ "$status" -ne 0 ]; then
	exit "$status"
fi
if grep -q '^## incompatible changes' <<<"$report"; then
	echo "sdk-api: the sdk's Go API breaks $last's (above): the sdk is compatible across releases; add, do not change or remove" >&2
	exit 1
fi
