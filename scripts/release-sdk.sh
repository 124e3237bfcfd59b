#!/usr/bin/env bash
# make release-sdk VERSION=vX.Y.Z: releases the sdk from a clean tree, as
# docs/compatibility.md ("Releasing the sdk") tells.
#
#   1. refuses a VERSION that is not vX.Y.Z (or vX.Y.Z-pre), an existing
#      sdk/VERSION tag, or a tree with changes (untracked files included);
#   2. checks tidiness (make tidy-check), vigil.plugin.v1 against the
#      released image (make proto-breaking) and the sdk's Go API against
#      the last sdk/v* tag (scripts/sdk-api.sh VERSION);
#   3. re-cuts the released image of vigil.plugin.v1 and points the
#      example at the release, and commits them when they changed;
#   4. tags that commit sdk/VERSION (annotated), locally: pushing is yours.
#
# TOOLBIN comes from make.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-}
released=proto/vigil/plugin/v1/released.binpb
example=examples/adapter
refuse() {
	echo "release-sdk: $*" >&2
	exit 1
}

if ! [[ $version =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]]; then
	refuse "VERSION=$version: want a semantic version vX.Y.Z (or vX.Y.Z-pre for a prerelease), e.g. make release-sdk VERSION=v0.1.0"
fi
tag=sdk/$version
if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
	refuse "tag $tag exists: a released version is never cut again; pick the next one"
fi
if [ -n "$(git status --porcelain)" ]; then
	refuse "the tree has changes (git status): release from a clean checkout of what you mean to tag"
fi

make --no-print-directory tidy-check proto-breaking ${TOOLBIN:+TOOLBIN="$TOOLBIN"}
scripts/sdk-api.sh "$version"

"${TOOLBIN:-.bin}/buf" build --path proto/vigil/plugin/v1 --exclude-source-info -o "$released"
(cd "$example" && GOWORK=off go mod edit -require="github.com/vigilhq/vigil/sdk@$version")
git add -- "$released" "$example/go.mod"
if ! git diff --cached --quiet; then
	git commit -q -m "sdk: release $version: vigil.plugin.v1's released image re-cut, the example requires $version (make release-sdk)"
fi
git tag -a "$tag" -m "sdk $version"
echo "release-sdk: tagged $tag at $(git rev-parse --short HEAD); publish it with: git push origin $tag (and the commit, if make release-sdk made one)"
