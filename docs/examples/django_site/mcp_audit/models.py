"""One row per use of an MCP tool, prompt or resource: zemcp's audit records, stored."""

from django.db import models

import zemcp
from zemcp.django import recycled_connections


class ToolCall(models.Model):
    started = models.DateTimeField(db_index=True)
    duration = models.FloatField(help_text="seconds")
    method = models.CharField(max_length=32)
    tool = models.CharField(max_length=200, blank=True)
    arguments = models.JSONField(default=list, help_text="the argument names")
    outcome = models.CharField(max_length=20, db_index=True)
    reason = models.CharField(max_length=100, blank=True)
    user = models.CharField(max_length=150, blank=True, db_index=True)
    client = models.CharField(max_length=300, blank=True)
    protocol_version = models.CharField(max_length=20, blank=True)
    task_id = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ("-started",)

    def __str__(self) -> str:
        return f"{self.method} {self.tool} by {self.user or 'anonymous'}: {self.outcome}"

    @classmethod
    def store(cls, record: zemcp.AuditRecord) -> None:
        """zemcp's audit hook: one row per record."""
        # The hook runs on a thread of zemcp's, outside Django's request cycle: its connection
        # is recycled as the cycle would (CONN_MAX_AGE decides whether it stays open).
        with recycled_connections():
            cls.objects.create(
                started=record.started,
                duration=record.duration,
                method=record.method,
                tool=(record.tool or "")[:200],
                arguments=list(record.arguments),
                outcome=record.outcome,
                reason=record.reason or "",
                user=record.user or "",
                client=(record.client or "")[:300],
                protocol_version=record.protocol_version or "",
                task_id=record.task_id or "",
            )
