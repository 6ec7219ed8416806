#!/bin/sh
# Regenerates captures/approval-0.7.txt and .ansi — Neovim in a tmux pane
# with the octet chat and an edit approval float, captured with tmux
# capture-pane (TestCapture in capture_test.go, against the real
# `octet lsp` and a scripted model) — and the copy of the text capture in
# README.md. Needs go, tmux and nvim; OCTET_CAPTURE_NVIM picks the Neovim
# binary (default: nvim on PATH).
#   editors/nvim/scripts/capture.sh
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OCTET_CAPTURE_DIR="$here/captures" go test -count=1 -run '^TestCapture$' . >/dev/null
awk -v cap="$here/captures/approval-0.7.txt" '
  /^<!-- capture -->$/ { print; print "```"; while ((getline l < cap) > 0) print l; print "```"; skip = 1; next }
  /^<!-- \/capture -->$/ { skip = 0 }
  !skip { print }' README.md > README.md.new
mv README.md.new README.md
echo "wrote captures/approval-0.7.txt, .ansi and README.md's copy"
