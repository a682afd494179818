#!/usr/bin/env bash
# Runs a checker on input that is broken on purpose and passes only when the
# checker rejects it: exit status 1 (not a crash, usage error or skip) and a
# line matching the expected message.
#   expect_failure.sh REGEX -- COMMAND [ARGS...]
set -uo pipefail
if [[ $# -lt 3 || "$2" != "--" ]]; then
  echo "usage: expect_failure.sh REGEX -- COMMAND [ARGS...]" >&2
  exit 2
fi
regex=$1
shift 2
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [[ $status -eq 77 ]]; then
  exit 77  # The checker could not run here: skip, do not pass.
fi
if [[ $status -ne 1 ]]; then
  echo "expect_failure: expected exit status 1, got $status" >&2
  exit 1
fi
if ! grep -Eq -- "$regex" <<<"$output"; then
  echo "expect_failure: no line matches '$regex'" >&2
  exit 1
fi
echo "expect_failure: rejected as expected"
