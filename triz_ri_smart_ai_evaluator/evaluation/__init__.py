"""The application layer above the ledger (issue 14 item 4): an attempt's life in the ledger:
open it under its pinned rules, record what was measured, compute the signal through the one
calculator, write the award, hold and settle escrow, and the rework credit of an instance."""
