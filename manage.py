#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        from django.conf import settings

        settings.INSTALLED_APPS  # noqa: B018 (loads the settings: a bad variable says so here)
    except ImproperlyConfigured as exc:
        # One line that names the variable, not a traceback of Django's command lookup.
        sys.stderr.write(f"{exc} (for development, set DEBUG=1)\n")
        sys.exit(2)
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
