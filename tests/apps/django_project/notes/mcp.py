"""The notes app's tools, on the site's MCP server (``zemcp.django`` imports this module when
Django is ready; urls.py serves the server at ``/mcp``).

``add_note`` asks the user what to write, then saves it for ``ctx.user`` in a transaction
opened after the answer; ``my_notes`` lists the user's own; ``all_notes`` is for users with
the ``notes.view_note`` permission. ``count_notes_unsafe`` calls the ORM from ``async def``,
which Django refuses; ``count_notes`` does it right, through ``sync_to_async``.
``export_notes`` may run as a task.
"""

from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction

import zemcp
from tests.apps.django_project.notes.models import Note
from zemcp.django import recycled_connections, server

#: The form ``add_note`` asks with.
NOTE_FORM = {
    "type": "object",
    "properties": {"text": {"type": "string", "title": "The note", "minLength": 1}},
    "required": ["text"],
}


def signed_in(user: Any) -> bool:
    """Whether the request acts for a user the site authenticated."""
    return user is not None


@server.tool(permission=signed_in)
def add_note(ctx: zemcp.Context) -> str:
    """Ask what the new note says, then save it as the user's."""
    count = Note.objects.filter(owner=ctx.user).count()
    answer = ctx.elicit(f"You have {count} notes. What should the new one say?", NOTE_FORM, key="text")
    # Only now, with the answer, a transaction: none is held open while the user thinks.
    with transaction.atomic():
        note = Note.objects.create(owner=ctx.user, text=answer["text"])
    return f"note {note.pk} saved for {ctx.user.get_username()}"


@server.tool(permission=signed_in)
def my_notes(ctx: zemcp.Context) -> str:
    """The user's notes, oldest first, one a line."""
    return "\n".join(Note.objects.filter(owner=ctx.user).order_by("pk").values_list("text", flat=True))


@server.tool(permission="notes.view_note")
def all_notes() -> str:
    """Every user's notes, as ``user: text`` lines (for users with notes.view_note)."""
    notes = Note.objects.select_related("owner").order_by("pk")
    return "\n".join(f"{note.owner.get_username()}: {note.text}" for note in notes)


@server.tool(permission=signed_in)
async def count_notes_unsafe(ctx: zemcp.Context) -> int:
    """How many notes the user has, asked of the ORM straight from async def: Django refuses."""
    return Note.objects.filter(owner=ctx.user).count()


@sync_to_async
@recycled_connections()
def _count(user: Any) -> int:
    return Note.objects.filter(owner=user).count()


@server.tool(permission=signed_in)
async def count_notes(ctx: zemcp.Context) -> int:
    """How many notes the user has, the ORM run through sync_to_async."""
    return await _count(ctx.user)


@server.tool(permission=signed_in, task="optional")
def export_notes(ctx: zemcp.Context) -> str:
    """The user's notes as one text, made as a task when the client asks (the ORM on a task thread)."""
    texts = Note.objects.filter(owner=ctx.user).order_by("pk").values_list("text", flat=True)
    return f"{ctx.user.get_username()}: {len(texts)} notes"
