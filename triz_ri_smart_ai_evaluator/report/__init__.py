"""Reports read from the ledger: the static dashboard page (issue 16 item 6)."""
