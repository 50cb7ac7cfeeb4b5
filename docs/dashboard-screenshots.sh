#!/usr/bin/env bash
# Regenerate docs/dashboard/*.png, the pictures in docs/dashboard.md: the browser acceptance test
# (tests/acceptance/test_dashboard.py) writes a screenshot of each page it visits.
set -euo pipefail
cd "$(dirname "$0")/.."
PSLURM_SCREENSHOTS=docs/dashboard .venv/bin/python -m pytest -q -p no:cacheprovider \
  tests/acceptance/test_dashboard.py -k browser
