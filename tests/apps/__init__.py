"""WSGI apps that integration tests serve under gunicorn beside the reference server."""
