"""The service's back end: :mod:`.runner` claims queued tuning jobs from the database and runs them
(``convtune worker``, and the in-process worker of ``convtune serve``). The HTTP front end is :mod:`convtune.api`.
"""
