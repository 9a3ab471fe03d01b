import pytest
from django.test import RequestFactory

from config.client_ip import client_ip


@pytest.mark.parametrize(
    "count,forwarded,expected",
    [
        (0, "1.2.3.4", "10.0.0.9"),  # no proxy trusted: the header is ignored
        (1, "6.6.6.6, 1.2.3.4", "1.2.3.4"),  # the client cannot push a forged hop past the proxy
        (2, "6.6.6.6, 1.2.3.4, 10.0.0.2", "1.2.3.4"),
        (2, "1.2.3.4", "10.0.0.9"),  # fewer hops than proxies: fall back to the peer
    ],
)
def test_the_client_address_comes_from_the_trusted_hops_only(settings, count, forwarded, expected):
    settings.TRUSTED_PROXY_COUNT = count
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.9", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected


def test_login_lockout_uses_the_project_client_address():
    from django.conf import settings

    assert settings.AXES_CLIENT_IP_CALLABLE == "config.client_ip.client_ip"
