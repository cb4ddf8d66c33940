#!/usr/bin/env bash
# Does cmrcx install from the public package index alone, on every supported Python?
#
# For each interpreter (default: python3.11 python3.12 python3.13, those found), a new
# venv resolves, without downloading the packages' contents (pip --dry-run), what
# `make demo` installs (the core) and what `make test` installs (the test extra), plus the
# accelerator extras, all under constraints.txt. pip runs with no configuration file, no
# PIP_* variables and no local wheel folder (PIP_CONFIG_FILE=/dev/null, --isolated), as on
# a researcher's machine. It needs the network (the package index) and takes minutes.
#
#   bash tools/check_public_install.sh [PYTHON ...]
#   EXTRAS="test cuda" bash tools/check_public_install.sh python3.12
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
pythons=("$@")
[ ${#pythons[@]} -gt 0 ] || pythons=(python3.11 python3.12 python3.13)
extras=${EXTRAS:-"core test cuda cuda13 tpu"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for python in "${pythons[@]}"; do
  if ! "$python" -c "" 2>/dev/null; then
    echo "$python: not found here, skipped"
    continue
  fi
  version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  "$python" -m venv "$work/venv$version"
  pip=("$work/venv$version/bin/python" -m pip)
  PIP_CONFIG_FILE=/dev/null "${pip[@]}" install --isolated --quiet --upgrade pip
  for extra in $extras; do
    target="$root"
    [ "$extra" = core ] || target="$root[$extra]"
    report="$work/report-$version-$extra.json"
    if (cd "$work" && PIP_CONFIG_FILE=/dev/null "${pip[@]}" install --isolated --dry-run \
        --ignore-installed --quiet --report "$report" -c "$root/constraints.txt" \
        -e "$target" >"$work/log" 2>&1); then
      summary=$("$work/venv$version/bin/python" - "$report" <<'EOF'
import json
import sys

with open(sys.argv[1]) as f:
    install = json.load(f)["install"]
names = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in install}
local = sorted(
    item["download_info"]["url"]
    for item in install
    if not item["download_info"]["url"].startswith("https://files.pythonhosted.org/")
    and item["metadata"]["name"].lower() != "cmrcx"
)
print(f"{len(install)} packages, jax {names.get('jax')}, torch {names.get('torch', '-')}")
if local:
    print("NOT FROM THE PUBLIC INDEX: " + ", ".join(local))
    sys.exit(1)
EOF
      ) || status=1
      echo "Python $version $extra: resolves ($summary)"
    else
      status=1
      echo "Python $version $extra: FAILS"
      grep -v '^\[notice\]' "$work/log" | tail -n 5 | sed 's/^/    /'
    fi
  done
done
exit $status
