#!/usr/bin/env bash
# Rewrite constraints.txt, the tested lock: every package of an environment installed exactly as
# .ci/run installs it, resolved anew inside setup.py's ranges (the old lock is not consulted).
# Before committing the new lock, run the whole suite on it from a fresh clone: `bash .ci/run`.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Build-time pins: they stay in the lock as they are (see the lock's header).
build_pins="$work/build_pins.txt"
printf 'setuptools_scm<9\n' > "$build_pins"
python3 -m venv "$work/venv"
PIP_CONSTRAINT="$build_pins" "$work/venv/bin/pip" install -q -e ".[test]"
"$work/venv/bin/pip" install -q --no-deps tf-models-official==2.20.0
{
  cat <<'HEADER'
# The tested lock: every package of the CI environment, pinned to the version CI ran (README's
# commands and .ci/run pass this file as PIP_CONSTRAINT). Regenerate with tools/refresh_lock.sh,
# then run `bash .ci/run` from a fresh clone before committing (BUILD.md, "Dependencies").
# torch is the CPU build (+cpu): pip finds it on PyTorch's CPU index,
# --extra-index-url https://download.pytorch.org/whl/cpu (or a local wheel folder).
# Build-time: seqeval 1.2.2 ships only a source archive whose setup_requires fetches the newest
# setuptools_scm without its dependencies; setuptools_scm 9+ then fails to import (no vcs_versioning).
setuptools_scm<9
HEADER
  "$work/venv/bin/pip" freeze --exclude-editable
} > constraints.txt.new
mv constraints.txt.new constraints.txt
echo "Wrote constraints.txt ($(grep -c '==' constraints.txt) pins); now run: bash .ci/run (fresh clone)"
