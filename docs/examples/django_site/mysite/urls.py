"""The site's routes: the admin, and the MCP endpoint as a view of the site."""

from django.contrib import admin
from django.urls import path

import zemcp.django

urlpatterns = [
    path("admin/", admin.site.urls),
    path("mcp", zemcp.django.view()),
]
