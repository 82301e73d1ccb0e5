"""The trips the site's users book."""

from django.conf import settings
from django.db import models


class Trip(models.Model):
    """One booked trip: who goes, where, when."""

    traveller = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    city = models.CharField(max_length=100)
    date = models.CharField(max_length=40)
