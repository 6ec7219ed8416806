#!/bin/sh
# Regenerates doc/capture.txt and doc/capture.ansi: Neovim in a tmux pane
# with the octet chat and an edit approval float, captured with tmux
# capture-pane (see TestCapture in capture_test.go). Needs go, tmux and
# nvim; OCTET_CAPTURE_NVIM picks the Neovim binary (default: nvim on
# PATH).
#   editors/nvim/scripts/capture.sh
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OCTET_CAPTURE_DIR="$here/doc" go test -count=1 -run '^TestCapture$' -v . | tail -n 40
