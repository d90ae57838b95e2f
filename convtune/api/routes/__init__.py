"""One router per resource; :func:`convtune.api.main.create_app` includes each module's ``router``."""
