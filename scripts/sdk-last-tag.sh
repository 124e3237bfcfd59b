#!/usr/bin/env bash
# Prints the last sdk release tag (sdk/vX.Y.Z), by version, or nothing
# before the first. A prerelease (sdk/v0.2.0-rc.1) sorts before its
# release, as semver orders them.
set -euo pipefail
git -c versionsort.suffix=- tag --list 'sdk/v*' --sort=-v:refname 2>/dev/null | head -n 1
