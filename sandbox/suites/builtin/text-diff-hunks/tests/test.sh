#!/bin/bash
mkdir -p /logs/verifier
cd /app
if PYTHONPATH=/app python3 -m unittest discover -s /tests -t /tests -p 'test_*.py' -v > /logs/verifier/test_output.txt 2>&1; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
