"""Red-team campaigns with budgets (spec 9.12-9.14, 11.23; pilot 11-12; output 12.13).

A campaign runs adversarial candidates of one task class through the generic runner under a
declared budget, classifies each as caught or as an exploit, stops on the pilot's stopping
conditions, and records a signed report and an ``audit.report`` event in the class's loop
subject.  :mod:`.budget` reads the budget file, :mod:`.adversaries` gathers the candidates
(bundled, user-supplied, generated), :mod:`.engine` runs the campaign and :mod:`.report` writes
what it found.
"""
