"""Rendering of reports from ledger queries. Arrives with issue 6."""
