#!/usr/bin/env bash
# Builds an example module (examples/adapter) as an outside author would:
# a copy in a temporary directory, GOWORK=off, no replace, the sdk fetched
# by its module path from a file GOPROXY (chained to the usual one) that
# serves this tree's sdk at a pseudo-version derived from its content.
#
#   scripts/example.sh build DIR        vet, staticcheck, test (-race) and build DIR's commands into bin/
#   scripts/example.sh tidy-check DIR   fail unless DIR's go.mod and go.sum are tidy
#   scripts/example.sh tidy DIR         tidy DIR's go.mod and go.sum in place
#
# The checked-in go.mod requires the sdk at a version of its own (the last
# release, or none before it) and go.sum holds no sdk line: the copy pins
# the served version and tidies, and the tidy modes compare or copy back
# everything else. TOOLBIN is where sdkproxy was built (make's .bin).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: $0 build|tidy-check|tidy DIR} ex=${2:?usage: $0 $mode DIR}
root=$PWD
sdkproxy=${TOOLBIN:-$root/.bin}/sdkproxy
staticcheck=${TOOLBIN:-$root/.bin}/staticcheck
sdk=github.com/vigilhq/vigil/sdk

if (cd "$ex" && go mod edit -json) | grep -q '"Replace": \['; then
	echo "$ex/go.mod has a replace: an outside author's module has none, and make example serves the sdk from a file GOPROXY" >&2
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The last sdk release, which the pseudo-version follows.
last=$(git tag --list 'sdk/v*' --sort=-v:refname | head -n 1)
version=$("$sdkproxy" -out "$tmp/proxy" -dir sdk ${last:+-after "${last#sdk/}"})
GOPROXY="file://$tmp/proxy,$(go env GOPROXY)"
# Only the local sdk skips the checksum database, which has never seen it.
nosumdb=$(go env GONOSUMDB)
GONOSUMDB="${nosumdb:+$nosumdb,}$sdk"
export GOWORK=off GOPROXY GONOSUMDB

cp -R "$ex" "$tmp/module"
cd "$tmp/module"
pinned=$(sed -n "s|^[[:space:]]*\(require[[:space:]]*\)\{0,1\}$sdk[[:space:]]\{1,\}\([^[:space:]]*\).*|\2|p" go.mod)
if [ -z "$pinned" ]; then
	echo "$ex/go.mod does not require $sdk" >&2
	exit 1
fi
go mod edit -require="$sdk@$version"
go mod tidy

# The copy's go.mod and go.sum as checked in: the sdk at the version the
# example names, and no sum of the served one.
checked_in() {
	go mod edit -require="$sdk@$pinned"
	grep -v "^$sdk " go.sum >go.sum.new || true
	mv go.sum.new go.sum
}

case $mode in
build)
	echo "example: $ex with $sdk@$version"
	go vet ./...
	"$staticcheck" ./...
	go test -race -count=1 ./...
	go build -o "$root/bin/" ./cmd/...
	;;
tidy-check)
	checked_in
	if ! diff -u "$root/$ex/go.mod" go.mod || ! diff -u "$root/$ex/go.sum" go.sum; then
		echo "not tidy: $ex: run make tidy and commit" >&2
		exit 1
	fi
	;;
tidy)
	checked_in
	cp go.mod go.sum "$root/$ex/"
	;;
*)
	echo "$0: unknown mode $mode: want build, tidy-check or tidy" >&2
	exit 2
	;;
esac
