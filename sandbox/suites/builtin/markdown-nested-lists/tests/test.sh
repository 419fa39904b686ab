#!/bin/bash
# The verdict is grade.py's: reward 1 only when every test named in tests.json reported "passed" (see grade.py for
# what that rules out). All in one block, read whole before it runs: nothing appended to this file later runs.
{
  mkdir -p /logs/verifier
  cd /app || exit 1
  # grade.py exits 0 once it wrote the verdict; if the tests killed it first, the verdict is 0 (bash builtins
  # only: code under test running as root could have replaced rm).
  python3 -I /tests/grade.py unittest || {
    echo 0 > /logs/verifier/reward.txt
    echo '{"reward": 0}' > /logs/verifier/reward.json
  }
  exit 0
}
