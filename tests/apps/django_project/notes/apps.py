"""The notes app's configuration."""

from django.apps import AppConfig


class NotesConfig(AppConfig):
    """The notes app, labelled ``notes`` (its permissions are ``notes.view_note`` and the like)."""

    name = "tests.apps.django_project.notes"
    label = "notes"
    default_auto_field = "django.db.models.BigAutoField"
