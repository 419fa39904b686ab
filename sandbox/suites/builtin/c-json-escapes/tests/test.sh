#!/bin/bash
# The verdict is grade.py's: reward 1 only when every test named in tests.json reported "passed" (test_hidden.c
# reports to grade.py's fd; see grade.py for what that rules out). All in one block, read whole before it runs:
# nothing appended to this file later runs.
{
  mkdir -p /logs/verifier
  cd /app || exit 1
  BIN=$(mktemp -d)/hidden_tests
  # -iquote: the code under test's headers answer #include "minijson.h", never <stdio.h>.
  gcc -std=c99 -Wall -iquote /app/src -o "$BIN" /tests/test_hidden.c /app/src/*.c \
    > /logs/verifier/test_output.txt 2>&1
  # grade.py exits 0 once it wrote the verdict; if the tests killed it first, the verdict is 0 (bash builtins
  # only: code under test running as root could have replaced rm).
  python3 -I /tests/grade.py run "$BIN" || {
    echo 0 > /logs/verifier/reward.txt
    echo '{"reward": 0}' > /logs/verifier/reward.json
  }
  exit 0
}
