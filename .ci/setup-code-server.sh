#!/bin/sh
# A real VS Code (code-server 4.139.1 = Code 1.139.1) in a real browser
# (Debian chromium via puppeteer-core), all from Debian and npm packages.
# Verified 2026-12-01: install ~10 min on 2 cores, 617 MB; the workbench
# loads headless and screenshots (editors/vscode/e2e_test.go drives it).
#   DIR=<install folder> ./setup-code-server.sh
set -eu
dir=${DIR:?set DIR to the folder to install into}
mkdir -p "$dir/node24" "$dir/app"
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential pkg-config \
  libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev chromium >/dev/null
# code-server refuses Node 20; the npm package `node` ships Node binaries.
(cd "$dir/node24" && npm install --no-audit --no-fund node@24 >/dev/null)
export PATH="$dir/node24/node_modules/node/bin:$PATH"
node --version
(cd "$dir/app" && npm install --no-audit --no-fund code-server@4.139.1 puppeteer-core@25.16.0 >/dev/null)
"$dir/app/node_modules/.bin/code-server" --version
# Run:  PATH=$dir/node24/node_modules/node/bin:$PATH $dir/app/node_modules/.bin/code-server \
#         --auth none --bind-addr 127.0.0.1:18080 --disable-telemetry \
#         --user-data-dir U --extensions-dir E --install-extension x.vsix   (then start without it) WORKSPACE
# Drive: puppeteer.launch({executablePath:'/usr/bin/chromium', args:['--no-sandbox']}),
#        goto http://127.0.0.1:18080/?folder=WORKSPACE, wait for .monaco-workbench.
