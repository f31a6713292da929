#!/usr/bin/env bash
# Installs Debian's Chromium and its WebDriver for the dashboard browser test
# (tests/api/dashboard_browser.rs), unless they are already there.
set -euo pipefail
if [[ -x /usr/bin/chromedriver && -x /usr/bin/chromium ]]; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [[ "$(id -u)" -ne 0 ]]; then
  SUDO="sudo"
fi
$SUDO apt-get update
$SUDO apt-get install -y chromium chromium-driver
