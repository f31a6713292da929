#!/usr/bin/env bash
# Installs what CI needs beyond the Rust toolchain and Python, unless it is
# already there: Debian's Chromium and its WebDriver for the dashboard browser
# test (tests/api/dashboard_browser.rs), and iproute2 for the network
# namespace that .ci/schemathesis.sh fuzzes in.
set -euo pipefail
missing=()
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
[[ -x /usr/bin/chromedriver ]] || missing+=(chromium-driver)
command -v ip >/dev/null || missing+=(iproute2)
command -v unshare >/dev/null || missing+=(util-linux)
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [[ "$(id -u)" -ne 0 ]]; then
  SUDO="sudo"
fi
$SUDO apt-get update
$SUDO apt-get install -y "${missing[@]}"
