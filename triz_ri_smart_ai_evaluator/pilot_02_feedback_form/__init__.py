"""Pilot 02, the feedback form: can the evaluator tell a contact form that really delivers mail to a
trusted SMTP receiver from its proxies (a success page without sending, a false "sent" status, a
log line, partial fields, broken negative cases, tampering with the tests or the harness, or text
that instructs the evaluator)? The package holds the starting repository the candidate changes,
its public scenarios, the honest reference candidate and the adversarial ones, and the harness
that runs them against a fresh control set (see ``docs/pilot-02-contract.md``).
"""
