#!/bin/sh
# Regenerates captures/<scene>-<version>.txt and .ansi — Neovim in a tmux
# pane against the real `octet lsp` and a scripted model (TestCapture in
# capture_test.go): a streamed answer with a table and code, an approval
# with its diff, a plan, a diagnostics-driven fix (with gopls) — for each
# Neovim named, and the copies of the text captures in README.md (each
# between "<!-- capture NAME -->" and "<!-- /capture -->"). Needs go, tmux,
# the Neovims and gopls (on PATH or in $(go env GOPATH)/bin).
#   editors/nvim/scripts/capture.sh [nvim ...]
# Default: the nvim on PATH and the newest of .ci/fetch-newer-nvim.sh.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
[ $# -gt 0 ] || set -- "$(command -v nvim)" /tmp/octet-ci-nvim/sid/nvim.sh
for nvim in "$@"; do
  OCTET_CAPTURE_DIR="$here/captures" OCTET_CAPTURE_NVIM="$nvim" go test -count=1 -run '^TestCapture$' . >/dev/null
done
awk -v dir="$here/captures" '
  /^<!-- capture [a-z0-9.-]+ -->$/ {
    print; print "```"
    f = dir "/" $3 ".txt"
    while ((getline l < f) > 0) print l
    close(f); print "```"; skip = 1; next
  }
  /^<!-- \/capture -->$/ { skip = 0 }
  !skip { print }' README.md > README.md.new
mv README.md.new README.md
echo "wrote captures/ and README.md's copies"
