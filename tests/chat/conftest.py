import pytest

from tests.chat.factories import conversation_make, environment_make, session_make


@pytest.fixture
def environment(db):
    return environment_make()


@pytest.fixture
def conversation(owner, environment):
    return conversation_make(owner=owner, environment=environment)


@pytest.fixture
def answered(conversation):
    return session_make(conversation=conversation)


@pytest.fixture
def owner_client(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def outsider_client(client, outsider):
    client.force_login(outsider)
    return client
