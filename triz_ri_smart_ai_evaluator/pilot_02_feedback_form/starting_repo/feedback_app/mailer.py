"""Sending the feedback mail over SMTP. Not written yet: see TASK.md.

The SMTP server, the credentials and the two addresses come from ``config.SmtpSettings``.
"""

from __future__ import annotations

from typing import Final

SUBJECT: Final = "Feedback form submission"
