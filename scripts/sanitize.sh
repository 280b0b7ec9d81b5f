#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer (leak checks included) over the unit test suites, in
# build-asan/. Not part of .ci/run: the instrumented build alone takes longer than CI's time budget
# leaves on 2 cores. The end-to-end suites (train, quick, analyses) run only in the release build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh >/dev/null
[ -d build-asan ] || meson setup build-asan -Db_sanitize=address,undefined -Dbuildtype=debugoptimized -Dcuda=disabled
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
meson test -C build-asan --print-errorlogs --no-suite train --no-suite quick --no-suite analyses
