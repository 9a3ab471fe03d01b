import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command


@pytest.mark.django_db
def test_the_demo_command_is_idempotent(tmp_path, settings):
    settings.VAR_DIR = tmp_path
    call_command("demo_setup", verbosity=0)
    first = {u.username: u.password for u in get_user_model().objects.all()}
    call_command("demo_setup", verbosity=0)
    users = get_user_model().objects.all()
    assert sorted(u.username for u in users) == ["admin", "reviewer", "sre"]
    assert {u.username: u.password for u in users} == first
    assert Group.objects.filter(name="reviewers").count() == 1


@pytest.mark.django_db
def test_demo_passwords_are_printed_and_work(tmp_path, settings, capsys):
    from io import StringIO

    settings.VAR_DIR = tmp_path
    out = StringIO()
    call_command("demo_setup", stdout=out)
    line = next(row for row in out.getvalue().splitlines() if " sre " in f" {row} ")
    password = line.split("/")[-1].strip()
    assert get_user_model().objects.get(username="sre").check_password(password)


@pytest.mark.django_db
def test_the_reviewer_may_view_but_not_change_diagnosis_data(tmp_path, settings):
    settings.VAR_DIR = tmp_path
    call_command("demo_setup", verbosity=0)
    reviewer = get_user_model().objects.get(username="reviewer")
    assert reviewer.is_staff and not reviewer.is_superuser
    assert reviewer.has_perm("diagnosis.view_diagnosissession")
    assert not reviewer.has_perm("diagnosis.change_diagnosissession")
    assert not reviewer.has_perm("diagnosis.delete_toolinvocation")
    sre = get_user_model().objects.get(username="sre")
    assert not sre.is_staff
