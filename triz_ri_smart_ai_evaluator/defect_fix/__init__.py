"""Task class ``defect_fix_delayed_confirmation``, executable (issue 14 item 2).

A production defect (DFX-1: the bulk discount is missing on a tier boundary) in a small quote
service; the candidate is a unified diff against the bundled starting repository.  The harness
(:mod:`.harness`, registered as this class's ``HARNESS``) runs the hidden reproduction drawn
from the run's seed, the supplied regression suite, a latency probe indistinguishable from
ordinary traffic (spec 9.7), and the checklist; ``recurrence_free`` is the late indicator,
settled through escrow (spec 2.15, 9.17, 10.6).
"""
