"""REST API v1 for integrators: one APIView per operation, a service call in between.

Authentication: ``Authorization: Bearer <API key>`` or the browser session (with CSRF).
Every lookup is owner-checked: another owner's object is a 404, never a 403.

``auth`` proves who calls, ``errors`` gives every error one shape (and maps the services'
Django and domain errors to it), ``base`` is the view every endpoint extends,
``serializers`` and ``pagination`` describe the bodies, ``selectors``/``services`` read and
write, and one module per resource (``diagnoses``, ``tool_invocations``, ``keys``,
``alerts``) holds its views; ``schema`` adds the links and rate-limit headers to the
OpenAPI document; ``urls`` lists the operations. Callbacks live in
``diagnosis.callbacks``, Alertmanager ingest in ``diagnosis.alerts``.
"""
