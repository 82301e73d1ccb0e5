"""The test Django project's routes: its pages, Django's login and admin, and the MCP endpoint,
which serves the site's server (``zemcp.django.server``, the notes app's tools) to signed-in
users and to MCP clients with a token the site issued (a Django REST framework token,
``Authorization: Token <key>``, or a django-oauth-toolkit access token, ``Authorization:
Bearer <token>``), and answers anyone else 401."""

from django.contrib import admin
from django.contrib.auth.views import LoginView
from django.urls import path
from oauth2_provider.contrib.rest_framework import OAuth2Authentication
from rest_framework.authentication import TokenAuthentication

import zemcp.django
from tests.apps.django_project.notes import views

urlpatterns = [
    path("", views.index),
    path("held", views.held),
    path("accounts/login/", LoginView.as_view()),
    path("admin/", admin.site.urls),
    path("mcp", zemcp.django.view(authentication=[TokenAuthentication, OAuth2Authentication])),
]
