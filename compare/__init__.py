"""Run specs, the Leaf episode loop, the runner, the ledger, statistics and the CLI."""
