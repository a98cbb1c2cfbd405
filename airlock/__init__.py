"""The project shell, the top of the layers: the root URLconf, the ASGI application, the home page and
its dashboard, the base layout's context and the demo seeding. It is the only package that imports
every app, and no app imports it."""
