"""A note: a line of text a user wrote."""

from django.conf import settings
from django.db import models


class Note(models.Model):
    """One note, owned by the user who wrote it."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notes")
    text = models.CharField(max_length=500)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.text
