#!/usr/bin/env bash
# Lint the tree (issue 43.4), with the tools of the locked .venv (extra 'lint'):
#  1. ruff check .            (rules in pyproject.toml [tool.ruff])
#  2. mypy                    strict on the modules listed in pyproject.toml [tool.mypy] files
#  3. complexity              no function in dsv3_preflight/ checks/ launch/ reports/ with a cyclomatic
#                             complexity above 30 (radon cc: rank E and F are 31 and more)
#  4. file size               no .py source in those trees over 800 lines, except the pure data tables
#                             listed in DATA_TABLES below
#
#   bash scripts/lint.sh            every step; exit 1 when any step finds something (all steps run)
#   bash scripts/lint.sh --report   every step, print what it finds, exit 0 (the tree on its way under the gates)
set -uo pipefail
cd "$(dirname "$0")/.."

REPORT=0
if [ "${1:-}" = "--report" ]; then
  REPORT=1
  shift
fi
PY=${DSV3_LINT_PYTHON:-.venv/bin/python}
TREES=(dsv3_preflight checks launch reports)
MAX_COMPLEXITY=30   # radon rank E starts at 31
MAX_LINES=800
# pure data tables (one record a line, no logic) allowed past MAX_LINES: path relative to the repository
DATA_TABLES=()

failed=()
step() { printf '\n== %s\n' "$1"; }

step "ruff check ."
"$PY" -m ruff check . || failed+=(ruff)

step "mypy (strict: pyproject.toml [tool.mypy] files)"
"$PY" -m mypy || failed+=(mypy)

step "complexity: no function above $MAX_COMPLEXITY (radon cc -n E)"
complex=$("$PY" -m radon cc -n E -s "${TREES[@]}")
if [ -n "$complex" ]; then
  printf '%s\n' "$complex"
  failed+=(complexity)
else
  echo "none above $MAX_COMPLEXITY"
fi

step "file size: no .py source over $MAX_LINES lines (data tables: ${DATA_TABLES[*]:-none})"
long=()
while IFS= read -r file; do
  lines=$(wc -l <"$file")
  allowed=0
  for table in "${DATA_TABLES[@]}"; do
    [ "$file" = "$table" ] && allowed=1
  done
  if [ "$lines" -gt "$MAX_LINES" ] && [ "$allowed" -eq 0 ]; then
    long+=("$file: $lines lines")
  fi
done < <(find "${TREES[@]}" -name '*.py' -not -path '*/__pycache__/*' | sort)
if [ ${#long[@]} -gt 0 ]; then
  printf '%s\n' "${long[@]}"
  failed+=(size)
else
  echo "none over $MAX_LINES"
fi

echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "lint: clean"
  exit 0
fi
echo "lint: findings in ${failed[*]}"
if [ "$REPORT" -eq 1 ]; then
  echo "(--report: exit 0)"
  exit 0
fi
exit 1
