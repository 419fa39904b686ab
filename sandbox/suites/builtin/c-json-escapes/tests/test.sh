#!/bin/bash
mkdir -p /logs/verifier
cd /app
LOG=/logs/verifier/test_output.txt
BIN=$(mktemp /tmp/hidden_tests.XXXXXX)
if gcc -std=c99 -Wall -I/app/src -o "$BIN" /tests/test_hidden.c /app/src/*.c > "$LOG" 2>&1 \
   && timeout 60 "$BIN" >> "$LOG" 2>&1; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
rm -f "$BIN"
