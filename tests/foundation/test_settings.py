import pytest

from config.env import EnvError, env_bool, env_choice, env_database, env_float, env_int


@pytest.mark.parametrize("value", ["maybe", "2", "yess"])
def test_a_non_boolean_debug_is_an_error_naming_the_variable(value):
    with pytest.raises(EnvError, match="^DEBUG: expected a boolean"):
        env_bool("DEBUG", False, environ={"DEBUG": value})


@pytest.mark.parametrize(
    "value,expected", [("1", True), ("true", True), ("off", False), ("", False)]
)
def test_booleans_read_the_usual_spellings(value, expected):
    assert env_bool("DEBUG", True, environ={"DEBUG": value}) is expected


def test_a_bad_database_url_is_an_error_naming_the_variable():
    with pytest.raises(EnvError, match="^DATABASE_URL:"):
        env_database("DATABASE_URL", "sqlite:///x", environ={"DATABASE_URL": "mysql-ish"})


def test_a_postgres_database_url_selects_psycopg():
    config = env_database(
        "DATABASE_URL", "", environ={"DATABASE_URL": "postgres://u@127.0.0.1:5432/db"}
    )
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert config["NAME"] == "db"


def test_a_non_integer_is_an_error_naming_the_variable():
    with pytest.raises(EnvError, match="^DIAGNOSIS_MAX_RETRIES: expected an integer"):
        env_int("DIAGNOSIS_MAX_RETRIES", 1, environ={"DIAGNOSIS_MAX_RETRIES": "one"})


def test_an_integer_out_of_range_is_an_error():
    with pytest.raises(EnvError, match="at most 5"):
        env_int("DIAGNOSIS_MAX_RETRIES", 1, maximum=5, environ={"DIAGNOSIS_MAX_RETRIES": "9"})


def test_a_non_number_is_an_error_naming_the_variable():
    with pytest.raises(EnvError, match="^LLM_TIMEOUT_SECONDS:"):
        env_float("LLM_TIMEOUT_SECONDS", 1.0, environ={"LLM_TIMEOUT_SECONDS": "soon"})


def test_an_unknown_provider_is_an_error_naming_the_variable():
    with pytest.raises(EnvError, match="^LLM_PROVIDER: expected one of offline, openai"):
        env_choice(
            "LLM_PROVIDER", "offline", ("offline", "openai"), environ={"LLM_PROVIDER": "gpt"}
        )


def _settings_subprocess(env_overrides):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG"}}
    env.update(env_overrides)
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_without_debug_a_missing_secret_key_refuses_to_start():
    result = _settings_subprocess({})
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_a_bad_debug_value_refuses_to_start_with_the_name():
    result = _settings_subprocess({"DEBUG": "perhaps", "SECRET_KEY": "x"})
    assert result.returncode != 0
    assert "DEBUG: expected a boolean" in result.stderr


def test_settings_default_to_chinese_and_utc():
    from django.conf import settings

    assert settings.LANGUAGE_CODE == "zh-hans"
    assert settings.TIME_ZONE == "UTC" and settings.USE_TZ


def test_a_management_command_without_a_secret_key_says_so_in_one_line():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG"}}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    result = subprocess.run(
        [sys.executable, str(root / "manage.py"), "diagnose"],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "SECRET_KEY: must be set when DEBUG is off (for development, set DEBUG=1)"
    ]
