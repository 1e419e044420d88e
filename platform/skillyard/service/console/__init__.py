"""The web console: server-rendered pages (Jinja2) with vendored htmx 2, on the same app as the API."""
