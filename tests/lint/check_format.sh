#!/usr/bin/env bash
# Every tracked C file obeys .clang-format, as Debian 12's clang-format 14
# formats it (the version .ci/install-deps.sh installs; another version may
# format differently, so it is pinned and refused otherwise).
#   tests/lint/check_format.sh [SOURCE_ROOT]      exit 0: formatted; 1: lists the files
set -uo pipefail
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cd "$root" || exit 2
cf=$(command -v clang-format-14 || true)
if [ -z "$cf" ]; then
    echo "check_format: clang-format-14 not found (apt-get install clang-format-14, or .ci/install-deps.sh)"
    exit 1
fi
if git rev-parse --git-dir >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files '*.c' '*.h')
else
    mapfile -t files < <(find . -name '*.[ch]' -not -path './build*' -not -path './.deps/*' -not -path '*/node_modules/*' | sed 's#^\./##')
fi
bad=0
for f in "${files[@]}"; do
    [ -f "$f" ] || continue
    if ! "$cf" --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
        echo "check_format: $f differs from .clang-format (fix: $cf -i $f)"
        bad=$((bad + 1))
    fi
done
echo "check_format: ${#files[@]} files, $bad not formatted"
[ "$bad" -eq 0 ]
