import os

# Playwright's sync API runs an event loop in the test thread; the ORM calls the test makes
# between browser steps are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
