#!/bin/bash
mkdir -p /logs/verifier
cd /app
if timeout 60 node --test /tests/caret_zero.test.js > /logs/verifier/test_output.txt 2>&1; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
